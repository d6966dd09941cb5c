//! The field rules of the plain event types, as the native passes prove them.
//!
//! The table is Python's: `dshkit.session.events.PLAIN_EVENT_RULES`, the one place the plain
//! types and their fields are declared. `events.py` hands the rules the native passes can prove
//! to `set_plain_rules` once, when it is imported; until then no plain event is vouched for
//! natively (everything takes the Python path, which is always right). Two native passes prove
//! the rules to skip the Python call when sure: the log scan (`record_scan.rs`) on a stored
//! record's text, and `vouch_plain_append` (`plain_vouch.rs`) on a new event's frozen data; each
//! supplies what it knows of the fields (`PlainData`).

use std::sync::OnceLock;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple};

/// A field a plain rule reads: the fields the native passes collect.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum PlainField {
    Turn,
    Step,
    CallId,
    Name,
    Arguments,
}

impl PlainField {
    const ALL: [(&'static str, PlainField); 5] = [
        ("turn", PlainField::Turn),
        ("step", PlainField::Step),
        ("call_id", PlainField::CallId),
        ("name", PlainField::Name),
        ("arguments", PlainField::Arguments),
    ];

    fn named(name: &str) -> Option<PlainField> {
        Self::ALL.iter().find(|(known, _)| *known == name).map(|&(_, field)| field)
    }

    /// The data key this field is.
    pub(crate) fn key(self) -> &'static str {
        Self::ALL.iter().find(|&&(_, field)| field == self).map(|&(key, _)| key).unwrap_or("")
    }
}

/// What a native pass knows of a plain event's data; each answer is `true` only when sure.
pub(crate) trait PlainData {
    /// `field` is there once, an exact `int`.
    fn int(&self, field: PlainField) -> bool;
    /// `field` is there once, an exact `str`.
    fn text(&self, field: PlainField) -> bool;
    /// `reason` is there once, a mapping with a `str` `kind` (what a `turn/end` needs).
    fn reason_with_kind(&self) -> bool;
}

/// One plain type's rule: the `int` fields and the `str` fields it needs, and whether it needs a
/// `reason` mapping with a `str` `kind`.
#[derive(Clone, PartialEq, Debug)]
pub(crate) struct PlainRule {
    ints: Vec<PlainField>,
    texts: Vec<PlainField>,
    reason_with_kind: bool,
}

impl PlainRule {
    /// Whether `data` passes this rule for sure (fields in the order the Python check reads them).
    #[inline]
    pub(crate) fn holds(&self, data: &impl PlainData) -> bool {
        self.ints.iter().all(|&field| data.int(field))
            && self.texts.iter().all(|&field| data.text(field))
            && (!self.reason_with_kind || data.reason_with_kind())
    }
}

/// The table `set_plain_rules` was given: each plain type (its UTF-8) and its rule.
type PlainRules = Vec<(Box<[u8]>, PlainRule)>;

static PLAIN_RULES: OnceLock<PlainRules> = OnceLock::new();

/// The rule of `event_type`, when it is a plain type the native passes vouch for.
#[inline]
pub(crate) fn plain_rule(event_type: &[u8]) -> Option<&'static PlainRule> {
    PLAIN_RULES.get()?.iter().find(|(name, _)| **name == *event_type).map(|(_, rule)| rule)
}

fn fields(event_type: &str, what: &str, names: &Bound<'_, PyAny>) -> PyResult<Vec<PlainField>> {
    let names = names.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err(format!("plain rule of {event_type:?}: {what} must be a tuple of field names"))
    })?;
    names
        .iter()
        .map(|name| {
            let name = name.cast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!("plain rule of {event_type:?}: {what} must hold field names (str)"))
            })?;
            let name = name.to_str()?;
            PlainField::named(name).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "plain rule of {event_type:?}: the native passes read no field {name:?} (they read {:?})",
                    PlainField::ALL.map(|(key, _)| key)
                ))
            })
        })
        .collect()
}

fn parse_rules(rules: &Bound<'_, PyDict>) -> PyResult<PlainRules> {
    rules
        .iter()
        .map(|(event_type, rule)| {
            let event_type = event_type
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("plain rules: each event type must be a str"))?
                .to_str()?
                .to_owned();
            let parts = rule.cast::<PyTuple>().ok().filter(|parts| parts.len() == 3).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "plain rule of {event_type:?} must be (int fields, str fields, reason_with_kind)"
                ))
            })?;
            let reason_with_kind = parts.get_item(2)?;
            let reason_with_kind = reason_with_kind.cast::<PyBool>().map_err(|_| {
                PyTypeError::new_err(format!("plain rule of {event_type:?}: reason_with_kind must be a bool"))
            })?;
            let rule = PlainRule {
                ints: fields(&event_type, "int fields", &parts.get_item(0)?)?,
                texts: fields(&event_type, "str fields", &parts.get_item(1)?)?,
                reason_with_kind: reason_with_kind.is_true(),
            };
            Ok((event_type.into_bytes().into_boxed_slice(), rule))
        })
        .collect()
}

/// Give the native passes the plain types' rules (`{type: (int fields, str fields,
/// reason_with_kind)}`), once: `dshkit.session.events` does it when imported. A second call
/// must give the same table.
#[pyfunction]
#[pyo3(signature = (rules, /))]
pub(crate) fn set_plain_rules(rules: &Bound<'_, PyDict>) -> PyResult<()> {
    match PLAIN_RULES.set(parse_rules(rules)?) {
        Ok(()) => Ok(()),
        Err(again) if PLAIN_RULES.get() == Some(&again) => Ok(()),
        Err(_) => Err(PyValueError::new_err(
            "the plain rules are set already, to another table: the native passes read one table per process",
        )),
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_plain_rules, m)?)?;
    Ok(())
}

/// The agent loop's plain rules for the Rust tests (the table `events.py` gives in the library).
#[cfg(test)]
pub(crate) fn set_test_rules() {
    use PlainField::{Arguments, CallId, Name, Step, Turn};
    let rule = |ints: &[PlainField], texts: &[PlainField], reason_with_kind| PlainRule {
        ints: ints.to_vec(),
        texts: texts.to_vec(),
        reason_with_kind,
    };
    PLAIN_RULES.get_or_init(|| {
        let mut rules: PlainRules = vec![
            (b"turn/start"[..].into(), rule(&[Turn], &[], false)),
            (b"turn/end"[..].into(), rule(&[Turn], &[], true)),
            (b"tool/call"[..].into(), rule(&[Turn, Step], &[CallId, Name, Arguments], false)),
        ];
        for step_type in ["step/start", "step/end", "assistant/chunk"] {
            rules.push((step_type.as_bytes().into(), rule(&[Turn, Step], &[], false)));
        }
        for free in ["compaction/start", "compaction/summary", "compaction/prune", "compaction/end"] {
            rules.push((free.as_bytes().into(), rule(&[], &[], false)));
        }
        rules
    });
}
