//! Object keys while parsing JSON: the process-wide cache of key strings (which short string
//! values share), and the table that finds a repeated key in the object being parsed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::json::scan::{read_tail, read_word};

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

/// log2 of the cache's slot count.
const KEY_CACHE_BITS: u32 = 9;
const KEY_CACHE_SLOTS: usize = 1 << KEY_CACHE_BITS;
pub(crate) const KEY_CACHE_MAX_LEN: usize = 32;
/// String values this short share the cache with keys: long ones (texts, ids) are mostly
/// unique and would only push the keys out.
pub(crate) const SHORT_VALUE_MAX_LEN: usize = 16;
/// Texts this short are told apart by their length and `KeyWords` alone.
const WORDS_COVER_LEN: usize = 16;

/// A text's first and last 8 bytes as little-endian words (overlapping when it is shorter than
/// 16 bytes; under 8 bytes, the text padded with spaces and 0). With the length they are the
/// whole of a text of up to `WORDS_COVER_LEN` bytes: two loads where a byte loop was.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct KeyWords([u64; 2]);

impl KeyWords {
    #[inline(always)]
    fn of(text: &[u8]) -> Self {
        let len = text.len();
        KeyWords(match len {
            8.. => [read_word(text, 0), read_word(text, len - 8)],
            1.. => [read_tail(text, 0), 0],
            0 => [0, 0],
        })
    }

    /// The cache slot of a text with these words and length `len`: a collision costs a miss.
    #[inline(always)]
    fn slot(self, len: usize) -> usize {
        let [first, last] = self.0;
        let mixed = (first ^ last.rotate_left(29) ^ len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> (64 - KEY_CACHE_BITS)) as usize
    }
}

/// A cached key: the text (its words, and all of it when longer than the words cover) and a
/// strong reference to its `str`.
struct CachedKey {
    words: KeyWords,
    text: Box<str>,
    string: *mut ffi::PyObject,
}

impl CachedKey {
    #[inline(always)]
    fn holds(&self, key: &str, words: KeyWords) -> bool {
        self.words == words && self.text.len() == key.len() && (key.len() <= WORDS_COVER_LEN || &*self.text == key)
    }
}

/// Process-wide cache of object keys and short string values, because logs repeat the same few
/// keys and words (`"text"`, `"user"`, `"tool_call"` ...) on every line: a
/// fixed number of slots, so it never grows, and held for a whole parse (one lock per
/// document, not per key). A slot is chosen from the text's length and first and last 8 bytes
/// (`KeyWords::slot`): keys made to collide only share a slot and miss the cache, each then
/// costing what an uncached key costs.
pub(crate) struct KeySlots(Box<[Option<CachedKey>; KEY_CACHE_SLOTS]>);

// SAFETY: the strings are only touched while the mutex is held by a thread attached to Python.
unsafe impl Send for KeySlots {}

pub(crate) static KEY_CACHE: std::sync::Mutex<Option<KeySlots>> = std::sync::Mutex::new(None);

impl KeySlots {
    pub(crate) fn new() -> Self {
        let slots: Box<[Option<CachedKey>]> = (0..KEY_CACHE_SLOTS).map(|_| None).collect();
        KeySlots(slots.try_into().unwrap_or_else(|_| unreachable!("KEY_CACHE_SLOTS slots")))
    }

    /// The `str` of `key`, from the cache. Inlined into the parser: a hit is a few loads and a
    /// compare, the rest (`fill`) is out of line.
    #[inline(always)]
    pub(crate) fn get<'py>(&mut self, py: Python<'py>, key: &str) -> Bound<'py, PyString> {
        let words = KeyWords::of(key.as_bytes());
        let slot = words.slot(key.len());
        if let Some(entry) = &self.0[slot] {
            if entry.holds(key, words) {
                return unsafe { Bound::from_borrowed_ptr(py, entry.string).cast_into_unchecked::<PyString>() };
            }
        }
        self.fill(py, slot, key, words)
    }

    /// A miss: a new `str` of `key`, which takes over `slot`.
    #[cold]
    #[inline(never)]
    fn fill<'py>(&mut self, py: Python<'py>, slot: usize, key: &str, words: KeyWords) -> Bound<'py, PyString> {
        // SAFETY: `new_str` makes a `str`.
        let string = unsafe { crate::json::text::new_str(py, key).cast_into_unchecked::<PyString>() };
        let entry = CachedKey { words, text: key.into(), string: string.clone().into_ptr() };
        if let Some(previous) = self.0[slot].replace(entry) {
            unsafe { ffi::Py_DECREF(previous.string) };
        }
        string
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of(text: &str) -> usize {
        KeyWords::of(text.as_bytes()).slot(text.len())
    }

    #[test]
    fn slots_match_the_reference_vectors() {
        // `tests/support.py::key_cache_slot` computes the same: these pin both.
        for (text, slot) in REFERENCE_SLOTS {
            assert_eq!(slot_of(text), slot, "{text:?}");
        }
    }

    const REFERENCE_SLOTS: [(&str, usize); 7] = [
        ("", 0),
        ("a", 13),
        ("text", 294),
        ("tool_call", 190),
        ("sixteen_bytes_ab", 191),
        ("seventeen_bytes_a", 172),
        ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 307),
    ];

    #[test]
    fn texts_the_words_cover_are_told_apart_by_words_and_length() {
        // Each byte of a text of up to 16 bytes shows in its words: one byte changed (to a
        // space or a 0 byte too, what the padding holds) changes them.
        for len in 1..=WORDS_COVER_LEN {
            let text = vec![b'x'; len];
            for at in 0..len {
                for byte in [b' ', 0, b'a', 0xff] {
                    let mut changed = text.clone();
                    changed[at] = byte;
                    assert_ne!(KeyWords::of(&changed), KeyWords::of(&text), "len {len}, byte {byte} at {at}");
                }
            }
        }
    }

    #[test]
    fn an_entry_holds_only_its_own_text() {
        let entry = |text: &str| CachedKey { words: KeyWords::of(text.as_bytes()), text: text.into(), string: std::ptr::null_mut() };
        let holds = |entry: &CachedKey, text: &str| entry.holds(text, KeyWords::of(text.as_bytes()));
        // The padding of a short text is told apart by the length.
        assert_eq!(KeyWords::of(b"ab"), KeyWords::of(b"ab "));
        assert!(holds(&entry("ab"), "ab") && !holds(&entry("ab"), "ab ") && !holds(&entry("ab "), "ab"));
        // Beyond 16 bytes the words miss the middle: the whole text is compared.
        let (x, y) = ("aaaaaaaaXaaaaaaaa", "aaaaaaaaYaaaaaaaa");
        assert_eq!(KeyWords::of(x.as_bytes()), KeyWords::of(y.as_bytes()));
        assert!(holds(&entry(x), x) && !holds(&entry(x), y));
        assert!(holds(&entry(""), "") && !holds(&entry(""), " "));
    }

    #[test]
    fn words_are_the_first_and_last_eight_bytes() {
        assert_eq!(KeyWords::of(b""), KeyWords([0, 0]));
        assert_eq!(KeyWords::of(b"ab"), KeyWords([u64::from_le_bytes(*b"ab      "), 0]));
        assert_eq!(KeyWords::of(b"abcdefgh"), KeyWords([u64::from_le_bytes(*b"abcdefgh"); 2]));
        assert_eq!(
            KeyWords::of(b"abcdefghijk"),
            KeyWords([u64::from_le_bytes(*b"abcdefgh"), u64::from_le_bytes(*b"defghijk")])
        );
        assert!(slot_of("") < KEY_CACHE_SLOTS && slot_of(&"x".repeat(32)) < KEY_CACHE_SLOTS);
    }
}
