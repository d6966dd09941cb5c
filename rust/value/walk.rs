//! Mechanics shared by every recursive walk over a value tree (freeze, thaw, the JSON writer and
//! parser): the walk state with its depth and stack limits, the int/float checks, how a mapping
//! and a type are named, and taking a finished container out of the cyclic GC.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyInt, PyString, PyType};

use crate::value::errors::PathError;

/// Containers may nest this deep (the root container is level 1).
pub(crate) const MAX_DEPTH: usize = 256;

/// Reserve this much stack before recursing into a container, growing onto the heap when less
/// is left: 256 levels must also fit on small thread stacks.
pub(crate) const STACK_RED_ZONE: usize = 64 * 1024;
pub(crate) const STACK_GROWTH: usize = 1024 * 1024;
/// Checking the stack costs a thread-local read: once every few levels is enough, as the red
/// zone covers far more than that many frames.
pub(crate) const STACK_CHECK_EVERY: usize = 8;

pub(crate) fn too_deep() -> PathError {
    PathError::value_error(format!("nesting deeper than {MAX_DEPTH} levels"))
}

/// Run `inside` at nesting `level`, on enough stack.
#[inline(always)]
pub(crate) fn on_enough_stack<T>(level: usize, inside: impl FnOnce() -> T) -> T {
    if level % STACK_CHECK_EVERY == 0 {
        stacker::maybe_grow(STACK_RED_ZONE, STACK_GROWTH, inside)
    } else {
        inside()
    }
}

/// Walk state: the containers on the current path, to tell a cycle from deep nesting.
pub(crate) struct Walk {
    path: Vec<*mut ffi::PyObject>,
    /// Levels above the walk's root (a message's content sits one level below the message).
    outer_levels: usize,
}

impl Walk {
    pub(crate) fn new() -> Self {
        Walk { path: Vec::new(), outer_levels: 0 }
    }

    pub(crate) fn below(outer_levels: usize) -> Self {
        Walk { path: Vec::new(), outer_levels }
    }

    /// Containers above the current position.
    #[inline]
    pub(crate) fn level(&self) -> usize {
        self.outer_levels + self.path.len()
    }

    /// Enter a container; errors when nesting exceeds `MAX_DEPTH` (reporting a cycle if the
    /// container is already on the path).
    #[inline]
    fn enter(&mut self, obj: &Bound<'_, PyAny>) -> Result<(), PathError> {
        if self.level() >= MAX_DEPTH {
            let ptr = obj.as_ptr();
            if let Some(first) = self.path.iter().position(|p| *p == ptr) {
                // Name the path to the container's second appearance: where the cycle closes.
                let second = self.path[first + 1..].iter().position(|p| *p == ptr).map(|i| first + 1 + i);
                let mut err = PathError::value_error("cycle detected: a container contains itself");
                err.outer_segments = Some(second.unwrap_or(self.path.len()));
                return Err(err);
            }
            return Err(too_deep());
        }
        self.path.push(obj.as_ptr());
        Ok(())
    }

    #[inline]
    fn leave(&mut self) {
        self.path.pop();
    }

    /// Does an already-built part `depth` levels deep fit here within the limit?
    #[inline]
    pub(crate) fn fits(&self, depth: usize) -> bool {
        self.level() + depth <= MAX_DEPTH
    }

    /// Can an already-built part `depth` levels deep be placed here without passing the limit?
    pub(crate) fn check_fits(&self, depth: usize) -> Result<(), PathError> {
        if self.level() + depth > MAX_DEPTH {
            return Err(too_deep());
        }
        Ok(())
    }

    /// Run `inside` with `obj` entered as a container, on enough stack.
    pub(crate) fn within<'py, T>(
        &mut self,
        obj: &Bound<'py, PyAny>,
        inside: impl FnOnce(&mut Walk) -> Result<T, PathError>,
    ) -> Result<T, PathError> {
        self.enter(obj)?;
        let level = self.path.len();
        let result = on_enough_stack(level, || inside(self));
        self.leave();
        result
    }
}

/// Take a container the walk built out of the cyclic GC. Frozen values only reference values
/// that existed before them, so they can never be part of a cycle; tracking them would only
/// make every collection walk them (it dominated the cost of freezing large trees).
#[inline]
pub(crate) fn untrack(obj: &Bound<'_, PyAny>) {
    unsafe {
        if ffi::PyObject_IS_GC(obj.as_ptr()) != 0 {
            ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
        }
    }
}

/// The cyclic GC held off while this guard lives, then set back as it was: for one native call
/// that builds many objects without running any Python code (and so without giving up the GIL).
/// What such a call builds is frozen or untracked, so the collections its allocations would
/// start (one per 700 container allocations: dozens while a log of 10,000 messages is decoded,
/// now and then a full one among them) could find no cycle; the first allocation after it starts
/// the one that is due. On a free-threaded build other threads run Python meanwhile and the
/// switch is the whole process's, so nothing is held off there.
pub(crate) struct GcPause {
    resume: bool,
}

impl GcPause {
    pub(crate) fn new(_py: Python<'_>) -> Self {
        // SAFETY: called with the GIL held (`_py`); `PyGC_Disable` returns whether it was enabled.
        #[cfg(not(Py_GIL_DISABLED))]
        let resume = unsafe { ffi::PyGC_Disable() } == 1;
        #[cfg(Py_GIL_DISABLED)]
        let resume = false;
        GcPause { resume }
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.resume {
            // SAFETY: the guard lives inside the call that made it, which holds the GIL.
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

/// The name of `obj`'s type, for error messages.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "object".to_owned())
}

/// The text of a key for an error path (lossy: a lone surrogate must not hide the real error).
pub(crate) fn key_text(key: &Bound<'_, PyAny>) -> String {
    key.cast::<PyString>().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

pub(crate) fn not_json(obj: &Bound<'_, PyAny>) -> PathError {
    PathError::type_error(format!("{} is not a JSON value", type_name(obj)))
}

/// A key that is not a `str`, named with its type and repr.
pub(crate) fn key_error(key: &Bound<'_, PyAny>) -> PathError {
    PathError::type_error(format!(
        "keys must be str, not {} ({})",
        type_name(key),
        key.repr().map(|r| r.to_string()).unwrap_or_default()
    ))
}

fn mapping_abc(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static MAPPING: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    MAPPING.import(py, "collections.abc", "Mapping")
}

/// Is `obj` a `collections.abc.Mapping`?
pub(crate) fn is_mapping(obj: &Bound<'_, PyAny>) -> bool {
    match mapping_abc(obj.py()) {
        Ok(abc) => obj.is_instance(abc).unwrap_or(false),
        Err(_) => false,
    }
}

/// The `(key, value)` pairs of a non-`dict` `Mapping`, from its own `items()`. An exception its
/// code raises (even KeyboardInterrupt) propagates unchanged.
pub(crate) fn mapping_pairs<'py>(
    obj: &Bound<'py, PyAny>,
) -> Result<Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>, PathError> {
    let py = obj.py();
    let items = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyMapping_Items(obj.as_ptr())) }
        .map_err(PathError::raised)?;
    let mut pairs = Vec::new();
    for pair in items.try_iter().map_err(PathError::raised)? {
        let pair = pair.map_err(PathError::raised)?;
        let pair = pair
            .extract::<(Bound<'py, PyAny>, Bound<'py, PyAny>)>()
            .map_err(|_| PathError::type_error("the mapping's items() must give (key, value) pairs"))?;
        pairs.push(pair);
    }
    Ok(pairs)
}

/// The value of an exact `int` small enough for CPython to hold in one 30-bit digit (below
/// 2^30 in magnitude: ids, counts, indexes), read from the object without a call; `None` for any
/// other (`PyLong_AsLongLong` reads those). The layouts are CPython's `PyLongObject`: up to
/// 3.11 the digit count and sign are the `ob_size` of its `PyVarObject` header, from 3.12 the
/// `lv_tag` word after a plain object header (sign in the low two bits, digit count from bit 3).
#[inline(always)]
pub(crate) unsafe fn small_int_value(obj: *mut ffi::PyObject) -> Option<i64> {
    #[cfg(all(target_pointer_width = "64", not(any(Py_3_12, PyPy, GraalPy, Py_LIMITED_API))))]
    {
        let header = obj as *const ffi::PyVarObject;
        let size = (*header).ob_size;
        if (-1..=1).contains(&size) {
            let digit = *(header.add(1) as *const u32);
            return Some(size as i64 * digit as i64);
        }
        None
    }
    #[cfg(all(target_pointer_width = "64", Py_3_12, not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API))))]
    {
        let value = (obj as *const ffi::PyObject).add(1) as *const usize;
        let tag = *value;
        if tag < 2 << 3 {
            let digit = *(value.add(1) as *const u32);
            return Some((1 - (tag & 3) as i64) * digit as i64);
        }
        None
    }
    #[cfg(not(all(target_pointer_width = "64", not(any(Py_3_14, PyPy, GraalPy, Py_LIMITED_API)))))]
    {
        let _ = obj;
        None
    }
}

/// Check that an `int` fits in 64 signed bits; its value.
#[inline]
pub(crate) fn check_int(obj: &Bound<'_, PyAny>) -> Result<i64, PathError> {
    if obj.is_exact_instance_of::<PyInt>() {
        // SAFETY: an exact `int`, whose layout is `PyLongObject`'s.
        if let Some(value) = unsafe { small_int_value(obj.as_ptr()) } {
            return Ok(value);
        }
    }
    let mut overflow: std::os::raw::c_int = 0;
    let value = unsafe { ffi::PyLong_AsLongLongAndOverflow(obj.as_ptr(), &mut overflow) };
    if overflow != 0 {
        return Err(PathError::value_error(format!(
            "int {} is outside the 64-bit signed range",
            obj.str().map(|s| s.to_string()).unwrap_or_default()
        )));
    }
    if value == -1 && unsafe { !ffi::PyErr_Occurred().is_null() } {
        return Err(PathError::raised(PyErr::fetch(obj.py())));
    }
    Ok(value)
}

/// Check that a `float` is finite (JSON has no NaN or infinities).
#[inline]
pub(crate) fn check_float(obj: &Bound<'_, PyAny>) -> Result<f64, PathError> {
    let value = unsafe { ffi::PyFloat_AsDouble(obj.as_ptr()) };
    if !value.is_finite() {
        return Err(PathError::value_error(format!(
            "float {} is not a JSON value (NaN and infinities are not allowed)",
            if value.is_nan() { "nan".to_owned() } else { format!("{value}") }
        )));
    }
    Ok(value)
}
