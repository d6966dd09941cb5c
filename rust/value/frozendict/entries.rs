//! How a `FrozenDict` holds its entries: in two size classes, because a history holds thousands
//! of small mappings (message sources, content blocks, event data: 96% of them 2 to 4 keys).
//!
//! - up to `INLINE` entries sit in the object itself: one allocation, no pointer to follow;
//! - more go to one exactly sized slice on the Python heap, beside the lookup dict built for
//!   large ones.
//!
//! Both variants fit the same 64 bytes, so every `FrozenDict` is 112 bytes with its GC header
//! (the old fixed room for 8 entries made it 224). Building goes through `EntriesBuilder`, which
//! stages up to `STAGED` entries on the stack (the JSON parser does not know an object's length
//! in advance) and then settles them in the smallest class, so a mapping costs one allocation up
//! to `INLINE` entries and two beyond.

use std::alloc::{handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict};
use pyo3::Borrowed;

/// Entries held in the object itself.
pub(super) const INLINE: usize = 4;
/// Entries a builder holds on the stack before it moves them to the heap.
const STAGED: usize = 8;
const _: () = assert!(STAGED >= INLINE, "a builder's stack holds at least the inline entries");

/// A key (an exact `str`) and its frozen value: strong references owned by whoever holds it.
pub(super) type Entry = (*mut ffi::PyObject, *mut ffi::PyObject);

const EMPTY: Entry = (std::ptr::null_mut(), std::ptr::null_mut());

/// The entries of a `FrozenDict`, never changed after it is built, and its nesting depth (see
/// `FrozenDict::depth`), which sits beside the enum's tag in a word that would be padding.
pub(super) enum Entries {
    Inline { len: u8, depth: u16, items: [Entry; INLINE] },
    /// Key -> value for lookups in mappings too large to scan sits here, built on first use:
    /// only a large mapping can need it.
    Heap { depth: u16, items: HeapEntries, index: OnceLock<Py<PyDict>> },
}

/// Entries on the Python heap (`PyMem_Malloc`): pymalloc's pools serve the usual sizes faster
/// than the system allocator, and tracemalloc counts them with the object.
pub(super) struct HeapEntries {
    start: NonNull<Entry>,
    len: usize,
}

impl HeapEntries {
    /// A copy of `entries` (the references are not touched: their owner changes).
    fn copy_of(entries: &[Entry]) -> Self {
        let layout = Layout::array::<Entry>(entries.len()).expect("a FrozenDict's entries fit in memory");
        // SAFETY: called by a thread attached to the interpreter (building a FrozenDict).
        let start = unsafe { ffi::PyMem_Malloc(layout.size()) }.cast::<Entry>();
        let Some(start) = NonNull::new(start) else { handle_alloc_error(layout) };
        unsafe { std::ptr::copy_nonoverlapping(entries.as_ptr(), start.as_ptr(), entries.len()) };
        HeapEntries { start, len: entries.len() }
    }

    #[inline]
    fn as_slice(&self) -> &[Entry] {
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }
}

impl Drop for HeapEntries {
    fn drop(&mut self) {
        // SAFETY: released in tp_dealloc, by a thread attached to the interpreter.
        unsafe { ffi::PyMem_Free(self.start.as_ptr().cast()) };
    }
}

// SAFETY: the entries never change after construction and are only read or released by a
// thread attached to the interpreter (lookups, and tp_dealloc for the release).
unsafe impl Send for Entries {}
unsafe impl Sync for Entries {}

impl Entries {
    /// Take ownership of the references in `staged`.
    fn settle(staged: &[Entry], depth: u16) -> Self {
        if staged.len() <= INLINE {
            let mut items = [EMPTY; INLINE];
            items[..staged.len()].copy_from_slice(staged);
            Entries::Inline { len: staged.len() as u8, depth, items }
        } else {
            Entries::Heap { depth, items: HeapEntries::copy_of(staged), index: OnceLock::new() }
        }
    }

    /// The first `len` entries of a builder's stack: a fixed-size copy when they fit inline
    /// (the slots past `len` are null and ignored).
    #[inline]
    fn from_stack(stack: &[Entry; STAGED], len: usize, depth: u16) -> Self {
        if len <= INLINE {
            let mut items = [EMPTY; INLINE];
            items.copy_from_slice(&stack[..INLINE]);
            Entries::Inline { len: len as u8, depth, items }
        } else {
            Entries::Heap { depth, items: HeapEntries::copy_of(&stack[..len]), index: OnceLock::new() }
        }
    }

    #[inline]
    pub(super) fn depth(&self) -> u16 {
        match self {
            Entries::Inline { depth, .. } | Entries::Heap { depth, .. } => *depth,
        }
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::Inline { len, items, .. } => &items[..*len as usize],
            Entries::Heap { items, .. } => items.as_slice(),
        }
    }

    /// The lookup dict of a heap mapping, once built.
    pub(super) fn index(&self) -> Option<&OnceLock<Py<PyDict>>> {
        match self {
            Entries::Inline { .. } => None,
            Entries::Heap { index, .. } => Some(index),
        }
    }
}

impl Drop for Entries {
    fn drop(&mut self) {
        release(self.as_slice());
    }
}

fn release(entries: &[Entry]) {
    for &(key, value) in entries {
        unsafe {
            ffi::Py_DECREF(key);
            ffi::Py_DECREF(value);
        }
    }
}

/// Entries being gathered: on the stack up to `STAGED`, then in a `Vec`.
enum Staging {
    Stack { len: usize, items: [Entry; STAGED] },
    Spilled(Vec<Entry>),
}

/// Gathers the entries of a `FrozenDict` (unique `str` keys, frozen values), then `finish`es
/// them into its storage.
pub(crate) struct EntriesBuilder {
    staging: Staging,
}

impl EntriesBuilder {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let staging = if capacity <= STAGED {
            Staging::Stack { len: 0, items: [EMPTY; STAGED] }
        } else {
            Staging::Spilled(Vec::with_capacity(capacity))
        };
        EntriesBuilder { staging }
    }

    /// Append an entry; the key must be an exact `str` not already present.
    #[inline]
    pub(crate) fn push(&mut self, key: Bound<'_, PyAny>, value: Bound<'_, PyAny>) {
        let entry = (key.into_ptr(), value.into_ptr());
        match &mut self.staging {
            Staging::Stack { len, items } if *len < STAGED => {
                items[*len] = entry;
                *len += 1;
            }
            Staging::Stack { len, items } => {
                let mut heap = Vec::with_capacity(STAGED * 2);
                heap.extend_from_slice(&items[..*len]);
                *len = 0; // moved: the stack copy must not release them
                heap.push(entry);
                self.staging = Staging::Spilled(heap);
            }
            Staging::Spilled(heap) => heap.push(entry),
        }
    }

    #[inline]
    fn as_slice(&self) -> &[Entry] {
        match &self.staging {
            Staging::Stack { len, items } => &items[..*len],
            Staging::Spilled(heap) => heap,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// The key of entry `index`, borrowed.
    pub(crate) fn key<'a, 'py>(&'a self, py: Python<'py>, index: usize) -> Borrowed<'a, 'py, PyAny> {
        unsafe { Borrowed::from_ptr(py, self.as_slice()[index].0) }
    }

    /// The value of entry `index`, borrowed.
    pub(crate) fn value<'a, 'py>(&'a self, py: Python<'py>, index: usize) -> Borrowed<'a, 'py, PyAny> {
        unsafe { Borrowed::from_ptr(py, self.as_slice()[index].1) }
    }

    /// Replace the value of entry `index`.
    pub(crate) fn set_value(&mut self, index: usize, value: Bound<'_, PyAny>) {
        let slot = match &mut self.staging {
            Staging::Stack { len, items } => &mut items[..*len][index].1,
            Staging::Spilled(heap) => &mut heap[index].1,
        };
        let old = std::mem::replace(slot, value.into_ptr());
        unsafe { ffi::Py_DECREF(old) };
    }

    /// The storage of the entries of a mapping `depth` deep, which now own the references.
    pub(super) fn finish(self, depth: u16) -> Entries {
        // The references move to the storage: the builder must not release them (no `Drop`).
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: read once from a builder that is never used or dropped again.
        match unsafe { std::ptr::read(&this.staging) } {
            Staging::Stack { len, items } => Entries::from_stack(&items, len, depth),
            // The Vec is freed; its entries are plain pointers, so nothing is released.
            Staging::Spilled(heap) => Entries::settle(&heap, depth),
        }
    }
}

impl Drop for EntriesBuilder {
    fn drop(&mut self) {
        release(self.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_size_classes_fit_the_same_room() {
        // The FrozenDict's layout (frozendict.rs) counts on 8 bytes of tag and length + 64.
        assert_eq!(std::mem::size_of::<Entries>(), 72);
        assert!(std::mem::size_of::<(HeapEntries, OnceLock<Py<PyDict>>)>() <= INLINE * 16);
    }
}
