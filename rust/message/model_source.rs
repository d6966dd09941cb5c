//! The source of a new assistant message, `{"kind": "model", "provider", "model"}`, shared by the
//! messages of one model: an agent's history holds one such `FrozenDict` per model instead of
//! one per answer (112 bytes each, a tenth of what a tool-calling message retains). A source is
//! immutable, so sharing it is invisible but for `is`. One with `replay_state` is never shared.

use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyString};

use crate::value::frozendict::FrozenDict;

/// The provider and model the last shared source was built from (as given: exact `str`), and it.
struct LastSource {
    provider: Py<PyString>,
    model: Py<PyString>,
    source: Py<FrozenDict>,
}

// Held only briefly and only by a thread attached to Python; nothing in it calls back into Python.
static LAST: Mutex<Option<LastSource>> = Mutex::new(None);

/// Exact `str`s with the same code points (a subclass could compare or freeze otherwise).
fn same_text(given: &Bound<'_, PyAny>, held: &Py<PyString>) -> bool {
    given.is_exact_instance_of::<PyString>()
        && (given.as_ptr() == held.as_ptr() || unsafe { ffi::PyUnicode_Compare(given.as_ptr(), held.as_ptr()) } == 0)
}

/// The source last built for this provider and model, if it was.
pub(crate) fn reuse<'py>(provider: &Bound<'py, PyAny>, model: &Bound<'py, PyAny>) -> Option<Bound<'py, FrozenDict>> {
    let last = LAST.lock().ok()?;
    let last = last.as_ref()?;
    (same_text(provider, &last.provider) && same_text(model, &last.model)).then(|| last.source.bind(provider.py()).clone())
}

/// Keep `source`, built and checked from `provider` and `model`, for the next message.
pub(crate) fn remember(provider: &Bound<'_, PyAny>, model: &Bound<'_, PyAny>, source: &Bound<'_, FrozenDict>) {
    let (Ok(provider), Ok(model)) = (provider.cast_exact::<PyString>(), model.cast_exact::<PyString>()) else {
        return;
    };
    let kept = LastSource { provider: provider.clone().unbind(), model: model.clone().unbind(), source: source.clone().unbind() };
    // The replaced entry is released after the lock (its release runs no Python code, but needs none held).
    let replaced = LAST.lock().ok().and_then(|mut last| last.replace(kept));
    drop(replaced);
}
