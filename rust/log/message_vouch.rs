//! Which stored message events `decode_records` (`log/records.rs`) vouches for: an `"append"`
//! whose event passes every append rule that does not depend on the log before it.
//!
//! Those are `dshkit.session.events.prepare_data` (the role the event type needs, the source
//! kind rules, a tool result's one `tool_result` block, the envelope's field types),
//! `prepare_surface_op` (exactly `"append"`) and `prepare_source_seqs` (ints naming earlier
//! events), and, of `Surface._check_append`, the one stateless rule (an assistant message names
//! each tool call once). What is left, the id not yet logged and the pending tool calls, is
//! stateful: `Surface.fold_appends` checks it in one loop for a whole run of vouched appends.
//!
//! `vouch_new_append` asks the same of an event about to be appended (`Session.append`), given
//! as the caller gave it: what `Surface.admit_new` then checks is only the stateful rest.
//!
//! Like the plain-record scan (`record_scan.rs`) it answers only when sure: `None` means "take
//! the full Python path", which decides the event as before, naming the rule it breaks.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple};

use crate::value::freeze::freeze_at;
use crate::value::frozendict::FrozenDict;
use crate::value::message::Message;
use crate::value::strs::text_of;

/// An assistant message naming more tool calls than this takes the full path (keeps the
/// repeated-id check a short scan).
const MAX_CALLS: usize = 64;

/// What a vouched append does to the surface, beyond putting its id in the log.
pub(crate) enum Append<'py> {
    /// A user message, or a visible assistant message without tool calls: a node.
    Node,
    /// A visible assistant message with these tool calls (distinct ids): a node, calls pending.
    Calls(Vec<Bound<'py, PyString>>),
    /// A tool result answering this call id: a node, if that call is pending.
    Answer(Bound<'py, PyString>),
    /// An assistant message without visible content (`surface.is_model_visible`): no node.
    Invisible,
}

impl<'py> Append<'py> {
    /// The tag `Surface.fold_appends` reads: `None` (a node), a tuple of call ids (a node whose
    /// calls wait for results), a call id (a node answering that call) or `False` (no node).
    pub(crate) fn into_tag(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Append::Node => py.None().into_bound(py),
            Append::Calls(ids) => PyTuple::new(py, ids)?.into_any(),
            Append::Answer(id) => id.into_any(),
            Append::Invisible => PyBool::new(py, false).to_owned().into_any(),
        })
    }
}

fn text<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    text_of(value.cast::<PyString>().ok().filter(|s| s.is_exact_instance_of::<PyString>())?)
}

fn exact_int(value: &Bound<'_, PyAny>) -> bool {
    unsafe { ffi::PyLong_CheckExact(value.as_ptr()) != 0 }
}

/// `prepare_surface_op` gives `"append"` and `prepare_source_seqs` accepts the seqs of event `seq`.
fn appends_citing_the_past(seq: usize, surface_op: &Bound<'_, PyAny>, source_seqs: &Bound<'_, PyAny>) -> Option<()> {
    (text(surface_op)? == "append").then_some(())?;
    let source_seqs = source_seqs.cast::<PyTuple>().ok().filter(|t| t.is_exact_instance_of::<PyTuple>())?;
    for cited in source_seqs.iter() {
        if !exact_int(&cited) || !(0..seq as i64).contains(&cited.extract::<i64>().ok()?) {
            return None;
        }
    }
    Some(())
}

/// `events._check_envelope` passes on an assistant/message or tool/result's data.
fn envelope_passes(py: Python<'_>, data: &FrozenDict) -> Option<()> {
    for (key, value) in data.iter(py) {
        envelope_field_passes(py, text(&key)?, &value).then_some(())?;
    }
    Some(())
}

/// `events._check_envelope` passes on the field `key` of an assistant/message or tool/result's
/// data holding `value` (the message itself is not its concern: any value passes).
pub(crate) fn envelope_field_passes(py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> bool {
    match key {
        "turn" | "step" => exact_int(value),
        "interrupted" => value.is_exact_instance_of::<PyBool>(),
        "usage" => value.is_exact_instance_of::<FrozenDict>(),
        "error" => {
            value.is_none()
                || value.cast::<FrozenDict>().is_ok_and(|error| {
                    let field = |key| error.get().get_str(py, key).is_some_and(|v| text(&v).is_some());
                    error.is_exact_instance_of::<FrozenDict>() && field("name") && field("code")
                })
        }
        _ => true,
    }
}

/// The content blocks of `content` whose `type` is the `str` `kind`, in order; `None` if a block
/// is no `FrozenDict` (the full path decides). An iterator: nothing is collected.
fn blocks_of_type<'a, 'py>(
    content: &'a Bound<'py, PyTuple>,
    kind: &'a str,
) -> Option<impl Iterator<Item = Bound<'py, FrozenDict>> + 'a> {
    let py = content.py();
    content.iter().all(|block| block.is_instance_of::<FrozenDict>()).then_some(())?;
    Some(content.iter().filter_map(move |block| {
        let block = block.cast_into::<FrozenDict>().ok()?; // each is (checked above)
        let block_type = block.get().get_str(py, "type");
        (block_type.as_ref().and_then(|t| text(t)) == Some(kind)).then_some(block)
    }))
}

/// `surface.is_model_visible` for an assistant message's content.
fn visible(content: &Bound<'_, PyTuple>) -> Option<bool> {
    let py = content.py();
    for block in content.iter() {
        let block = block.cast_into::<FrozenDict>().ok()?;
        let block = block.get();
        let plain = block.get_str(py, "type").as_ref().and_then(|t| text(t)).is_some_and(|t| t == "text" || t == "reasoning");
        if !plain || block.get_str(py, "text").map_or(Ok(false), |t| t.is_truthy()).ok()? {
            return Some(true);
        }
    }
    Some(false)
}

/// The distinct call ids of an assistant message's `tool_call` blocks (`surface._call_ids`).
fn distinct_call_ids<'py>(content: &Bound<'py, PyTuple>) -> Option<Vec<Bound<'py, PyString>>> {
    let py = content.py();
    let mut ids: Vec<Bound<'py, PyString>> = Vec::new();
    for call in blocks_of_type(content, "tool_call")? {
        if ids.len() == MAX_CALLS {
            return None;
        }
        let id = call.get().get_str(py, "id")?;
        let id_text = text(&id)?;
        if ids.iter().any(|seen| text_of(seen) == Some(id_text)) {
            return None;
        }
        ids.push(id.cast_into::<PyString>().ok()?);
    }
    Some(ids)
}

/// The stateless append rules for a message event `seq` of `event_type`, carrying `message`
/// (in `envelope`, the event's data, unless it is a user/message): what the append does, or
/// `None` when in doubt.
pub(crate) fn vouch_append<'py>(
    event_type: &str,
    seq: usize,
    envelope: Option<&Bound<'py, FrozenDict>>,
    message: &Bound<'py, Message>,
    surface_op: &Bound<'py, PyAny>,
    source_seqs: &Bound<'py, PyAny>,
) -> Option<Append<'py>> {
    if event_type != "user/message" {
        envelope_passes(message.py(), envelope?.get())?;
    }
    vouch_message_append(event_type, seq, message, surface_op, source_seqs)
}

/// `vouch_append` for an event whose caller has checked its envelope already (a stored record,
/// read field by field: `envelope_field_passes`).
pub(crate) fn vouch_message_append<'py>(
    event_type: &str,
    seq: usize,
    message: &Bound<'py, Message>,
    surface_op: &Bound<'py, PyAny>,
    source_seqs: &Bound<'py, PyAny>,
) -> Option<Append<'py>> {
    let py = message.py();
    appends_citing_the_past(seq, surface_op, source_seqs)?;
    let (role, content, source) = message.get().parts(py);
    let role = text_of(role)?;
    let kind_value = source.get().get_str(py, "kind")?;
    let kind = text(&kind_value)?;
    match event_type {
        "user/message" if role == "user" && kind != "tool" && kind != "model" => Some(Append::Node),
        "assistant/message" if role == "assistant" && !matches!(kind, "tool" | "user" | "plugin") => {
            if !visible(content)? {
                return Some(Append::Invisible);
            }
            let calls = distinct_call_ids(content)?;
            Some(if calls.is_empty() { Append::Node } else { Append::Calls(calls) })
        }
        "tool/result" if role == "user" && kind == "tool" => {
            let call_id = source.get().get_str(py, "call_id")?;
            let call_id_text = text(&call_id)?;
            let mut answers = blocks_of_type(content, "tool_result")?;
            let (Some(answer), None) = (answers.next(), answers.next()) else { return None };
            let answered = answer.get().get_str(py, "tool_call_id")?;
            (text(&answered)? == call_id_text).then_some(())?;
            Some(Append::Answer(call_id.cast_into::<PyString>().ok()?))
        }
        _ => None,
    }
}

/// `data` of a new `event_type` event as `prepare_data` freezes it, with its `Message`: the
/// `Message` itself for a user/message, else a `dict` deep-frozen (or a `FrozenDict` as it is)
/// holding one under `"message"`. `None` for anything else (the full path decides, or refuses).
fn frozen_message_data<'py>(event_type: &str, data: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyAny>, Bound<'py, Message>)> {
    let py = data.py();
    if event_type == "user/message" {
        return Some((data.clone(), data.cast_exact::<Message>().ok()?.clone()));
    }
    let frozen = if data.is_exact_instance_of::<PyDict>() {
        freeze_at(data, "data").ok()?
    } else if data.is_exact_instance_of::<FrozenDict>() {
        data.clone()
    } else {
        return None;
    };
    let message = frozen.cast_exact::<FrozenDict>().ok()?.get().get_str(py, "message")?.cast_into_exact::<Message>().ok()?;
    Some((frozen, message))
}

/// The stateless append rules for a message event about to be appended as event `seq`, given as
/// `Session.append` was given it (`surface_op` `None` or `"append"`, `source_seqs` a tuple):
/// `(frozen data, message, tag)` (the tag as `Append::into_tag`), or `None` when in doubt.
#[pyfunction]
#[pyo3(signature = (event_type, data, surface_op, source_seqs, seq, /))]
pub(crate) fn vouch_new_append<'py>(
    event_type: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    surface_op: &Bound<'py, PyAny>,
    source_seqs: &Bound<'py, PyAny>,
    seq: usize,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let py = data.py();
    let Some(event_type) = text(event_type) else { return Ok(None) };
    if !matches!(event_type, "user/message" | "assistant/message" | "tool/result") {
        return Ok(None);
    }
    let Some((frozen, message)) = frozen_message_data(event_type, data) else { return Ok(None) };
    let append_op = PyString::intern(py, "append");
    let surface_op = if surface_op.is_none() { append_op.as_any() } else { surface_op };
    let envelope = frozen.cast_exact::<FrozenDict>().ok();
    let Some(append) = vouch_append(event_type, seq, envelope, &message, surface_op, source_seqs) else { return Ok(None) };
    let tag = append.into_tag(py)?;
    Ok(Some(PyTuple::new(py, [frozen, message.into_any(), tag])?))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(vouch_new_append, m)?)?;
    Ok(())
}
