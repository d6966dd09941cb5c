//! Deep freeze and thaw of JSON-like trees.
//!
//! `freeze` detaches and deep-freezes: mappings with `str` keys become `FrozenDict`, lists and
//! tuples become tuples, JSON leaves (`str`, 64-bit `int`, finite `float`, `bool`, `None`) stay.
//! Parts that are already frozen are returned as they are, so re-freezing a frozen tree
//! allocates nothing. A `Message` inside a tree is kept as it is (it is frozen by construction).
//! Subclasses of `str`/`int`/`float` become the plain type: a subclass could
//! carry mutable state or change how it serialises.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::Borrowed;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyDict, PyList, PyString, PyTuple, PyType};

use crate::errors::PathError;
use crate::frozendict::{EntriesBuilder, FrozenDict};
use crate::message::Message;

/// Take a container the walk built out of the cyclic GC. Frozen values only reference values
/// that existed before them, so they can never be part of a cycle; tracking them would only
/// make every collection walk them (it dominated the cost of freezing large trees).
pub fn untrack(obj: &Bound<'_, PyAny>) {
    unsafe {
        if ffi::PyObject_IS_GC(obj.as_ptr()) != 0 {
            ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
        }
    }
}

/// Containers may nest this deep (the root container is level 1).
pub const MAX_DEPTH: usize = 256;

/// Reserve this much stack before recursing into a container, growing onto the heap when less
/// is left: 256 levels must also fit on small thread stacks.
pub const STACK_RED_ZONE: usize = 64 * 1024;
pub const STACK_GROWTH: usize = 1024 * 1024;
pub const STACK_CHECK_EVERY: usize = 8;

/// A frozen value and its nesting depth (0 for a leaf, 1 for a container of leaves, ...).
pub struct Frozen<'py> {
    pub value: Bound<'py, PyAny>,
    pub depth: usize,
}

impl<'py> Frozen<'py> {
    fn leaf(value: Bound<'py, PyAny>) -> Self {
        Frozen { value, depth: 0 }
    }
}

pub type FreezeResult<'py> = Result<Frozen<'py>, PathError>;

fn too_deep() -> PathError {
    PathError::value_error(format!("nesting deeper than {MAX_DEPTH} levels"))
}

/// Walk state: the containers on the current path, to tell a cycle from deep nesting.
pub struct Walk {
    path: Vec<*mut ffi::PyObject>,
    /// Levels above the walk's root (a message's content sits one level below the message).
    outer_levels: usize,
}

impl Walk {
    pub fn new() -> Self {
        Walk { path: Vec::with_capacity(16), outer_levels: 0 }
    }

    pub fn below(outer_levels: usize) -> Self {
        Walk { path: Vec::with_capacity(16), outer_levels }
    }

    fn level(&self) -> usize {
        self.outer_levels + self.path.len()
    }

    /// Enter a container; errors when nesting exceeds `MAX_DEPTH` (reporting a cycle if the
    /// container is already on the path).
    pub fn enter(&mut self, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
        if self.level() >= MAX_DEPTH {
            let ptr = obj.as_ptr();
            if let Some(first) = self.path.iter().position(|p| *p == ptr) {
                // Name the path to the container's second appearance: where the cycle closes.
                let second = self.path[first + 1..].iter().position(|p| *p == ptr).map(|i| first + 1 + i);
                let mut err = PathError::value_error("cycle detected: a container contains itself");
                err.outer_segments = Some(second.unwrap_or(self.path.len()));
                return Err(err);
            }
            return Err(too_deep());
        }
        self.path.push(obj.as_ptr());
        Ok(())
    }

    pub fn leave(&mut self) {
        self.path.pop();
    }

    /// An already-frozen part of `depth` levels placed here must still respect the limit.
    fn reuse<'py>(&self, value: &Bound<'py, PyAny>, depth: usize) -> FreezeResult<'py> {
        if self.level() + depth > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(Frozen { value: value.clone(), depth })
    }

    /// Run `inside` with `obj` entered as a container, on enough stack.
    pub fn within<'py, T>(
        &mut self,
        obj: &Bound<'py, PyAny>,
        inside: impl FnOnce(&mut Walk) -> Result<T, PathError>,
    ) -> Result<T, PathError> {
        self.enter(obj)?;
        // Checking the stack costs a thread-local read: once every few levels is enough, as the
        // red zone covers far more than that many frames.
        let result = if self.path.len() % STACK_CHECK_EVERY == 0 {
            stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, || inside(self))
        } else {
            inside(self)
        };
        self.leave();
        result
    }
}

impl Default for Walk {
    fn default() -> Self {
        Self::new()
    }
}

pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".to_owned())
}

pub fn not_json(obj: &Bound<'_, PyAny>) -> PathError {
    PathError::type_error(format!("{} is not a JSON value", type_name(obj)))
}

fn mapping_abc(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static MAPPING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    MAPPING.import(py, "collections.abc", "Mapping")
}

pub fn is_mapping(obj: &Bound<'_, PyAny>) -> bool {
    match mapping_abc(obj.py()) {
        Ok(abc) => obj.is_instance(abc).unwrap_or(false),
        Err(_) => false,
    }
}

/// Check that an `int` fits in 64 signed bits.
pub fn check_int(obj: &Bound<'_, PyAny>) -> Result<i64, PathError> {
    let mut overflow: std::os::raw::c_int = 0;
    let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
    if overflow != 0 {
        return Err(PathError::value_error(format!(
            "int {} is outside the 64-bit signed range",
            obj.str().map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if value == -1 && unsafe { !ffi::PyErr_Occurred().is_null() } {
        return Err(PathError::raised(PyErr::fetch(obj.py())));
    }
    Ok(value)
}

pub fn check_float(obj: &Bound<'_, PyAny>) -> Result<f64, PathError> {
    let value = unsafe { ffi::PyFloat_AsDouble(obj.as_ptr()) };
    if !value.is_finite() {
        return Err(PathError::value_error(format!(
            "float {} is not a JSON value (NaN and infinities are not allowed)",
            if value.is_nan() { "nan".to_owned() } else { format!("{value}") }
        )));
    }
    Ok(value)
}

/// Is `obj` a JSON leaf of an exact builtin type, kept as it is? Checked inline by the
/// container loops (most values are leaves), so they skip the general dispatch.
#[inline(always)]
fn is_kept_leaf(obj: &Bound<'_, PyAny>) -> Result<bool, PathError> {
    let ty = obj.get_type_ptr();
    if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type)
        || ty == std::ptr::addr_of_mut!(ffi::PyBool_Type)
        || obj.is_none()
    {
        return Ok(true);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
        check_int(obj)?;
        return Ok(true);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
        check_float(obj)?;
        return Ok(true);
    }
    Ok(false)
}

/// Deep-freeze `obj`.
pub fn freeze_value<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = obj.py();
    if is_kept_leaf(obj)? {
        return Ok(Frozen::leaf(obj.clone()));
    }
    let ty = obj.get_type_ptr();
    unsafe {
        if ty == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
            return freeze_dict(obj.cast_unchecked::<PyDict>(), walk);
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyTuple_Type) {
            return walk.within(obj, |walk| freeze_items(obj.cast_unchecked::<PyTuple>(), walk));
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyList_Type) {
            return freeze_list(obj.cast_unchecked::<PyList>(), walk);
        }
    }
    if let Ok(frozen) = obj.cast_exact::<FrozenDict>() {
        return walk.reuse(obj, frozen.get().depth());
    }
    if let Ok(message) = obj.cast_exact::<Message>() {
        // A Message is an immutable value: event data may hold one beside envelope facts.
        return walk.reuse(obj, message.get().depth());
    }
    freeze_uncommon(py, obj, walk)
}

/// Subclasses and other mappings: the slow path, kept out of line.
#[inline(never)]
fn freeze_uncommon<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    unsafe {
        let ptr = obj.as_ptr();
        if ffi::PyUnicode_Check(ptr) != 0 {
            // A str subclass: keep only the characters.
            let copy = ffi::PyUnicode_FromObject(ptr);
            return Bound::from_owned_ptr_or_err(py, copy).map(Frozen::leaf).map_err(PathError::raised);
        }
        if ffi::PyLong_Check(ptr) != 0 {
            let value = check_int(obj)?;
            return Ok(Frozen::leaf(Bound::from_owned_ptr(py, ffi::PyLong_FromLongLong(value))));
        }
        if ffi::PyFloat_Check(ptr) != 0 {
            let value = check_float(obj)?;
            return Ok(Frozen::leaf(Bound::from_owned_ptr(py, ffi::PyFloat_FromDouble(value))));
        }
        if ffi::PyDict_Check(ptr) != 0 {
            return freeze_dict(obj.cast_unchecked::<PyDict>(), walk);
        }
        if ffi::PyTuple_Check(ptr) != 0 || ffi::PyList_Check(ptr) != 0 {
            let items = Bound::from_owned_ptr_or_err(py, ffi::PySequence_Tuple(ptr)).map_err(PathError::raised)?;
            return owned_tuple(walk.within(obj, |walk| freeze_items(items.cast_unchecked::<PyTuple>(), walk)));
        }
    }
    if let Ok(message) = obj.cast::<Message>() {
        return walk.reuse(obj, message.get().depth());
    }
    if is_mapping(obj) {
        return walk.within(obj, |walk| freeze_mapping_items(obj, walk));
    }
    Err(not_json(obj))
}

fn key_error(key: &Bound<'_, PyAny>) -> PathError {
    PathError::type_error(format!(
        "keys must be str, not {} ({})",
        type_name(key),
        key.repr().map(|r| r.to_string()).unwrap_or_default()
    ))
}

fn key_text(key: &Bound<'_, PyAny>) -> String {
    key.cast::<PyString>().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Freeze a `dict` (or subclass) in two passes: first take a snapshot of its entries (no Python
/// code runs meanwhile, so nothing can change the dict under the walk), then freeze the values
/// in the snapshot, which becomes the `FrozenDict`'s own storage.
fn freeze_dict<'py>(dict: &Bound<'py, PyDict>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = dict.py();
    walk.within(dict.as_any(), |walk| {
        let mut entries = EntriesBuilder::with_capacity(dict.len());
        let mut str_subclass_keys = false;
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        while unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key_ptr, &mut value_ptr) } != 0 {
            let key = unsafe { Borrowed::from_ptr(py, key_ptr) };
            if !key.is_exact_instance_of::<PyString>() {
                if !key.is_instance_of::<PyString>() {
                    return Err(key_error(&key));
                }
                str_subclass_keys = true;
            }
            entries.push(key.to_owned(), unsafe { Borrowed::from_ptr(py, value_ptr) }.to_owned());
        }
        let mut depth = 0;
        for index in 0..entries.len() {
            let value = entries.value(py, index).to_owned();
            let at_key = |e: PathError| e.at_key(&key_text(&entries.key(py, index)));
            if is_kept_leaf(&value).map_err(at_key)? {
                continue;
            }
            let frozen = freeze_value(&value, walk).map_err(at_key)?;
            depth = depth.max(frozen.depth);
            if !frozen.value.is(&value) {
                entries.set_value(index, frozen.value);
            }
        }
        if str_subclass_keys {
            // Plain keys may now collide (a subclass can make equal text hash apart): a dict
            // settles it the way `dict` would.
            let plain = PyDict::new(py);
            for index in 0..entries.len() {
                let key = entries.key(py, index);
                let key = unsafe { Bound::from_owned_ptr(py, ffi::PyUnicode_FromObject(key.as_ptr())) };
                plain.set_item(key, entries.value(py, index)).map_err(PathError::raised)?;
            }
            return Ok(Frozen { value: FrozenDict::wrap(py, plain, depth + 1).into_any(), depth: depth + 1 });
        }
        Ok(Frozen { value: entries.build(py, depth + 1).into_any(), depth: depth + 1 })
    })
}

/// The `(key, value)` pairs of a non-`dict` `Mapping`, from its own `items()`. An exception its
/// code raises (even KeyboardInterrupt) propagates unchanged.
pub fn mapping_pairs<'py>(obj: &Bound<'py, PyAny>) -> Result<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>, PathError> {
    let py = obj.py();
    let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMapping_Items(obj.as_ptr())) }
        .map_err(PathError::raised)?;
    let mut pairs = Vec::new();
    for pair in items.try_iter().map_err(PathError::raised)? {
        let pair = pair.map_err(PathError::raised)?;
        let pair = pair
            .extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>()
            .map_err(|_| PathError::type_error("the mapping's items() must give (key, value) pairs"))?;
        pairs.push(pair);
    }
    Ok(pairs)
}

/// Freeze any other `Mapping` through its `items()`.
fn freeze_mapping_items<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = obj.py();
    let dict = PyDict::new(py);
    let mut depth = 0;
    for (key, value) in mapping_pairs(obj)? {
        if !key.is_instance_of::<PyString>() {
            return Err(key_error(&key));
        }
        let key_text = key_text(&key);
        let key = if key.is_exact_instance_of::<PyString>() {
            key
        } else {
            unsafe { Bound::from_owned_ptr(py, ffi::PyUnicode_FromObject(key.as_ptr())) }
        };
        let frozen = freeze_value(&value, walk).map_err(|e| e.at_key(&key_text))?;
        depth = depth.max(frozen.depth);
        dict.set_item(key, frozen.value).map_err(PathError::raised)?;
    }
    Ok(Frozen { value: FrozenDict::wrap(py, dict, depth + 1).into_any(), depth: depth + 1 })
}

/// A tuple this walk made (a snapshot or a fresh one) leaves the cyclic GC.
fn owned_tuple(frozen: FreezeResult<'_>) -> FreezeResult<'_> {
    if let Ok(frozen) = &frozen {
        untrack(&frozen.value);
    }
    frozen
}

/// Freeze a list: snapshot it as a tuple first (the caller may mutate the list meanwhile).
fn freeze_list<'py>(list: &Bound<'py, PyList>, walk: &mut Walk) -> FreezeResult<'py> {
    let tuple = list.to_tuple();
    owned_tuple(walk.within(list.as_any(), |walk| freeze_items(&tuple, walk)))
}

/// Freeze the items of a tuple the walk owns or may reuse: returns the same tuple when every
/// item is already frozen, else a new one.
fn freeze_items<'py>(tuple: &Bound<'py, PyTuple>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = tuple.py();
    let len = tuple.len();
    let mut fresh: Option<Bound<'py, PyTuple>> = None;
    let mut depth = 0;
    for i in 0..len {
        let item = unsafe { tuple.get_borrowed_item_unchecked(i) };
        if fresh.is_none() && is_kept_leaf(&item).map_err(|e| e.at_index(i))? {
            continue;
        }
        let frozen = freeze_value(&item, walk).map_err(|e| e.at_index(i))?;
        depth = depth.max(frozen.depth);
        if fresh.is_none() && !frozen.value.is(&*item) {
            // First change: copy the unchanged prefix into a new tuple.
            let new = unsafe {
                Bound::from_owned_ptr(py, ffi::PyTuple_New(len as ffi::Py_ssize_t)).cast_into_unchecked::<PyTuple>()
            };
            for j in 0..i {
                let same = unsafe { tuple.get_borrowed_item_unchecked(j) };
                unsafe { ffi::PyTuple_SET_ITEM(new.as_ptr(), j as ffi::Py_ssize_t, same.to_owned().into_ptr()) };
            }
            fresh = Some(new);
        }
        if let Some(new) = &fresh {
            unsafe { ffi::PyTuple_SET_ITEM(new.as_ptr(), i as ffi::Py_ssize_t, frozen.value.into_ptr()) };
        }
    }
    let value = match fresh {
        Some(new) => {
            untrack(new.as_any());
            new.into_any()
        }
        None => tuple.clone().into_any(),
    };
    Ok(Frozen { value, depth: depth + 1 })
}

/// Freeze with errors reported under `root` (`content[2]['arguments']: ...`), `outer_levels`
/// below the top of the tree it will sit in.
pub fn freeze_below<'py>(obj: &Bound<'py, PyAny>, root: &str, outer_levels: usize) -> PyResult<Frozen<'py>> {
    freeze_value(obj, &mut Walk::below(outer_levels)).map_err(|e| e.into_pyerr(root))
}

/// Freeze with errors reported under `root`.
pub fn freeze_at<'py>(obj: &Bound<'py, PyAny>, root: &str) -> PyResult<Bound<'py, PyAny>> {
    freeze_below(obj, root, 0).map(|frozen| frozen.value)
}

/// Deep-freeze and detach a JSON-like tree.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub fn freeze<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    freeze_at(value, "value")
}

type ThawResult<'py> = Result<Bound<'py, PyAny>, PathError>;

fn thaw_value<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> ThawResult<'py> {
    let py = obj.py();
    if let Ok(frozen) = obj.cast::<FrozenDict>() {
        let pairs = frozen.get().iter(py).map(|(key, value)| (key.to_owned(), value.to_owned()));
        return thaw_pairs(obj, pairs, walk);
    }
    if let Ok(message) = obj.cast::<Message>() {
        return thaw_value(&message.get().as_dict(py).into_any(), walk);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let snapshot = dict.copy().map_err(PathError::raised)?;
        return thaw_pairs(obj, snapshot.iter(), walk);
    }
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PySequence_Tuple(obj.as_ptr())) }
            .map_err(PathError::raised)?;
        return walk.within(obj, |walk| {
            let list = PyList::empty(py);
            for (i, item) in unsafe { items.cast_unchecked::<PyTuple>() }.iter().enumerate() {
                let thawed = thaw_value(&item, walk).map_err(|e| e.at_index(i))?;
                list.append(thawed).map_err(PathError::raised)?;
            }
            Ok(list.into_any())
        });
    }
    if obj.is_instance_of::<PyString>()
        || obj.is_none()
        || obj.is_instance_of::<pyo3::types::PyBool>()
        || obj.is_instance_of::<pyo3::types::PyInt>()
        || obj.is_instance_of::<pyo3::types::PyFloat>()
    {
        return freeze_value(obj, walk).map(|frozen| frozen.value);
    }
    if is_mapping(obj) {
        return thaw_pairs(obj, mapping_pairs(obj)?.into_iter(), walk);
    }
    Err(not_json(obj))
}

fn thaw_pairs<'py>(
    container: &Bound<'py, PyAny>,
    pairs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    walk: &mut Walk,
) -> ThawResult<'py> {
    let py = container.py();
    walk.within(container, |walk| {
        let dict = PyDict::new(py);
        for (key, value) in pairs {
            if !key.is_instance_of::<PyString>() {
                return Err(key_error(&key));
            }
            let thawed = thaw_value(&value, walk).map_err(|e| e.at_key(&key_text(&key)))?;
            dict.set_item(key, thawed).map_err(PathError::raised)?;
        }
        Ok(dict.into_any())
    })
}

/// A plain, mutable, detached `dict`/`list` tree (a `Message` becomes its dict form).
#[pyfunction]
#[pyo3(signature = (value, /))]
pub fn thaw<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    thaw_value(value, &mut Walk::new()).map_err(|e| e.into_pyerr("value"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(freeze, m)?)?;
    m.add_function(wrap_pyfunction!(thaw, m)?)?;
    Ok(())
}
