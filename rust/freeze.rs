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
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyDict, PyList, PyString, PyTuple, PyType};

use crate::errors::PathError;
use crate::frozendict::FrozenDict;
use crate::message::Message;

/// Containers may nest this deep (the root container is level 1).
pub const MAX_DEPTH: usize = 256;

pub type FreezeResult<'py> = Result<Bound<'py, PyAny>, PathError>;

/// Walk state: the containers on the current path, to tell a cycle from deep nesting.
pub struct Walk {
    path: Vec<*mut ffi::PyObject>,
}

impl Walk {
    pub fn new() -> Self {
        Walk { path: Vec::new() }
    }

    /// Enter a container; errors when nesting exceeds `MAX_DEPTH` (reporting a cycle if the
    /// container is already on the path).
    pub fn enter(&mut self, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
        if self.path.len() >= MAX_DEPTH {
            if self.path.contains(&obj.as_ptr()) {
                return Err(PathError::value_error("cycle detected: a container contains itself"));
            }
            return Err(PathError::value_error(format!(
                "nesting deeper than {MAX_DEPTH} levels"
            )));
        }
        self.path.push(obj.as_ptr());
        Ok(())
    }

    pub fn leave(&mut self) {
        self.path.pop();
    }
}

impl Default for Walk {
    fn default() -> Self {
        Self::new()
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
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
fn check_int(obj: &Bound<'_, PyAny>) -> Result<i64, PathError> {
    let mut overflow: std::os::raw::c_int = 0;
    let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
    if overflow != 0 {
        return Err(PathError::value_error(format!(
            "int {} is outside the 64-bit signed range",
            obj.str().map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if value == -1 && unsafe { !ffi::PyErr_Occurred().is_null() } {
        unsafe { ffi::PyErr_Clear() };
        return Err(PathError::type_error("int could not be read"));
    }
    Ok(value)
}

fn check_float(obj: &Bound<'_, PyAny>) -> Result<f64, PathError> {
    let value = unsafe { ffi::PyFloat_AsDouble(obj.as_ptr()) };
    if !value.is_finite() {
        return Err(PathError::value_error(format!(
            "float {} is not a JSON value (NaN and infinities are not allowed)",
            if value.is_nan() { "nan".to_owned() } else { format!("{value}") }
        )));
    }
    Ok(value)
}

/// Deep-freeze `obj`.
pub fn freeze_value<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = obj.py();
    let ty = obj.get_type_ptr();
    unsafe {
        if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type)
            || ty == std::ptr::addr_of_mut!(ffi::PyBool_Type)
            || obj.is_none()
        {
            return Ok(obj.clone());
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
            check_int(obj)?;
            return Ok(obj.clone());
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
            check_float(obj)?;
            return Ok(obj.clone());
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyDict_Type) {
            return freeze_dict(obj.cast_unchecked::<PyDict>(), walk);
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyTuple_Type) {
            return freeze_tuple(obj.cast_unchecked::<PyTuple>(), walk);
        }
        if ty == std::ptr::addr_of_mut!(ffi::PyList_Type) {
            return freeze_list(obj.cast_unchecked::<PyList>(), walk);
        }
    }
    if obj.is_exact_instance_of::<FrozenDict>() || obj.is_exact_instance_of::<Message>() {
        return Ok(obj.clone());
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
            return Bound::from_owned_ptr_or_err(py, copy).map_err(|_| not_json(obj));
        }
        if ffi::PyLong_Check(ptr) != 0 {
            let value = check_int(obj)?;
            return Ok(Bound::from_owned_ptr(py, ffi::PyLong_FromLongLong(value)));
        }
        if ffi::PyFloat_Check(ptr) != 0 {
            let value = check_float(obj)?;
            return Ok(Bound::from_owned_ptr(py, ffi::PyFloat_FromDouble(value)));
        }
        if ffi::PyDict_Check(ptr) != 0 {
            return freeze_dict(obj.cast_unchecked::<PyDict>(), walk);
        }
        if ffi::PyTuple_Check(ptr) != 0 || ffi::PyList_Check(ptr) != 0 {
            let items = Bound::from_owned_ptr_or_err(py, ffi::PySequence_Tuple(ptr))
                .map_err(|_| not_json(obj))?;
            walk.enter(obj)?;
            let frozen = freeze_items(items.cast_unchecked::<PyTuple>(), walk);
            walk.leave();
            return frozen;
        }
    }
    if obj.is_instance_of::<Message>() {
        // A Message is an immutable value: event data may hold one beside envelope facts.
        return Ok(obj.clone());
    }
    if is_mapping(obj) {
        walk.enter(obj)?;
        let frozen = freeze_mapping_items(obj, walk);
        walk.leave();
        return frozen;
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

/// Freeze a `dict` (or subclass): copy it privately, then replace values in place. The copy is
/// ours alone, so nothing another thread does to the caller's dict can disturb the walk.
fn freeze_dict<'py>(dict: &Bound<'py, PyDict>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = dict.py();
    walk.enter(dict.as_any())?;
    let result = (|| {
        let copy = unsafe {
            Bound::from_owned_ptr_or_err(py, ffi::PyDict_Copy(dict.as_ptr()))
                .map_err(|_| PathError::type_error("dict could not be copied"))?
                .cast_into_unchecked::<PyDict>()
        };
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        let mut rebuilt_keys = false;
        while unsafe { ffi::PyDict_Next(copy.as_ptr(), &mut pos, &mut key_ptr, &mut value_ptr) } != 0 {
            let key = unsafe { Bound::from_borrowed_ptr(py, key_ptr) };
            let value = unsafe { Bound::from_borrowed_ptr(py, value_ptr) };
            if !key.is_exact_instance_of::<PyString>() {
                if key.is_instance_of::<PyString>() {
                    rebuilt_keys = true;
                } else {
                    return Err(key_error(&key));
                }
            }
            let frozen = freeze_value(&value, walk).map_err(|e| e.at_key(&key_text(&key)))?;
            if !frozen.is(&value) {
                // Same key set: replacing a value during PyDict_Next is allowed.
                unsafe { ffi::PyDict_SetItem(copy.as_ptr(), key_ptr, frozen.as_ptr()) };
            }
        }
        if rebuilt_keys {
            let plain = PyDict::new(py);
            for (key, value) in copy.iter() {
                let key = unsafe { Bound::from_owned_ptr(py, ffi::PyUnicode_FromObject(key.as_ptr())) };
                plain.set_item(key, value).map_err(|_| PathError::type_error("dict could not be built"))?;
            }
            return Ok(FrozenDict::wrap(py, plain).into_any());
        }
        Ok(FrozenDict::wrap(py, copy).into_any())
    })();
    walk.leave();
    result
}

/// Freeze any other `Mapping` through its `items()`.
fn freeze_mapping_items<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = obj.py();
    let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMapping_Items(obj.as_ptr())) }
        .map_err(|e| PathError::type_error(format!("mapping items() failed: {e}")))?;
    let items = items.cast_into::<PyList>().map_err(|_| PathError::type_error("items() is not a list"))?;
    let dict = PyDict::new(py);
    for pair in items.iter() {
        let (key, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) =
            pair.extract().map_err(|_| PathError::type_error("mapping items() must be pairs"))?;
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
        dict.set_item(key, frozen).map_err(|_| PathError::type_error("dict could not be built"))?;
    }
    Ok(FrozenDict::wrap(py, dict).into_any())
}

/// Freeze a list: snapshot it as a tuple first (the caller may mutate the list meanwhile).
fn freeze_list<'py>(list: &Bound<'py, PyList>, walk: &mut Walk) -> FreezeResult<'py> {
    let tuple = list.to_tuple();
    walk.enter(list.as_any())?;
    let frozen = freeze_items(&tuple, walk);
    walk.leave();
    frozen
}

fn freeze_tuple<'py>(tuple: &Bound<'py, PyTuple>, walk: &mut Walk) -> FreezeResult<'py> {
    walk.enter(tuple.as_any())?;
    let frozen = freeze_items(tuple, walk);
    walk.leave();
    frozen
}

/// Freeze the items of a tuple the walk owns or may reuse: returns the same tuple when every
/// item is already frozen, else a new one.
fn freeze_items<'py>(tuple: &Bound<'py, PyTuple>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = tuple.py();
    let len = tuple.len();
    let mut fresh: Option<Bound<'py, PyTuple>> = None;
    for i in 0..len {
        let item = unsafe { tuple.get_borrowed_item_unchecked(i) };
        let frozen = freeze_value(&item, walk).map_err(|e| e.at_index(i))?;
        if fresh.is_none() && !frozen.is(&*item) {
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
            unsafe { ffi::PyTuple_SET_ITEM(new.as_ptr(), i as ffi::Py_ssize_t, frozen.into_ptr()) };
        }
    }
    Ok(match fresh {
        Some(new) => new.into_any(),
        None => tuple.clone().into_any(),
    })
}

/// Freeze with errors reported under `root` (`content[2]['arguments']: ...`).
pub fn freeze_at<'py>(obj: &Bound<'py, PyAny>, root: &str) -> PyResult<Bound<'py, PyAny>> {
    freeze_value(obj, &mut Walk::new()).map_err(|e| e.into_pyerr(root))
}

/// Deep-freeze and detach a JSON-like tree.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub fn freeze<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    freeze_at(value, "value")
}

fn thaw_value<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = obj.py();
    if let Ok(frozen) = obj.cast::<FrozenDict>() {
        return thaw_pairs(obj, frozen.get().dict(py).iter(), walk);
    }
    if let Ok(message) = obj.cast::<Message>() {
        return thaw_value(&message.get().as_dict(py).into_any(), walk);
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let snapshot = dict.copy().map_err(|_| PathError::type_error("dict could not be copied"))?;
        return thaw_pairs(obj, snapshot.iter(), walk);
    }
    if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() {
        let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PySequence_Tuple(obj.as_ptr())) }
            .map_err(|_| not_json(obj))?;
        walk.enter(obj)?;
        let list = PyList::empty(py);
        let result = (|| {
            for (i, item) in unsafe { items.cast_unchecked::<PyTuple>() }.iter().enumerate() {
                let thawed = thaw_value(&item, walk).map_err(|e| e.at_index(i))?;
                list.append(thawed).map_err(|_| PathError::type_error("list could not be built"))?;
            }
            Ok(list.into_any())
        })();
        walk.leave();
        return result;
    }
    if obj.is_instance_of::<PyString>() || obj.is_none() || obj.is_instance_of::<pyo3::types::PyBool>() {
        return freeze_value(obj, walk);
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() || obj.is_instance_of::<pyo3::types::PyFloat>() {
        return freeze_value(obj, walk);
    }
    if is_mapping(obj) {
        let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMapping_Items(obj.as_ptr())) }
            .map_err(|e| PathError::type_error(format!("mapping items() failed: {e}")))?;
        let pairs: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)> =
            items.extract().map_err(|_| PathError::type_error("mapping items() must be pairs"))?;
        return thaw_pairs(obj, pairs.into_iter(), walk);
    }
    Err(not_json(obj))
}

fn thaw_pairs<'py>(
    container: &Bound<'py, PyAny>,
    pairs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    walk: &mut Walk,
) -> FreezeResult<'py> {
    let py = container.py();
    walk.enter(container)?;
    let dict = PyDict::new(py);
    let result = (|| {
        for (key, value) in pairs {
            if !key.is_instance_of::<PyString>() {
                return Err(key_error(&key));
            }
            let thawed = thaw_value(&value, walk).map_err(|e| e.at_key(&key_text(&key)))?;
            dict.set_item(key, thawed).map_err(|_| PathError::type_error("dict could not be built"))?;
        }
        Ok(dict.into_any())
    })();
    walk.leave();
    result
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
