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
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::json::write::leaves::write_member_key;
use crate::json::write::tree::{with_buffer, write_value};
use crate::value::errors::PathError;
use crate::value::frozendict::FrozenDict;
use crate::value::message::Message;
use crate::value::walk::{untrack, Walk};

/// Kind bytes of `EventLog`'s compact form (`event_log.py` names them too): an event's data, a
/// user/message at the end of the surface citing nothing, a message event's `[data with null for
/// its message, source seqs]`, an event kept whole. `records.rs` and `original/columns.rs` write
/// them as well (a record left to the Python decoder kept whole by seq, `E`).
pub(crate) const KIND_DATA: u8 = b'D';
pub(crate) const KIND_USER: u8 = b'U';
pub(crate) const KIND_MESSAGE: u8 = b'M';
pub(crate) const KIND_KEPT: u8 = b'E';

/// A blob of `EventLog`'s compact form as a log is decoded (`log/records.rs`,
/// `original/columns.rs`): a kind byte and the parts of the event's text after it, event after
/// event, written straight into the bytearray `EventLog.adopt` keeps, never copied whole (a `Vec`
/// copied into a new bytearray at the end cost a second ~2 MB of fresh pages on the bench's log).
/// Its first size is what the records' texts add up to, which only the original's packed rows'
/// events can outgrow (it then grows by doubling); `finish` cuts it to what was written.
pub(crate) struct Blob<'py> {
    array: Bound<'py, PyAny>,
    /// The bytearray's bytes (moved by a resize only).
    buffer: *mut u8,
    len: usize,
    capacity: usize,
}

impl<'py> Blob<'py> {
    pub(crate) fn new(py: Python<'py>, capacity: usize) -> PyResult<Self> {
        // SAFETY: a new bytearray of `capacity` bytes, not yet initialised (not zeroed first, as
        // `PyByteArray::new_with` would, one more pass over it), which no Python code sees before
        // `finish` cuts it to the `len` bytes `extend` wrote; on an error it is dropped unread.
        let array = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyByteArray_FromStringAndSize(std::ptr::null(), capacity as ffi::Py_ssize_t))? };
        let buffer = unsafe { ffi::PyByteArray_AsString(array.as_ptr()) }.cast();
        Ok(Blob { array, buffer, len: 0, capacity })
    }

    /// The bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `kind` and the `data` parts, appended.
    pub(crate) fn extend(&mut self, kind: u8, data: &[&[u8]]) -> PyResult<()> {
        let end = self.len + 1 + data.iter().map(|part| part.len()).sum::<usize>();
        if end > self.capacity {
            self.resize(end.max(2 * self.capacity))?;
        }
        // SAFETY: the bytearray holds `capacity >= end` bytes at `buffer`, and only this `Blob`
        // writes to it; each part (another object's bytes) fits before `end`, as summed above.
        // Most parts are empty or one byte (a bracket): written here, not by a `memcpy` call each.
        unsafe {
            *self.buffer.add(self.len) = kind;
            self.len += 1;
            for part in data {
                match part {
                    [] => {}
                    [byte] => *self.buffer.add(self.len) = *byte,
                    _ => std::ptr::copy_nonoverlapping(part.as_ptr(), self.buffer.add(self.len), part.len()),
                }
                self.len += part.len();
            }
        }
        Ok(())
    }

    fn resize(&mut self, size: usize) -> PyResult<()> {
        // SAFETY: a bytearray only this `Blob` holds; its first `len` bytes are kept.
        if unsafe { ffi::PyByteArray_Resize(self.array.as_ptr(), size as ffi::Py_ssize_t) } != 0 {
            return Err(PyErr::fetch(self.array.py()));
        }
        self.buffer = unsafe { ffi::PyByteArray_AsString(self.array.as_ptr()) }.cast();
        self.capacity = size;
        Ok(())
    }

    /// The bytearray, cut to the bytes written.
    pub(crate) fn finish(mut self) -> PyResult<Bound<'py, PyAny>> {
        self.resize(self.len)?;
        Ok(self.array)
    }
}

/// A decoded log's columns as `EventLog.adopt` takes them (`log/records.rs`,
/// `original/columns.rs`): `(types, times, messages, blob, ends, pending)`, the times and end
/// offsets as native 8-byte words. `EventLog` keeps the two lists for the session's life and only
/// ever puts an event's type (a `str`) or its `Message` (else `None`) in them, none of which can
/// lead back to a list: no cycle runs through them, so they are untracked, and no collection
/// walks their items (two per event) at every pass that reaches them.
pub(crate) fn decoded_columns<'py>(
    types: Vec<Bound<'py, PyAny>>,
    times: &[i64],
    messages: Vec<Bound<'py, PyAny>>,
    blob: Blob<'py>,
    ends: &[u64],
    pending: Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyTuple>> {
    let py = pending.py();
    let as_bytes = |words: Vec<[u8; 8]>| PyBytes::new(py, words.as_flattened());
    let times = as_bytes(times.iter().map(|time| time.to_ne_bytes()).collect());
    let ends = as_bytes(ends.iter().map(|end| end.to_ne_bytes()).collect());
    let types = PyList::new(py, types)?;
    let messages = PyList::new(py, messages)?;
    untrack(types.as_any());
    untrack(messages.as_any());
    PyTuple::new(py, [types.into_any(), times.into_any(), messages.into_any(), blob.finish()?, ends.into_any(), pending.into_any()])
}

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
