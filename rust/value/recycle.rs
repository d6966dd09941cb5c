//! Released `FrozenDict` and `Message` objects kept for reuse, guarded by the GIL instead of a lock.
//!
//! Freezing a tree and dropping it again (a tool result read and let go, a message built per
//! step) would otherwise send every object through `PyType_GenericAlloc`, which zeroes it and
//! links it into the GC's list before we unlink it. PyO3's `freelist` class attribute keeps
//! them, but takes a mutex on every allocation and release (it must, on free-threaded Python):
//! ~100 instructions a pair, paid even when the list is empty, as it is while a re-open builds
//! tens of thousands of objects. Here the list is touched only by `tp_alloc` and `tp_free`, which
//! CPython calls with the GIL held, so the GIL is the lock. Free-threaded builds keep the plain
//! allocator (`install` does nothing there).
//!
//! A new object (the list empty) is made here too, untracked and *not counted* by the GC
//! (`new_uncounted`). `PyType_GenericAlloc` adds one to the young generation's count for every
//! GC-capable object, and PyO3 makes every class one, so the values we untrack at once still
//! brought collections on: a re-open of 10,000 messages made 35,000 `FrozenDict`s and `Message`s
//! and ran ~50 of its 70 generation-0 collections (and so generation-1 and full ones, which walk
//! every tracked object) because of them. An object that is never tracked cannot be in a cycle the
//! GC must find, so it has no reason to count; its memory is laid out exactly as
//! `PyType_GenericAlloc` lays it out (a zeroed GC header, then the zeroed object) and freed as
//! `PyObject_GC_Del` frees it, without the count.

use std::cell::UnsafeCell;
use std::ffi::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::PyTypeInfo;

use crate::value::frozendict::FrozenDict;
use crate::value::message::Message;

/// A type whose released objects are kept in its own `FreeList`.
pub(crate) trait Recycled: PyTypeInfo {
    fn free_list() -> &'static FreeList;
}

/// Up to `keep` released objects of one type; touched only by a thread holding the GIL.
pub(crate) struct FreeList {
    keep: usize,
    state: UnsafeCell<State>,
}

struct State {
    /// The type the objects are of (set by `install`): a subclass's objects are never kept.
    of_type: *mut ffi::PyTypeObject,
    /// Whether new objects of that type are made by `new_uncounted` (`uncountable`).
    uncounted: bool,
    objects: Vec<*mut ffi::PyObject>,
}

// SAFETY: every access happens in `tp_alloc`, `tp_free` or `install`, with the GIL held, which
// serialises them (`install` is compiled out where there is no GIL).
unsafe impl Sync for FreeList {}

impl FreeList {
    pub(crate) const fn new(keep: usize) -> Self {
        FreeList { keep, state: UnsafeCell::new(State { of_type: std::ptr::null_mut(), uncounted: false, objects: Vec::new() }) }
    }
}

/// The GC header before every GC-capable object of a GIL build (`PyGC_Head`: two words, zero
/// while untracked), 3.10 to 3.14.
const GC_HEADER: usize = 2 * std::mem::size_of::<usize>();

/// `tp_alloc`: a kept object when there is one, else a new one, neither tracked nor counted.
unsafe extern "C" fn alloc<T: Recycled>(subtype: *mut ffi::PyTypeObject, items: ffi::Py_ssize_t) -> *mut ffi::PyObject {
    let state = &mut *T::free_list().state.get();
    if items == 0 && subtype == state.of_type {
        if let Some(object) = state.objects.pop() {
            // Released untracked by `tp_dealloc`, so it comes back untracked, with its type's
            // reference taken again (`PyObject_Init` on a heap type).
            ffi::PyObject_Init(object, subtype);
            return object;
        }
        if state.uncounted {
            return new_uncounted(subtype);
        }
    }
    ffi::PyType_GenericAlloc(subtype, items)
}

/// A new object of `of_type` (a GC type of fixed size, no pre-header but the GC's: `install`
/// checks), as `PyType_GenericAlloc` makes it but left untracked and out of the young
/// generation's count (see the module comment).
unsafe fn new_uncounted(of_type: *mut ffi::PyTypeObject) -> *mut ffi::PyObject {
    let size = GC_HEADER + (*of_type).tp_basicsize as usize;
    let memory: *mut u8 = ffi::PyObject_Malloc(size).cast();
    if memory.is_null() {
        return ffi::PyErr_NoMemory();
    }
    std::ptr::write_bytes(memory, 0, size);
    ffi::PyObject_Init(memory.add(GC_HEADER).cast(), of_type)
}

/// `tp_free`: keeps the object while the list has room, else frees it: an object of the type
/// itself as `new_uncounted` made it, a subclass's as `PyType_GenericAlloc` did.
unsafe extern "C" fn free<T: Recycled>(object: *mut c_void) {
    let list = T::free_list();
    let state = &mut *list.state.get();
    let of_type = ffi::Py_TYPE(object.cast()) == state.of_type;
    if of_type && state.objects.len() < list.keep {
        state.objects.push(object.cast());
        return;
    }
    if !(of_type && state.uncounted) {
        return ffi::PyObject_GC_Del(object);
    }
    // `tp_dealloc` untracked it already; made sure of, as a tracked object freed would break the GC's list.
    ffi::PyObject_GC_UnTrack(object);
    ffi::PyObject_Free(object.cast::<u8>().sub(GC_HEADER).cast());
}

/// Whether objects of `of_type` can be made by `new_uncounted`: a GC type of fixed size with no
/// managed dict or weak reference list (3.11's and 3.12's pre-header; bits 3 and 4 of the flags).
unsafe fn uncountable(of_type: *mut ffi::PyTypeObject) -> bool {
    const MANAGED_PRE_HEADER: std::ffi::c_ulong = (1 << 3) | (1 << 4);
    let flags = (*of_type).tp_flags as std::ffi::c_ulong;
    flags & (ffi::Py_TPFLAGS_HAVE_GC as std::ffi::c_ulong) != 0 && flags & MANAGED_PRE_HEADER == 0 && (*of_type).tp_itemsize == 0
}

/// Make `T`'s objects go through its free list (once, when the module registers the class).
pub(crate) fn install<T: Recycled>(py: Python<'_>) {
    #[cfg(not(Py_GIL_DISABLED))]
    unsafe {
        let of_type = T::type_object_raw(py);
        let list = T::free_list();
        let state = &mut *list.state.get();
        if state.of_type.is_null() {
            state.objects.reserve_exact(list.keep);
            state.of_type = of_type;
            state.uncounted = uncountable(of_type);
            (*of_type).tp_alloc = Some(alloc::<T>);
            (*of_type).tp_free = Some(free::<T>);
        }
    }
    #[cfg(Py_GIL_DISABLED)]
    let _ = py;
}

/// As many of each as PyO3's `freelist` attribute kept: a turn's worth of blocks and messages.
static FROZEN_DICTS: FreeList = FreeList::new(4096);
static MESSAGES: FreeList = FreeList::new(1024);

impl Recycled for FrozenDict {
    fn free_list() -> &'static FreeList {
        &FROZEN_DICTS
    }
}

impl Recycled for Message {
    fn free_list() -> &'static FreeList {
        &MESSAGES
    }
}

/// Give `FrozenDict` and `Message` their free lists (at module initialisation).
pub(crate) fn install_free_lists(py: Python<'_>) {
    install::<FrozenDict>(py);
    install::<Message>(py);
}
