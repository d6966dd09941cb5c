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
    objects: Vec<*mut ffi::PyObject>,
}

// SAFETY: every access happens in `tp_alloc`, `tp_free` or `install`, with the GIL held, which
// serialises them (`install` is compiled out where there is no GIL).
unsafe impl Sync for FreeList {}

impl FreeList {
    pub(crate) const fn new(keep: usize) -> Self {
        FreeList { keep, state: UnsafeCell::new(State { of_type: std::ptr::null_mut(), objects: Vec::new() }) }
    }
}

/// `tp_alloc`: a kept object when there is one, else a new one.
unsafe extern "C" fn alloc<T: Recycled>(subtype: *mut ffi::PyTypeObject, items: ffi::Py_ssize_t) -> *mut ffi::PyObject {
    let state = &mut *T::free_list().state.get();
    if items == 0 && subtype == state.of_type {
        if let Some(object) = state.objects.pop() {
            // Released untracked by `tp_dealloc`, so it comes back untracked, with its type's
            // reference taken again (`PyObject_Init` on a heap type).
            ffi::PyObject_Init(object, subtype);
            return object;
        }
    }
    ffi::PyType_GenericAlloc(subtype, items)
}

/// `tp_free`: keeps the object while the list has room, else frees it (`PyType_GenericAlloc`'s
/// inverse for a GC type, as every PyO3 class is).
unsafe extern "C" fn free<T: Recycled>(object: *mut c_void) {
    let list = T::free_list();
    let state = &mut *list.state.get();
    if state.objects.len() < list.keep && ffi::Py_TYPE(object.cast()) == state.of_type {
        state.objects.push(object.cast());
        return;
    }
    ffi::PyObject_GC_Del(object);
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
