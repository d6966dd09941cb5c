//! The UTF-8 text CPython keeps for a `str`, read in place: for the writer's strings and keys
//! (`json/write/leaves.rs`) and the fixed keys the core looks up (`FrozenDict::get_str`).

use pyo3::ffi;

/// The text of a compact ASCII `str` (most keys and JSON text), read from the object itself,
/// where CPython keeps it; `None` for any other `str`.
#[inline(always)]
pub(crate) unsafe fn compact_ascii<'a>(text: *mut ffi::PyObject) -> Option<&'a [u8]> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
    if ffi::PyUnicode_IS_COMPACT_ASCII(text) != 0 {
        let data = (text as *mut ffi::PyASCIIObject).offset(1) as *const u8;
        return Some(std::slice::from_raw_parts(data, ffi::PyUnicode_GET_LENGTH(text) as usize));
    }
    None
}

/// The UTF-8 text of a `str` (or subclass) given by pointer, or `None` when it has none (a lone
/// surrogate). For a non-ASCII `str`, CPython makes and keeps its UTF-8 form on first use.
#[inline(always)]
pub(crate) unsafe fn utf8_of_str<'a>(text: *mut ffi::PyObject) -> Option<&'a [u8]> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = ffi::PyUnicode_AsUTF8AndSize(text, &mut size);
    if data.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(std::slice::from_raw_parts(data as *const u8, size as usize))
}

/// The UTF-8 text of a `str` (or subclass) given by pointer, or `None` when it has none.
#[inline(always)]
pub(crate) unsafe fn str_utf8<'a>(text: *mut ffi::PyObject) -> Option<&'a [u8]> {
    compact_ascii(text).or_else(|| utf8_of_str(text))
}
