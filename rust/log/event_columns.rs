//! Moving a batch of `EventLog`'s older events into its compact columns, in one call
//! (`EventLog._compact`, `python/dshkit/session/event_log.py`, which reads them back in `_decode`).
//!
//! Each event leaves its type, its time, the `Message` a message event carries (the surface's own
//! object, never copied), and a kind byte with the rest of the event as compact JSON:
//!
//! - `D` + the JSON of the data: an event without a surface operation;
//! - `U` alone: a message event whose data is the message itself, citing nothing (a `user/message`
//!   appended by the agent);
//! - `M` + `[envelope, source seqs]`: any other message event, the envelope being its data with
//!   `null` for the message, or `null` when the data is the message itself;
//! - `E` alone: an event whose data cannot be written as JSON (a `str` holding a lone surrogate,
//!   which a session without a store accepts). It is kept whole, by seq, so that moving events
//!   never fails and never loses one.
//!
//! A surface operation other than `"append"` is returned by seq (the columns keep only the usual
//! one). In Python this was a loop of a dozen operations per event around `to_json_bytes`: 54k
//! instructions per agent step once a log passes 512 events.

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::json::write::leaves::write_member_key;
use crate::json::write::tree::{with_buffer, write_value};
use crate::value::errors::PathError;
use crate::value::frozendict::FrozenDict;
use crate::value::message::Message;
use crate::value::walk::Walk;

/// Kind bytes of `EventLog`'s compact form (`event_log.py` names them too): an event's data, a
/// user/message at the end of the surface citing nothing, a message event's `[data with null for
/// its message, source seqs]`, an event kept whole. `records.rs` writes the first three as well.
pub(crate) const KIND_DATA: u8 = b'D';
pub(crate) const KIND_USER: u8 = b'U';
pub(crate) const KIND_MESSAGE: u8 = b'M';
const KIND_KEPT: u8 = b'E';

/// The columns of the events moved: what `EventLog` appends to its own.
struct Columns<'py> {
    types: Bound<'py, PyList>,
    times: Vec<u8>,
    messages: Bound<'py, PyList>,
    ends: Vec<u8>,
    /// `(seq, surface_op)` of a message event whose operation is not `"append"`.
    ops: Bound<'py, PyList>,
    /// `(seq, event)` of an event kept whole (`E`).
    kept: Bound<'py, PyList>,
}

/// Move the first `count` events of `events` (a list of `Event`s) into compact columns whose
/// blob so far is `offset` bytes long: `(types, times, messages, blob, ends, ops, kept)`, the
/// times and end offsets as native 8-byte words (for `array.frombytes`).
#[pyfunction]
#[pyo3(signature = (events, count, offset, /))]
pub(crate) fn compact_events<'py>(events: &Bound<'py, PyList>, count: usize, offset: u64) -> PyResult<Bound<'py, PyTuple>> {
    let py = events.py();
    if count > events.len() {
        return Err(PyIndexError::new_err(format!("compact_events: {count} events asked, {} given", events.len())));
    }
    let mut columns = Columns {
        types: PyList::empty(py),
        times: Vec::with_capacity(8 * count),
        messages: PyList::empty(py),
        ends: Vec::with_capacity(8 * count),
        ops: PyList::empty(py),
        kept: PyList::empty(py),
    };
    let blob = with_buffer(
        |out| {
            for index in 0..count {
                move_event(out, &events.get_item(index)?, offset, &mut columns)?;
            }
            Ok(())
        },
        |bytes| Ok(PyBytes::new(py, bytes)),
    )?;
    let Columns { types, times, messages, ends, ops, kept } = columns;
    PyTuple::new(
        py,
        [
            types.into_any(),
            PyBytes::new(py, &times).into_any(),
            messages.into_any(),
            blob.into_any(),
            PyBytes::new(py, &ends).into_any(),
            ops.into_any(),
            kept.into_any(),
        ],
    )
}

fn move_event<'py>(out: &mut Vec<u8>, event: &Bound<'py, PyAny>, offset: u64, columns: &mut Columns<'py>) -> PyResult<()> {
    let py = event.py();
    let fields = event.cast::<PyTuple>()?;
    if fields.len() != 6 {
        return Err(PyTypeError::new_err("compact_events: an event is a 6-tuple"));
    }
    let [event_type, seq, time, data, op, source_seqs] = std::array::from_fn(|i| fields.get_borrowed_item(i).expect("index < 6"));
    columns.types.append(event_type)?;
    columns.times.extend_from_slice(&time.extract::<i64>()?.to_ne_bytes());
    let start = out.len();
    let (message, written) = if op.is_none() {
        out.push(KIND_DATA);
        (py.None().into_bound(py), write_value(out, &data, &mut Walk::new()))
    } else {
        if !is_str(&op, "append") {  // the columns' default operation
            columns.ops.append((&seq, &op))?;
        }
        write_message_event(out, py, &data, &source_seqs)?
    };
    if written.is_err() {
        out.truncate(start);
        out.push(KIND_KEPT);
        columns.kept.append((&seq, event))?;
    }
    columns.messages.append(message)?;
    columns.ends.extend_from_slice(&(offset + out.len() as u64).to_ne_bytes());
    Ok(())
}

/// Write a message event's kind and JSON; returns the message it carries and how the JSON went.
fn write_message_event<'py>(
    out: &mut Vec<u8>,
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    source_seqs: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, Result<(), PathError>)> {
    if data.cast::<Message>().is_ok() {
        if source_seqs.cast::<PyTuple>().is_ok_and(|seqs| seqs.is_empty()) {
            out.push(KIND_USER);
            return Ok((data.clone(), Ok(())));
        }
        out.push(KIND_MESSAGE);
        out.extend_from_slice(b"[null,");
        let written = write_value(out, source_seqs, &mut Walk::below(1));
        out.push(b']');
        return Ok((data.clone(), written));
    }
    let envelope = data.cast::<FrozenDict>()?.get();
    let message = envelope
        .get_str(py, "message")
        .ok_or_else(|| PyKeyError::new_err("compact_events: a message event's data holds no 'message'"))?;
    out.push(KIND_MESSAGE);
    out.extend_from_slice(b"[{");
    let written = (|| {
        for (index, (key, value)) in envelope.iter(py).enumerate() {
            // SAFETY: a FrozenDict's keys are `str` objects, alive while the dict is.
            unsafe { write_member_key(out, key.as_ptr(), index == 0)? };
            if is_str(&key, "message") {
                out.extend_from_slice(b"null");
            } else {
                write_value(out, &value, &mut Walk::below(2))?;
            }
        }
        out.extend_from_slice(b"},");
        write_value(out, source_seqs, &mut Walk::below(1))?;
        out.push(b']');
        Ok(())
    })();
    Ok((message, written))
}

fn is_str(value: &Bound<'_, PyAny>, text: &str) -> bool {
    value.cast::<PyString>().is_ok_and(|value| value.to_str().is_ok_and(|value| value == text))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compact_events, m)?)?;
    Ok(())
}
