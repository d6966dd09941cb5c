//! `vouch_plain_append`: the data of a new plain event (one that carries no message) frozen and
//! proven to pass its type's field rule in one call, for `Session.append`'s plain path.
//!
//! The rules are `dshkit.session.events.PLAIN_DATA_CHECKS` (`_check_turn`, `_check_step`,
//! `_check_tool_call`, `_check_turn_end`, `_check_nothing`), the same ones the stored-record scan
//! proves on open (`record_scan.rs`). Like that scan it answers only when sure: `None` means "take
//! the Python path", whose check decides the event and names the rule it breaks. Only the freeze
//! itself may raise here, with the very error `freeze(data)` raises on the Python path.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::freeze::freeze_at;
use crate::frozendict::FrozenDict;

/// The field rule of each plain type this vouches for (the types the agent loop logs).
#[derive(Clone, Copy)]
enum Rule {
    Turn,
    Step,
    ToolCall,
    TurnEnd,
    Nothing,
}

fn rule_of(event_type: &str) -> Option<Rule> {
    Some(match event_type {
        "turn/start" => Rule::Turn,
        "step/start" | "step/end" | "assistant/chunk" => Rule::Step,
        "tool/call" => Rule::ToolCall,
        "turn/end" => Rule::TurnEnd,
        "compaction/start" | "compaction/summary" | "compaction/prune" | "compaction/end" => Rule::Nothing,
        _ => return None,
    })
}

fn exact_int(value: Option<Bound<'_, PyAny>>) -> bool {
    value.is_some_and(|v| unsafe { ffi::PyLong_CheckExact(v.as_ptr()) != 0 })
}

fn exact_str(value: Option<Bound<'_, PyAny>>) -> bool {
    value.is_some_and(|v| v.is_exact_instance_of::<PyString>())
}

/// Whether `data` passes `rule` for sure (exact types only: anything else is the Python check's call).
fn passes(py: Python<'_>, rule: Rule, data: &FrozenDict) -> bool {
    let int = |key| exact_int(data.get_str(py, key));
    let text = |key| exact_str(data.get_str(py, key));
    match rule {
        Rule::Turn => int("turn"),
        Rule::Step => int("turn") && int("step"),
        Rule::ToolCall => int("turn") && int("step") && text("call_id") && text("name") && text("arguments"),
        Rule::TurnEnd => {
            int("turn")
                && data.get_str(py, "reason").is_some_and(|reason| {
                    reason.cast_exact::<FrozenDict>().is_ok_and(|reason| exact_str(reason.get().get_str(py, "kind")))
                })
        }
        Rule::Nothing => true,
    }
}

/// `data` deep-frozen if `event_type` is a plain type this vouches for, `data` is a `dict` and the
/// frozen data passes the type's field rule; else `None` (the Python path decides). Raises what
/// `freeze(data)` raises for data that cannot be frozen.
#[pyfunction]
#[pyo3(signature = (event_type, data, /))]
pub(crate) fn vouch_plain_append<'py>(
    event_type: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = data.py();
    if !data.is_exact_instance_of::<PyDict>() {
        return Ok(None);
    }
    let Some(rule) = event_type
        .cast::<PyString>()
        .ok()
        .filter(|t| t.is_exact_instance_of::<PyString>())
        .and_then(|t| t.to_str().ok())
        .and_then(rule_of)
    else {
        return Ok(None);
    };
    let frozen = freeze_at(data, "value")?; // the root `freeze(data)` names in its errors
    let vouched = frozen.cast_exact::<FrozenDict>().is_ok_and(|dict| passes(py, rule, dict.get()));
    Ok(vouched.then_some(frozen))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vouch_plain_append, m)?)?;
    Ok(())
}
