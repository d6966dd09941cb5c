//! Object keys while parsing JSON: the process-wide cache of key strings (which short string
//! values share), and the table that finds a repeated key in the object being parsed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// Hashes that are already well mixed (Python's keyed `str` hash) are used as they are.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only isize hashes are stored")
    }

    fn write_isize(&mut self, value: isize) {
        self.0 = value as u64;
    }
}

/// The keys of the object being parsed, by Python hash, to find a repeated key: a scan of a
/// small inline array for the usual handful of keys, a hash map for large objects. Two
/// different keys with the same hash (by chance only: the hash is keyed per process) go to a
/// side list.
pub(crate) struct SeenKeys {
    len: usize,
    small: [isize; SEEN_INLINE],
    large: Option<HashMap<isize, usize, BuildHasherDefault<PassThrough>>>,
    clashes: Vec<(isize, usize)>,
}

const SEEN_INLINE: usize = 16;

impl SeenKeys {
    pub(crate) fn new() -> Self {
        SeenKeys { len: 0, small: [0; SEEN_INLINE], large: None, clashes: Vec::new() }
    }

    #[inline]
    pub(crate) fn find(&self, hash: isize, same_key: impl Fn(usize) -> bool) -> Option<usize> {
        match &self.large {
            Some(large) => {
                let index = *large.get(&hash)?;
                if same_key(index) {
                    return Some(index);
                }
                self.clashes.iter().find(|&&(h, index)| h == hash && same_key(index)).map(|&(_, index)| index)
            }
            None => (0..self.len).find(|&index| self.small[index] == hash && same_key(index)),
        }
    }

    #[inline]
    pub(crate) fn insert(&mut self, hash: isize, index: usize) {
        if self.large.is_none() && self.len < SEEN_INLINE {
            self.small[self.len] = hash;
            self.len += 1;
            return;
        }
        if self.large.is_none() {
            let mut large = HashMap::with_capacity_and_hasher(SEEN_INLINE * 4, BuildHasherDefault::default());
            for index in 0..self.len {
                self.insert_large(&mut large, self.small[index], index);
            }
            self.large = Some(large);
        }
        let mut large = self.large.take().expect("built above");
        self.insert_large(&mut large, hash, index);
        self.large = Some(large);
    }

    fn insert_large(&mut self, large: &mut HashMap<isize, usize, BuildHasherDefault<PassThrough>>, hash: isize, index: usize) {
        if let std::collections::hash_map::Entry::Vacant(slot) = large.entry(hash) {
            slot.insert(index);
        } else {
            self.clashes.push((hash, index));
        }
    }
}

const KEY_CACHE_SLOTS: usize = 512;
pub(crate) const KEY_CACHE_MAX_LEN: usize = 32;
/// String values this short share the cache with keys: long ones (texts, ids) are mostly
/// unique and would only push the keys out.
pub(crate) const SHORT_VALUE_MAX_LEN: usize = 16;

/// A cached key: the text and a strong reference to its `str`.
struct CachedKey {
    text: Box<str>,
    string: *mut ffi::PyObject,
}

/// Process-wide cache of object keys and short string values, because logs repeat the same few
/// keys and words (`"text"`, `"user"`, `"tool_call"` ...) on every line: a
/// fixed number of slots, so it never grows, and held for a whole parse (one lock per
/// document, not per key). A slot is chosen by FNV-1a of the text: keys made to collide only
/// share a slot and miss the cache, each then costing what an uncached key costs.
pub(crate) struct KeySlots(Vec<Option<CachedKey>>);

// SAFETY: the strings are only touched while the mutex is held by a thread attached to Python.
unsafe impl Send for KeySlots {}

pub(crate) static KEY_CACHE: std::sync::Mutex<Option<KeySlots>> = std::sync::Mutex::new(None);

/// FNV-1a of a key's text: only picks a cache slot (a collision costs a cache miss).
fn fnv1a(key: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.bytes() {
        hash = (hash ^ byte as u32).wrapping_mul(0x0100_0193);
    }
    hash
}

impl KeySlots {
    pub(crate) fn new() -> Self {
        KeySlots((0..KEY_CACHE_SLOTS).map(|_| None).collect())
    }

    #[inline]
    pub(crate) fn get<'py>(&mut self, py: Python<'py>, key: &str) -> Bound<'py, PyString> {
        let slot = fnv1a(key) as usize % KEY_CACHE_SLOTS;
        if let Some(entry) = &self.0[slot] {
            if &*entry.text == key {
                return unsafe { Bound::from_borrowed_ptr(py, entry.string).cast_into_unchecked::<PyString>() };
            }
        }
        // SAFETY: `new_str` makes a `str`.
        let string = unsafe { crate::json_parse::new_str(py, key).cast_into_unchecked::<PyString>() };
        let previous = self.0[slot].replace(CachedKey { text: key.into(), string: string.clone().into_ptr() });
        if let Some(previous) = previous {
            unsafe { ffi::Py_DECREF(previous.string) };
        }
        string
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(""), 0x811c_9dc5);
        assert_eq!(fnv1a("a"), 0xe40c_292c);
        assert_eq!(fnv1a("foobar"), 0xbf9c_f968);
    }
}
