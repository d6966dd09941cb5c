//! Deep freeze and thaw of JSON-like trees.
//!
//! `freeze` detaches and deep-freezes: mappings with `str` keys become `FrozenDict`, lists and
//! tuples become tuples, JSON leaves (`str`, 64-bit `int`, finite `float`, `bool`, `None`) stay.
//! Parts that are already frozen are returned as they are, so re-freezing a frozen tree
//! allocates nothing. A `Message` inside a tree is kept as it is (it is frozen by construction).
//! Subclasses of `str`/`int`/`float` become the plain type: a subclass could
//! carry mutable state or change how it serialises. A `str` (value or key) holding a lone
//! surrogate, which has no UTF-8 form, gets U+FFFD in its place (`strs::replace_surrogates`): a
//! frozen value can always be logged, read back and sent to a model.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict, PyList, PyString, PyTuple};
use pyo3::Borrowed;

use crate::value::errors::PathError;
use crate::value::frozendict::{EntriesBuilder, FrozenDict};
use crate::value::message::Message;
use crate::value::strs::{holds_surrogate, plain_text};
use crate::value::walk::{check_float, check_int, is_mapping, key_error, key_text, mapping_pairs, not_json, untrack, Walk};

/// A frozen value and its nesting depth (0 for a leaf, 1 for a container of leaves, ...).
pub(crate) struct Frozen<'py> {
    pub(crate) value: Bound<'py, PyAny>,
    pub(crate) depth: usize,
}

impl<'py> Frozen<'py> {
    fn leaf(value: Bound<'py, PyAny>) -> Self {
        Frozen { value, depth: 0 }
    }
}

pub(crate) type FreezeResult<'py> = Result<Frozen<'py>, PathError>;

/// An already-frozen part of `depth` levels placed here, as it is (it must still respect the
/// depth limit).
fn reuse<'py>(walk: &Walk, value: &Bound<'py, PyAny>, depth: usize) -> FreezeResult<'py> {
    walk.check_fits(depth)?;
    Ok(Frozen { value: value.clone(), depth })
}

/// Is `obj` a JSON leaf of an exact builtin type, kept as it is? Checked inline by the
/// container loops (most values are leaves), so they skip the general dispatch.
#[inline(always)]
fn is_kept_leaf(obj: &Bound<'_, PyAny>) -> Result<bool, PathError> {
    let ty = obj.get_type_ptr();
    if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
        return Ok(!unsafe { holds_surrogate(obj.as_ptr()) });
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyBool_Type) || obj.is_none() {
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
pub(crate) fn freeze_value<'py>(obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
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
        return reuse(walk, obj, frozen.get().depth());
    }
    if let Ok(message) = obj.cast_exact::<Message>() {
        // A Message is an immutable value: event data may hold one beside envelope facts.
        return reuse(walk, obj, message.get().depth());
    }
    freeze_uncommon(py, obj, walk)
}

/// Subclasses and other mappings: the slow path, kept out of line.
#[inline(never)]
fn freeze_uncommon<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>, walk: &mut Walk) -> FreezeResult<'py> {
    unsafe {
        let ptr = obj.as_ptr();
        if ffi::PyUnicode_Check(ptr) != 0 {
            // A str subclass (keep only the characters) or a str holding a lone surrogate.
            let copy = plain_text(ptr);
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
        return reuse(walk, obj, message.get().depth());
    }
    if is_mapping(obj) {
        return walk.within(obj, |walk| freeze_mapping_items(obj, walk));
    }
    Err(not_json(obj))
}

/// Freeze a `dict` (or subclass) in two passes: first take a snapshot of its entries (no Python
/// code runs meanwhile, so nothing can change the dict under the walk), then freeze the values
/// in the snapshot, which becomes the `FrozenDict`'s own storage.
fn freeze_dict<'py>(dict: &Bound<'py, PyDict>, walk: &mut Walk) -> FreezeResult<'py> {
    let py = dict.py();
    walk.within(dict.as_any(), |walk| {
        let mut entries = EntriesBuilder::with_capacity(dict.len());
        let mut keys_to_copy = false; // a str subclass, or a key holding a lone surrogate
        let mut pos: ffi::Py_ssize_t = 0;
        let mut key_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        let mut value_ptr: *mut ffi::PyObject = std::ptr::null_mut();
        while unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key_ptr, &mut value_ptr) } != 0 {
            let key = unsafe { Borrowed::from_ptr(py, key_ptr) };
            if !key.is_exact_instance_of::<PyString>() {
                if !key.is_instance_of::<PyString>() {
                    return Err(key_error(&key));
                }
                keys_to_copy = true;
            } else if unsafe { holds_surrogate(key_ptr) } {
                keys_to_copy = true;
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
        if keys_to_copy {
            // Plain keys may now collide (a subclass can make equal text hash apart, two keys
            // may differ only in their surrogates): a dict settles it the way `dict` would.
            let plain = PyDict::new(py);
            for index in 0..entries.len() {
                let key = entries.key(py, index);
                let key = unsafe { Bound::from_owned_ptr_or_err(py, plain_text(key.as_ptr())) }.map_err(PathError::raised)?;
                plain.set_item(key, entries.value(py, index)).map_err(PathError::raised)?;
            }
            return Ok(Frozen { value: FrozenDict::wrap(py, plain, depth + 1).into_any(), depth: depth + 1 });
        }
        Ok(Frozen { value: entries.build(py, depth + 1).into_any(), depth: depth + 1 })
    })
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
        let key = if key.is_exact_instance_of::<PyString>() && !unsafe { holds_surrogate(key.as_ptr()) } {
            key
        } else {
            unsafe { Bound::from_owned_ptr_or_err(py, plain_text(key.as_ptr())) }.map_err(PathError::raised)?
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
pub(crate) fn freeze_below<'py>(obj: &Bound<'py, PyAny>, root: &str, outer_levels: usize) -> PyResult<Frozen<'py>> {
    freeze_value(obj, &mut Walk::below(outer_levels)).map_err(|e| e.into_pyerr(root))
}

/// Freeze with errors reported under `root`.
pub(crate) fn freeze_at<'py>(obj: &Bound<'py, PyAny>, root: &str) -> PyResult<Bound<'py, PyAny>> {
    freeze_below(obj, root, 0).map(|frozen| frozen.value)
}

/// Deep-freeze and detach a JSON-like tree (a lone surrogate in a `str` becomes U+FFFD).
#[pyfunction]
#[pyo3(signature = (value, /))]
pub(crate) fn freeze<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
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
pub(crate) fn thaw<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    thaw_value(value, &mut Walk::new()).map_err(|e| e.into_pyerr("value"))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(freeze, m)?)?;
    m.add_function(wrap_pyfunction!(thaw, m)?)?;
    Ok(())
}
