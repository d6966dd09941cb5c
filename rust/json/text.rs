//! Python `str` and UTF-8 text at the edges of JSON: the text a reader is given (`json_text`),
//! and new `str`s for what the parser reads and the writer produces (`new_str`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// The UTF-8 text of JSON given as `str` or `bytes` (bytes are validated once, up front).
pub(crate) fn json_text<'a>(text: &'a Bound<'_, PyAny>) -> PyResult<&'a str> {
    if let Ok(s) = text.cast::<PyString>() {
        let mut size: ffi::Py_ssize_t = 0;
        let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
        if data.is_null() {
            return Err(PyErr::fetch(text.py()));
        }
        // SAFETY: CPython's UTF-8 form of a str is valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(data as *const u8, size as usize)) });
    }
    if let Ok(b) = text.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes()).map_err(|err| {
            PyValueError::new_err(format!("invalid JSON: not UTF-8 at byte {}", err.valid_up_to()))
        });
    }
    Err(PyTypeError::new_err(format!(
        "JSON text must be str or bytes, not {}",
        text.get_type().name()?
    )))
}

/// A `str` of `text`. ASCII text (most of JSON) is copied into a new ASCII str as it is,
/// which `PyUnicode_FromStringAndSize` would first decode.
#[inline]
pub(crate) fn new_str<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyAny> {
    if text.is_ascii() {
        // SAFETY: checked just above.
        return unsafe { new_ascii_str(py, text) };
    }
    PyString::new(py, text).into_any()
}

/// `new_str` for text the caller knows to be ASCII.
///
/// # Safety
/// `text` must be ASCII.
#[inline]
pub(crate) unsafe fn new_ascii_str<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyAny> {
    #[cfg(not(any(PyPy, GraalPy)))]
    {
        let string = ffi::PyUnicode_New(text.len() as ffi::Py_ssize_t, 127);
        if !string.is_null() {
            std::ptr::copy_nonoverlapping(text.as_ptr(), ffi::PyUnicode_DATA(string) as *mut u8, text.len());
            return Bound::from_owned_ptr(py, string);
        }
        ffi::PyErr_Clear();
    }
    PyString::new(py, text).into_any()
}

