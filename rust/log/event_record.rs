//! `new_event`: an `Event` (a named tuple) built from its six fields and taken out of the cyclic
//! GC when nothing it holds is in it.
//!
//! CPython untracks an exact tuple of untracked items when a collection first sees it, but never a
//! tuple subclass, so every `Event` of a live session stayed tracked: the GC walked each of them
//! at every full collection (issue 37). An event holds a `str`, two `int`s, frozen data (a
//! `FrozenDict` or `Message`, untracked when made, `value/walk.rs` `untrack`), a surface operation
//! (a `str`, `None` or a `FrozenDict`) and a tuple of `int` seqs; the class has no `__dict__` (named
//! tuples declare empty `__slots__`), so such an event can reach no object that could ever lead
//! back to it. The rule is CPython's own for tuples: untrack only when every item is untracked.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

/// Whether `obj` is, or can be made, invisible to the cyclic GC: not a GC object, already
/// untracked, or an exact tuple of such items (untracked here, as CPython would at its next pass).
fn settle_untracked(obj: &Bound<'_, PyAny>) -> bool {
    let ptr = obj.as_ptr();
    unsafe {
        if ffi::PyObject_IS_GC(ptr) == 0 || ffi::PyObject_GC_IsTracked(ptr) == 0 {
            return true;
        }
        if ffi::PyTuple_CheckExact(ptr) == 0 {
            return false;
        }
    }
    let tuple = unsafe { obj.cast_unchecked::<PyTuple>() };
    // Items of a tuple are exact tuples only one level deep here (source seqs): no recursion limit needed.
    if tuple.iter().all(|item| settle_untracked(&item)) {
        unsafe { ffi::PyObject_GC_UnTrack(ptr.cast()) };
        return true;
    }
    false
}

/// `tuple.__new__(cls, fields)`, untracked when every field is (see the module comment).
#[pyfunction]
#[pyo3(signature = (cls, fields, /))]
fn new_event<'py>(cls: &Bound<'py, PyType>, fields: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
    let type_ptr = cls.as_type_ptr();
    unsafe {
        if ffi::PyType_IsSubtype(type_ptr, std::ptr::addr_of_mut!(ffi::PyTuple_Type)) == 0 || (*type_ptr).tp_dictoffset != 0 {
            return Err(PyTypeError::new_err(format!(
                "new_event needs a tuple subclass without a __dict__, not {}",
                cls.name()?
            )));
        }
    }
    // What `tuple.__new__(cls, fields)` does for an exact tuple, without its argument tuple: an
    // instance of the subclass (the class's own allocator) holding the same items.
    let count = fields.len();
    let event = unsafe {
        let alloc = (*type_ptr).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
        let event = Bound::from_owned_ptr_or_err(cls.py(), alloc(type_ptr, count as ffi::Py_ssize_t))?;
        for (index, field) in fields.iter().enumerate() {
            ffi::PyTuple_SET_ITEM(event.as_ptr(), index as ffi::Py_ssize_t, field.into_ptr());
        }
        event
    };
    if fields.iter().all(|field| settle_untracked(&field)) {
        unsafe { ffi::PyObject_GC_UnTrack(event.as_ptr().cast()) };
    }
    Ok(event)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(new_event, m)?)
}
