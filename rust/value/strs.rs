//! The UTF-8 text CPython keeps for a `str`, read in place: for the writer's strings and keys
//! (`json/write/leaves.rs`) and the fixed keys the core looks up (`FrozenDict::get_str`); and the
//! one rule for text that has no UTF-8 form (a lone surrogate), which `freeze` replaces.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

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

/// The text of a `str`, as `to_str().ok()` gives it, read in place when it is compact ASCII (ids,
/// roles, block types and kinds: what the message checks read per message) instead of through
/// a call to `PyUnicode_AsUTF8AndSize`.
#[inline(always)]
pub(crate) fn text_of<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a str> {
    // SAFETY: `text` is a live `str`; `str_utf8` gives ASCII or CPython's UTF-8 form of it.
    unsafe { str_utf8(text.as_ptr()).map(|bytes| std::str::from_utf8_unchecked(bytes)) }
}

/// Whether a `str` holds a lone surrogate (a code point in U+D800..U+DFFF, which has no UTF-8
/// form: what `os.listdir` returns for a file name that is not UTF-8). Free for ASCII and
/// Latin-1 text (one byte per code point: no surrogate fits), a scan of the code points otherwise.
#[inline(always)]
pub(crate) unsafe fn holds_surrogate(text: *mut ffi::PyObject) -> bool {
    ffi::PyUnicode_KIND(text) != ffi::PyUnicode_1BYTE_KIND && scan_for_surrogate(text)
}

#[inline(never)]
unsafe fn scan_for_surrogate(text: *mut ffi::PyObject) -> bool {
    let length = ffi::PyUnicode_GET_LENGTH(text) as usize;
    let data = ffi::PyUnicode_DATA(text);
    match ffi::PyUnicode_KIND(text) {
        // No branch per code unit: the compiler vectorises the whole pass.
        ffi::PyUnicode_2BYTE_KIND => std::slice::from_raw_parts(data as *const u16, length)
            .iter()
            .fold(false, |found, &unit| found | (unit & 0xF800 == 0xD800)),
        ffi::PyUnicode_4BYTE_KIND => std::slice::from_raw_parts(data as *const u32, length)
            .iter()
            .fold(false, |found, &point| found | (point & 0xFFFF_F800 == 0xD800)),
        _ => utf8_of_str(text).is_none(), // a legacy (not "ready") str of Python < 3.12
    }
}

#[inline(always)]
fn is_surrogate(point: u32) -> bool {
    (0xD800..=0xDFFF).contains(&point)
}

/// A plain `str` with the characters of `text` (a `str` or subclass), each lone surrogate
/// replaced by U+FFFD REPLACEMENT CHARACTER, as decoding the bytes it stands for with
/// `errors="replace"` would; a new reference.
pub(crate) unsafe fn replace_surrogates(text: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let points = ffi::PyUnicode_AsUCS4Copy(text);
    if points.is_null() {
        return std::ptr::null_mut();
    }
    let length = ffi::PyUnicode_GET_LENGTH(text);
    for point in std::slice::from_raw_parts_mut(points, length as usize) {
        if is_surrogate(*point) {
            *point = 0xFFFD;
        }
    }
    let replaced = ffi::PyUnicode_FromKindAndData(ffi::PyUnicode_4BYTE_KIND as _, points as *const _, length);
    ffi::PyMem_Free(points.cast());
    replaced
}

/// A plain `str` with the characters of `text` (a `str` or subclass) and no lone surrogate
/// (`replace_surrogates`); a new reference.
pub(crate) unsafe fn plain_text(text: *mut ffi::PyObject) -> *mut ffi::PyObject {
    if holds_surrogate(text) {
        replace_surrogates(text)
    } else {
        ffi::PyUnicode_FromObject(text)
    }
}
