//! JSON for frozen trees: a native writer (`to_json`, also used by `Message.to_json`) and
//! `json_default` for `json`/`orjson`. The parser is `json/read/`.
//!
//! The writer emits compact JSON (no spaces), keeps non-ASCII text as UTF-8, and formats floats
//! with the shortest representation that round-trips exactly.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::json::text::{new_ascii_str, new_str};
use crate::json::write::leaves::{write_f64, write_i64, write_member_key, write_str_ptr, WROTE_NON_ASCII};
use crate::value::errors::PathError;
use crate::value::frozendict::FrozenDict;
use crate::value::message::Message;
use crate::value::walk::{check_float, check_int, is_mapping, key_error, key_text, mapping_pairs, not_json, on_enough_stack, small_int_value, Walk};

// ---------------------------------------------------------------------------------------------
// Writer

fn write_str(out: &mut Vec<u8>, text: &Bound<'_, PyAny>) -> Result<(), PathError> {
    unsafe { write_str_ptr(out, text.as_ptr()) }
}

fn write_key(out: &mut Vec<u8>, key: &Bound<'_, PyAny>) -> Result<(), PathError> {
    if !key.is_instance_of::<PyString>() {
        return Err(key_error(key));
    }
    write_str(out, key)
}

/// Write a JSON object from `(key, value)` pairs.
fn write_object<'py>(
    out: &mut Vec<u8>,
    pairs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    walk: &mut Walk,
) -> Result<(), PathError> {
    out.push(b'{');
    for (i, (key, value)) in pairs.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_key(out, &key)?;
        out.push(b':');
        write_value(out, &value, walk).map_err(|e| e.at_key(&key_text(&key)))?;
    }
    out.push(b'}');
    Ok(())
}

/// A caller's dict is written from a private copy: writing a value may run Python code (a
/// custom Mapping) that changes the dict.
fn write_dict(out: &mut Vec<u8>, dict: &Bound<'_, PyDict>, walk: &mut Walk) -> Result<(), PathError> {
    let snapshot = dict.copy().map_err(PathError::raised)?;
    write_object(out, snapshot.iter(), walk)
}

/// A tuple's items, borrowed (a tuple cannot change while it is written; a list is written from
/// a tuple snapshot).
fn write_items(out: &mut Vec<u8>, tuple: &Bound<'_, PyTuple>, walk: &mut Walk) -> Result<(), PathError> {
    out.push(b'[');
    for (i, item) in tuple.iter_borrowed().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(out, &item, walk).map_err(|e| e.at_index(i))?;
    }
    out.push(b']');
    Ok(())
}

fn write_int(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
    write_i64(out, check_int(obj)?);
    Ok(())
}

fn write_float(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
    write_f64(out, check_float(obj)?);
    Ok(())
}

/// The type objects the writer tells apart by pointer: looked up once, at module init.
pub(crate) struct FrozenTypes {
    frozen_dict: *mut ffi::PyTypeObject,
    message: *mut ffi::PyTypeObject,
}

// SAFETY: type objects live as long as the module; the pointers are only compared.
unsafe impl Send for FrozenTypes {}
unsafe impl Sync for FrozenTypes {}

static FROZEN_TYPES: std::sync::OnceLock<FrozenTypes> = std::sync::OnceLock::new();

#[inline(always)]
fn frozen_types(py: Python<'_>) -> &'static FrozenTypes {
    FROZEN_TYPES.get_or_init(|| FrozenTypes {
        frozen_dict: <FrozenDict as pyo3::PyTypeInfo>::type_object_raw(py),
        message: <Message as pyo3::PyTypeInfo>::type_object_raw(py),
    })
}

/// Write a value inside a `FrozenDict` or a `Message`. Everything there was frozen on the way in:
/// exact JSON leaves (ints in 64 bits, finite floats), `FrozenDict`s, tuples of frozen values and
/// messages, with no cycle and a known depth that the caller checked against the limit. So this
/// walk only dispatches on type pointers, borrows instead of counting references, and keeps no
/// path of its own; the one thing that can still fail is a `str` holding a lone surrogate.
/// `level` is the number of containers above `obj`.
unsafe fn write_frozen(out: &mut Vec<u8>, py: Python<'_>, obj: *mut ffi::PyObject, level: usize) -> Result<(), PathError> {
    let ty = ffi::Py_TYPE(obj);
    if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
        return write_str_ptr(out, obj);
    }
    let types = frozen_types(py);
    if ty == types.frozen_dict {
        return write_frozen_dict(out, py, obj, level);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
        write_frozen_int(out, obj);
        return Ok(());
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyBool_Type) {
        out.extend_from_slice(if obj == ffi::Py_True() { b"true" } else { b"false" });
        return Ok(());
    }
    if obj == ffi::Py_None() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyTuple_Type) {
        return write_frozen_tuple(out, py, obj, level);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
        write_f64(out, ffi::PyFloat_AS_DOUBLE(obj));
        return Ok(());
    }
    write_frozen_other(out, py, obj, level)
}

// The less common cases stay out of line: `write_frozen` runs once per value, and a small
// frame (few registers saved, no digit buffers) is most of what it costs.

#[inline(never)]
unsafe fn write_frozen_int(out: &mut Vec<u8>, obj: *mut ffi::PyObject) {
    write_i64(out, small_int_value(obj).unwrap_or_else(|| ffi::PyLong_AsLongLong(obj)));
}

#[inline(never)]
unsafe fn write_frozen_other(out: &mut Vec<u8>, py: Python<'_>, obj: *mut ffi::PyObject, level: usize) -> Result<(), PathError> {
    if ffi::Py_TYPE(obj) == frozen_types(py).message {
        let message = Bound::ref_from_ptr(py, &obj).cast_unchecked::<Message>();
        return message.get().write_frozen_json(out, py, level);
    }
    // Not reachable for values frozen by dshkit; the general writer handles anything else.
    write_value(out, Bound::ref_from_ptr(py, &obj), &mut Walk::below(level))
}

/// A `FrozenDict` (by pointer) with `level` containers above it, its depth within the limit.
pub(crate) unsafe fn write_frozen_dict(
    out: &mut Vec<u8>,
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    level: usize,
) -> Result<(), PathError> {
    let frozen = Bound::ref_from_ptr(py, &obj).cast_unchecked::<FrozenDict>().get();
    on_enough_stack(level + 1, || {
        out.push(b'{');
        for (i, (key, value)) in frozen.iter(py).enumerate() {
            write_member_key(out, key.as_ptr(), i == 0)?;
            write_frozen(out, py, value.as_ptr(), level + 1).map_err(|e| e.at_key(&key_text(&key)))?;
        }
        out.push(b'}');
        Ok(())
    })
}

/// A frozen tuple (by pointer) with `level` containers above it.
pub(crate) unsafe fn write_frozen_tuple(
    out: &mut Vec<u8>,
    py: Python<'_>,
    obj: *mut ffi::PyObject,
    level: usize,
) -> Result<(), PathError> {
    on_enough_stack(level + 1, || {
        out.push(b'[');
        let len = ffi::PyTuple_GET_SIZE(obj);
        for i in 0..len {
            if i > 0 {
                out.push(b',');
            }
            write_frozen(out, py, ffi::PyTuple_GET_ITEM(obj, i), level + 1).map_err(|e| e.at_index(i as usize))?;
        }
        out.push(b']');
        Ok(())
    })
}

pub(crate) fn write_value(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>, walk: &mut Walk) -> Result<(), PathError> {
    let py = obj.py();
    let ty = obj.get_type_ptr();
    if ty == std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
        return write_str(out, obj);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyBool_Type) {
        out.extend_from_slice(if obj.as_ptr() == unsafe { ffi::Py_True() } { b"true" } else { b"false" });
        return Ok(());
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyLong_Type) {
        return write_int(out, obj);
    }
    if ty == std::ptr::addr_of_mut!(ffi::PyFloat_Type) {
        return write_float(out, obj);
    }
    if obj.is_none() {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    let types = frozen_types(py);
    if ty == types.frozen_dict {
        let depth = unsafe { obj.cast_unchecked::<FrozenDict>() }.get().depth();
        if walk.fits(depth) {
            return unsafe { write_frozen_dict(out, py, obj.as_ptr(), walk.level()) };
        }
    }
    if ty == types.message {
        let depth = unsafe { obj.cast_unchecked::<Message>() }.get().depth();
        if walk.fits(depth) {
            return unsafe { obj.cast_unchecked::<Message>() }.get().write_frozen_json(out, py, walk.level());
        }
    }
    if let Ok(frozen) = obj.cast::<FrozenDict>() {
        let pairs = frozen.get().iter(py).map(|(key, value)| (key.to_owned(), value.to_owned()));
        return walk.within(obj, |walk| write_object(out, pairs, walk));
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return walk.within(obj, |walk| write_items(out, tuple, walk));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        return walk.within(obj, |walk| write_dict(out, dict, walk));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let snapshot = list.to_tuple();
        return walk.within(obj, |walk| write_items(out, &snapshot, walk));
    }
    if let Ok(message) = obj.cast::<Message>() {
        // The message object is a nesting level of its own, as when its JSON is parsed back.
        return walk.within(obj, |walk| message.get().write_json(out, py, walk));
    }
    if obj.is_instance_of::<PyString>() {
        return write_str(out, obj);
    }
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        out.extend_from_slice(if obj.is_truthy().unwrap_or(false) { b"true" } else { b"false" });
        return Ok(());
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        return write_int(out, obj);
    }
    if obj.is_instance_of::<pyo3::types::PyFloat>() {
        return write_float(out, obj);
    }
    if is_mapping(obj) {
        let dict = PyDict::new(py);
        for (key, value) in mapping_pairs(obj)? {
            dict.set_item(key, value).map_err(PathError::raised)?;
        }
        return walk.within(obj, |walk| write_dict(out, &dict, walk));
    }
    Err(not_json(obj))
}

thread_local! {
    /// The writer's buffer, kept between calls on this thread so that a dump does not grow a
    /// fresh one from nothing (several reallocations for a message).
    static BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A buffer larger than this is not kept for the next call.
const BUFFER_KEPT_MAX: usize = 1 << 20;

/// Run `write` on this thread's buffer (empty), then turn what it wrote into a Python object. A
/// nested call (a custom Mapping's code calling `to_json`) takes the buffer's place with a fresh one.
pub(crate) fn with_buffer<'py, T>(
    write: impl FnOnce(&mut Vec<u8>) -> PyResult<()>,
    finish: impl FnOnce(&[u8]) -> PyResult<T>,
) -> PyResult<T> {
    /// Puts back the outer dump's flag, also when a nested dump unwinds.
    struct RestoreFlag(bool);
    impl Drop for RestoreFlag {
        fn drop(&mut self) {
            WROTE_NON_ASCII.set(self.0);
        }
    }
    let _outer = RestoreFlag(WROTE_NON_ASCII.replace(false));
    let mut out = BUFFER.with(|cell| cell.take());
    out.clear();
    let result = write(&mut out).and_then(|()| finish(&out));
    if out.capacity() <= BUFFER_KEPT_MAX {
        BUFFER.with(|cell| cell.set(out));
    }
    result
}

/// The JSON text as a `str`; only as the `finish` of `with_buffer`, which keeps track of
/// whether the text can hold anything but ASCII.
pub(crate) fn json_str<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: the writer only emits valid UTF-8 (ASCII punctuation and UTF-8 from Python strs),
    // and ASCII only while no string it read could hold more.
    let text = unsafe { std::str::from_utf8_unchecked(bytes) };
    if WROTE_NON_ASCII.get() {
        return Ok(new_str(py, text));
    }
    Ok(unsafe { new_ascii_str(py, text) })
}

/// The JSON text as UTF-8 `bytes`.
pub(crate) fn json_bytes<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyBytes::new(py, bytes).into_any())
}

/// Compact JSON text of a frozen or plain JSON tree, or of a `Message`.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub(crate) fn to_json<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    with_buffer(|out| write_root(out, value), |bytes| json_str(py, bytes))
}

/// `to_json` as UTF-8 `bytes`, for writers of files, sockets and logs.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub(crate) fn to_json_bytes<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    with_buffer(|out| write_root(out, value), |bytes| json_bytes(py, bytes))
}

fn write_root(out: &mut Vec<u8>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    write_value(out, value, &mut Walk::new()).map_err(|e| e.into_pyerr("value"))
}

/// `default=` hook for `json.dumps` and `orjson.dumps`: a `FrozenDict` becomes a `dict` (its
/// values are handed back to the encoder, which calls the hook again for nested ones), a
/// `Message` its four fields.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub(crate) fn json_default<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let py = value.py();
    if let Ok(frozen) = value.cast::<FrozenDict>() {
        return Ok(frozen.get().to_dict(py)?.into_any());
    }
    if let Ok(message) = value.cast::<Message>() {
        return Ok(message.get().as_dict(py).into_any());
    }
    Err(PyTypeError::new_err(format!(
        "Object of type {} is not JSON serializable",
        value.get_type().name()?
    )))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(to_json, m)?)?;
    m.add_function(wrap_pyfunction!(to_json_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(json_default, m)?)?;
    Ok(())
}
