//! `vouch_plain_append`: the data of a new plain event (one that carries no message) frozen and
//! proven to pass its type's field rule in one call, for `Session.append`'s plain path.
//!
//! The rules are `dshkit.session.events.PLAIN_EVENT_RULES`, which the native passes read through
//! `plain_rules.rs`, as the stored-record scan (`record_scan.rs`) does. Like that
//! scan it answers only when sure: `None` means "take the Python path", whose check decides the
//! event and names the rule it breaks. Only the freeze itself may raise here, with the very error
//! `freeze(data)` raises on the Python path.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::log::plain_rules::{plain_rule, PlainData, PlainField};
use crate::value::freeze::freeze_at;
use crate::value::frozendict::FrozenDict;

/// A new event's frozen data, as the plain rules read it (exact types only: anything else is
/// the Python check's call).
struct Frozen<'a, 'py>(Python<'py>, &'a FrozenDict);

impl Frozen<'_, '_> {
    fn field(&self, field: PlainField) -> Option<Bound<'_, PyAny>> {
        self.1.get_str(self.0, field.key())
    }
}

impl PlainData for Frozen<'_, '_> {
    fn int(&self, field: PlainField) -> bool {
        self.field(field).is_some_and(|v| unsafe { ffi::PyLong_CheckExact(v.as_ptr()) != 0 })
    }

    fn text(&self, field: PlainField) -> bool {
        self.field(field).is_some_and(|v| v.is_exact_instance_of::<PyString>())
    }

    fn reason_with_kind(&self) -> bool {
        self.1.get_str(self.0, "reason").is_some_and(|reason| {
            reason.cast_exact::<FrozenDict>().is_ok_and(|reason| {
                reason.get().get_str(self.0, "kind").is_some_and(|kind| kind.is_exact_instance_of::<PyString>())
            })
        })
    }
}

/// `data` deep-frozen if `event_type` is a plain type this vouches for, `data` is a `dict` (or a
/// `FrozenDict`, given back as is) and the frozen data passes the type's field rule; else `None`
/// (the Python path decides). Raises what `freeze(data)` raises for data that cannot be frozen.
#[pyfunction]
#[pyo3(signature = (event_type, data, /))]
pub(crate) fn vouch_plain_append<'py>(
    event_type: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = data.py();
    // A `FrozenDict` is frozen already (`freeze` gives it back as is): an event copied from a log.
    let already_frozen = data.is_exact_instance_of::<FrozenDict>();
    if !already_frozen && !data.is_exact_instance_of::<PyDict>() {
        return Ok(None);
    }
    let Some(rule) = event_type
        .cast::<PyString>()
        .ok()
        .filter(|t| t.is_exact_instance_of::<PyString>())
        .and_then(|t| t.to_str().ok())
        .and_then(|t| plain_rule(t.as_bytes()))
    else {
        return Ok(None);
    };
    let frozen = if already_frozen { data.clone() } else { freeze_at(data, "value")? }; // the root `freeze(data)` names in its errors
    let vouched = frozen
        .cast_exact::<FrozenDict>()
        .is_ok_and(|dict| rule.holds(&Frozen(py, dict.get())));
    Ok(vouched.then_some(frozen))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vouch_plain_append, m)?)?;
    Ok(())
}
