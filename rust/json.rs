//! JSON for frozen trees: a native writer (`to_json`, also used by `Message.to_json`), a parser
//! that builds frozen values directly (`from_json`), and `json_default` for `json`/`orjson`.
//!
//! The writer emits compact JSON (no spaces), keeps non-ASCII text as UTF-8, and formats floats
//! with the shortest representation that round-trips exactly.

use std::fmt;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBytes, PyDict, PyList, PyString, PyTuple};
use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};

use crate::errors::PathError;
use crate::walk::{check_float, check_int, is_mapping, key_error, key_text, mapping_pairs, not_json, on_enough_stack, untrack, Walk, MAX_DEPTH};
use crate::frozendict::{EntriesBuilder, FrozenDict};
use crate::message::Message;

// ---------------------------------------------------------------------------------------------
// Writer

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Escape class per byte: 0 = copy, 1 = short escape (`\n`...), 2 = `\u00XX`.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        table[i] = 2;
        i += 1;
    }
    table[b'\n' as usize] = 1;
    table[b'\r' as usize] = 1;
    table[b'\t' as usize] = 1;
    table[0x08] = 1;
    table[0x0c] = 1;
    table[b'"' as usize] = 1;
    table[b'\\' as usize] = 1;
    table
};

fn write_str_bytes(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &byte) in text.iter().enumerate() {
        let class = ESCAPE[byte as usize];
        if class == 0 {
            continue;
        }
        out.extend_from_slice(&text[start..i]);
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(byte >> 4) as usize], HEX[(byte & 0xf) as usize]]),
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
    out.push(b'"');
}

fn write_str(out: &mut Vec<u8>, text: &Bound<'_, PyAny>) -> Result<(), PathError> {
    let mut size: ffi::Py_ssize_t = 0;
    let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if data.is_null() {
        unsafe { ffi::PyErr_Clear() };
        return Err(PathError::value_error(
            "str is not valid UTF-8 (it contains a lone surrogate) and cannot be written as JSON",
        ));
    }
    let bytes = unsafe { std::slice::from_raw_parts(data as *const u8, size as usize) };
    write_str_bytes(out, bytes);
    Ok(())
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

fn write_items<'py>(
    out: &mut Vec<u8>,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    walk: &mut Walk,
) -> Result<(), PathError> {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_value(out, &item, walk).map_err(|e| e.at_index(i))?;
    }
    out.push(b']');
    Ok(())
}

fn write_int(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
    let value = check_int(obj)?;
    let mut buffer = itoa::Buffer::new();
    out.extend_from_slice(buffer.format(value).as_bytes());
    Ok(())
}

fn write_float(out: &mut Vec<u8>, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
    let value = check_float(obj)?;
    let mut buffer = ryu::Buffer::new();
    out.extend_from_slice(buffer.format_finite(value).as_bytes());
    Ok(())
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
    if let Ok(frozen) = obj.cast::<FrozenDict>() {
        let pairs = frozen.get().iter(py).map(|(key, value)| (key.to_owned(), value.to_owned()));
        return walk.within(obj, |walk| write_object(out, pairs, walk));
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        return walk.within(obj, |walk| write_items(out, tuple.iter(), walk));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        return walk.within(obj, |walk| write_dict(out, dict, walk));
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let snapshot = list.to_tuple();
        return walk.within(obj, |walk| write_items(out, snapshot.iter(), walk));
    }
    if let Ok(message) = obj.cast::<Message>() {
        // The message object is a nesting level of its own, as when its JSON is parsed back.
        return walk.within(obj, |walk| message.get().write_json(out, walk));
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

pub(crate) fn bytes_to_pystring<'py>(py: Python<'py>, bytes: &[u8]) -> Bound<'py, PyString> {
    // SAFETY: the writer only emits valid UTF-8 (ASCII punctuation and UTF-8 from Python strs).
    PyString::new(py, unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// Compact JSON text of a frozen or plain JSON tree, or of a `Message`.
#[pyfunction]
#[pyo3(signature = (value, /))]
pub(crate) fn to_json<'py>(value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value, &mut Walk::new()).map_err(|e| e.into_pyerr("value"))?;
    Ok(bytes_to_pystring(value.py(), &out))
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

// ---------------------------------------------------------------------------------------------
// Parser: serde_json drives, the seed builds frozen Python values as it goes.

struct FrozenSeed<'py> {
    py: Python<'py>,
    depth: usize,
    keys: *mut KeySlots,
}

/// A parsed value and the nesting depth of its subtree (0 for a leaf).
struct PyValue<'py>(Bound<'py, PyAny>, usize);

impl<'de, 'py> DeserializeSeed<'de> for FrozenSeed<'py> {
    type Value = PyValue<'py>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        on_enough_stack(self.depth, || deserializer.deserialize_any(self))
    }
}

impl<'de, 'py> Visitor<'de> for FrozenSeed<'py> {
    type Value = PyValue<'py>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(PyValue(self.py.None().into_bound(self.py), 0))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyValue(pyo3::types::PyBool::new(self.py, v).to_owned().into_any(), 0))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(PyValue(v.into_pyobject(self.py).expect("int").into_any(), 0))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        if v > i64::MAX as u64 {
            return Err(E::custom(format!("integer {v} is outside the 64-bit signed range")));
        }
        Ok(PyValue((v as i64).into_pyobject(self.py).expect("int").into_any(), 0))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if !v.is_finite() {
            return Err(E::custom("number is out of the finite float range"));
        }
        Ok(PyValue(v.into_pyobject(self.py).expect("float").into_any(), 0))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyValue(PyString::new(self.py, v).into_any(), 0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if self.depth >= MAX_DEPTH {
            return Err(A::Error::custom(format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        let mut height = 0;
        while let Some(PyValue(item, item_height)) = seq.next_element_seed(FrozenSeed { py: self.py, depth: self.depth + 1, keys: self.keys })? {
            height = height.max(item_height);
            items.push(item);
        }
        let tuple = PyTuple::new(self.py, items).map_err(A::Error::custom)?.into_any();
        untrack(&tuple);
        Ok(PyValue(tuple, height + 1))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = EntriesBuilder::with_capacity(map.size_hint().unwrap_or(8));
        let mut seen = SeenKeys::new();
        let mut height = 0;
        while let Some(key) = map.next_key_seed(KeySeed { py: self.py, keys: self.keys })? {
            let (key, key_hash) = match key {
                // serde_json's arbitrary_precision hands every number over as this one-entry map,
                // so that integers and floats are told apart by their text (see `number`).
                Key::Number if entries.is_empty() => {
                    return number::<A::Error>(self.py, &map.next_value::<String>()?)
                }
                Key::Number => (PyString::new(self.py, NUMBER_TOKEN), key_hash(NUMBER_TOKEN)),
                Key::Str(key, hash) => (key, hash),
            };
            if entries.is_empty() && self.depth >= MAX_DEPTH {
                return Err(A::Error::custom(format!("nesting deeper than {MAX_DEPTH} levels")));
            }
            let PyValue(value, value_height) =
                map.next_value_seed(FrozenSeed { py: self.py, depth: self.depth + 1, keys: self.keys })?;
            height = height.max(value_height);
            let same_key =
                |index: usize| unsafe { ffi::PyUnicode_Compare(entries.key(self.py, index).as_ptr(), key.as_ptr()) } == 0;
            match seen.find(key_hash, same_key) {
                // A repeated key: the last value wins, in the first position (as `json.loads`).
                Some(index) => entries.set_value(index, value),
                None => {
                    seen.insert(key_hash, entries.len());
                    entries.push(key.into_any(), value);
                }
            }
        }
        Ok(PyValue(entries.build(self.py, height + 1).into_any(), height + 1))
    }
}

/// The keys of the object being parsed, by hash, to find a repeated key: a scan of a small
/// inline array for the usual handful of keys, a hash map for large objects.
struct SeenKeys {
    len: usize,
    small: [u32; SEEN_INLINE],
    large: Option<std::collections::HashMap<u32, Vec<usize>>>,
}

const SEEN_INLINE: usize = 16;

impl SeenKeys {
    fn new() -> Self {
        SeenKeys { len: 0, small: [0; SEEN_INLINE], large: None }
    }

    fn find(&self, hash: u32, same_key: impl Fn(usize) -> bool) -> Option<usize> {
        match &self.large {
            Some(large) => large.get(&hash)?.iter().copied().find(|&index| same_key(index)),
            None => (0..self.len).find(|&index| self.small[index] == hash && same_key(index)),
        }
    }

    fn insert(&mut self, hash: u32, index: usize) {
        if self.large.is_none() && self.len < SEEN_INLINE {
            self.small[self.len] = hash;
            self.len += 1;
            return;
        }
        let large = self.large.get_or_insert_with(|| {
            let mut large = std::collections::HashMap::<u32, Vec<usize>>::new();
            for (index, &hash) in self.small[..self.len].iter().enumerate() {
                large.entry(hash).or_default().push(index);
            }
            large
        });
        large.entry(hash).or_default().push(index);
    }
}

/// Object keys: built straight from the parser's borrowed text, through a small per-thread cache
/// because logs repeat the same few keys on every line.
struct KeySeed<'py> {
    py: Python<'py>,
    keys: *mut KeySlots,
}

enum Key<'py> {
    /// The key and `key_hash` of its text.
    Str(Bound<'py, PyString>, u32),
    Number,
}

const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// A JSON number from its text: an integer literal must fit in 64 signed bits (never silently
/// becomes a float); anything with a fraction or exponent is a finite float, correctly rounded.
fn number<'py, E: serde::de::Error>(py: Python<'py>, text: &str) -> Result<PyValue<'py>, E> {
    if text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        let value: f64 = text.parse().map_err(|_| E::custom(format!("invalid number {text}")))?;
        if !value.is_finite() {
            return Err(E::custom(format!("number {text} is out of the finite float range")));
        }
        return Ok(PyValue(value.into_pyobject(py).expect("float").into_any(), 0));
    }
    let value: i64 = text
        .parse()
        .map_err(|_| E::custom(format!("integer {text} is outside the 64-bit signed range")))?;
    Ok(PyValue(value.into_pyobject(py).expect("int").into_any(), 0))
}

impl<'de, 'py> DeserializeSeed<'de> for KeySeed<'py> {
    type Value = Key<'py>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de, 'py> Visitor<'de> for KeySeed<'py> {
    type Value = Key<'py>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        if v == NUMBER_TOKEN {
            return Ok(Key::Number);
        }
        let hash = key_hash(v);
        Ok(Key::Str(cached_key(self.py, self.keys, v, hash), hash))
    }
}

const KEY_CACHE_SLOTS: usize = 512;
const KEY_CACHE_MAX_LEN: usize = 32;

/// A cached key: the text and a strong reference to its `str`.
struct CachedKey {
    text: Box<str>,
    string: *mut ffi::PyObject,
}

/// Process-wide key cache: a fixed number of slots, so it never grows, and held for a whole
/// parse (one lock per document, not per key).
struct KeySlots(Vec<Option<CachedKey>>);

// SAFETY: the strings are only touched while the mutex is held by a thread attached to Python.
unsafe impl Send for KeySlots {}

static KEY_CACHE: std::sync::Mutex<Option<KeySlots>> = std::sync::Mutex::new(None);

/// FNV-1a of a key's text: keys are short and not adversarial here (a collision costs one
/// string comparison, never a wrong result).
fn key_hash(key: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.bytes() {
        hash = (hash ^ byte as u32).wrapping_mul(0x0100_0193);
    }
    hash
}

fn cached_key<'py>(py: Python<'py>, cache: *mut KeySlots, key: &str, hash: u32) -> Bound<'py, PyString> {
    if cache.is_null() || key.len() > KEY_CACHE_MAX_LEN {
        return PyString::new(py, key);
    }
    // SAFETY: `cache` points into the locked mutex for the duration of `parse`.
    let slots = unsafe { &mut (*cache).0 };
    let slot = hash as usize % KEY_CACHE_SLOTS;
    if let Some(entry) = &slots[slot] {
        if &*entry.text == key {
            return unsafe { Bound::from_borrowed_ptr(py, entry.string).cast_into_unchecked::<PyString>() };
        }
    }
    let string = PyString::new(py, key);
    let previous = slots[slot].replace(CachedKey { text: key.into(), string: string.clone().into_ptr() });
    if let Some(previous) = previous {
        unsafe { ffi::Py_DECREF(previous.string) };
    }
    string
}

/// Parse JSON into a frozen tree; errors name the line and column.
pub(crate) fn parse<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    // From a `str`: the text is valid UTF-8 already, so strings are not validated one by one.
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    // try_lock: another thread may be parsing, or a finalizer run during this parse may parse
    // again on this thread; either way that parse simply goes without the cache.
    let mut guard = KEY_CACHE.try_lock().ok();
    let keys: *mut KeySlots = match guard.as_deref_mut() {
        Some(slots) => slots.get_or_insert_with(|| KeySlots((0..KEY_CACHE_SLOTS).map(|_| None).collect())),
        None => std::ptr::null_mut(),
    };
    let result = FrozenSeed { py, depth: 0, keys }
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|_| value));
    match result {
        Ok(PyValue(value, _)) => Ok(value),
        Err(err) => Err(PyValueError::new_err(format!("invalid JSON: {err}"))),
    }
}

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

/// Parse JSON text straight into a frozen tree (`FrozenDict`, tuples, leaves).
#[pyfunction]
#[pyo3(signature = (text, /))]
pub(crate) fn from_json<'py>(text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    parse(text.py(), json_text(text)?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(to_json, m)?)?;
    m.add_function(wrap_pyfunction!(from_json, m)?)?;
    m.add_function(wrap_pyfunction!(json_default, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::write_str_bytes;

    fn escaped(text: &str) -> String {
        let mut out = Vec::new();
        write_str_bytes(&mut out, text.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(escaped("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(escaped("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(escaped("\u{1}\u{1f}"), r#""\u0001\u001f""#);
    }

    #[test]
    fn keeps_non_ascii_as_utf8() {
        assert_eq!(escaped("é😀"), "\"é😀\"");
    }
}
