//! Native decoding of a stored session log: one call per log instead of a Python loop per record.
//!
//! `decode_records` turns records (a `Records`, `stored_records.rs`: spans of a log's bytes, their
//! checksums checked on the way; or any sequence of `bytes`/`str` records, e.g. SQLite rows) into
//! the compact columns of `dshkit.session.event_log.EventLog`, and sorts them three ways:
//!
//! - plain: a record of a known type without a message (`turn/start`, `assistant/chunk`, ...)
//!   whose text a strict validating scan proves to parse and whose fields pass the append
//!   rules of its type. It is kept as its text only: no Python object is built for it, and
//!   folding it would change nothing.
//! - message: a `user/message`, `assistant/message` or `tool/result` record, read in one pass
//!   (`message_record.rs`: the envelope field by field, the message straight into a `Message`);
//!   returned as an `Event` for the caller to hold to the surface rules, or, when it passes
//!   every stateless append rule (`message_vouch.rs`), as a vouched append.
//! - anything else (an unknown type, a `request/header`, a float with an exponent, a `\u`
//!   escape in a key, a malformed record ...): left to the Python decoder by its index. The scan
//!   is deliberately narrower than the parser, so "plain" never vouches for a record the
//!   parser or the rules would refuse; everything it does not vouch for takes the full path.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::json::read::tape::Tape;
use crate::log::event_columns::{decoded_columns, Blob, KIND_DATA};
use crate::log::message_record::{read_message_record, KeptAppend};
use crate::log::message_tape::read_message_tape;
use crate::log::message_vouch::{vouch_message_append, Append};
use crate::log::record_scan::Sorted;
use crate::log::sort_ahead::with_sorted_records;
use crate::log::stored_records::Records;
use crate::value::strs::text_of;
use crate::value::walk::GcPause;

/// Kind bytes of `EventLog`'s compact form only a stored record has (`Kept`; the others are
/// `event_columns.rs`'): a record the Python decoder reads, a message event's record.
const KIND_RECORD: u8 = b'R';
const KIND_MESSAGE_RECORD: u8 = b'S';
const NULL: &[u8] = b"null";

/// A message event as the native pass decoded it.
enum Decoded<'py> {
    /// An append passing every rule that does not depend on the log before it (`message_vouch.rs`).
    Vouched(Append<'py>),
    /// Anything else, rebuilt as `event_class` (the `Event` named tuple) for the full checks.
    Event(Bound<'py, PyAny>),
}

/// A message event as `message_event` read it.
struct MessageEvent<'py> {
    decoded: Decoded<'py>,
    time: i64,
    message: Bound<'py, PyAny>,
    /// What the blob keeps of the record.
    kept: Kept,
}

/// A message event decoded with its time and `Message` (`message_record.rs`, or from the `tape`
/// read ahead: `message_tape.rs`), or `None` when anything is off (the Python decoder then names what).
fn message_event<'py>(
    py: Python<'py>,
    text: &str,
    tape: Option<Tape<'_>>,
    seq: usize,
    event_type: &Bound<'py, PyString>,
    event_class: &Bound<'py, PyAny>,
    tuple_new: &Bound<'py, PyAny>,
) -> Option<MessageEvent<'py>> {
    let type_name = text_of(event_type)?;
    // What the tape does not take, the text is read for: the same answer, or the same refusal.
    let record = tape
        .and_then(|tape| read_message_tape(py, text, tape, seq, type_name))
        .or_else(|| read_message_record(py, text, seq, type_name))?;
    let time = record.time;
    if record.envelope_passes(text) {
        let append = vouch_message_append(type_name, seq, &record.message, &record.surface_op, record.source_seqs.as_any());
        if let Some(append) = append {
            // An append (its surface_op is "append"): its data beside the message, and its seqs.
            let kept = Kept::Append(KeptAppend::of(&record, type_name));
            return Some(MessageEvent { decoded: Decoded::Vouched(append), time, message: record.message.into_any(), kept });
        }
    }
    let kept = Kept::RecordWithoutMessage(record.message_span);
    let data = record.data(text).ok()?;
    let seq_value = seq.into_pyobject(py).ok()?.into_any();
    let time_value = time.into_pyobject(py).ok()?.into_any();
    let fields = [event_type.as_any(), &seq_value, &time_value, &data, &record.surface_op, record.source_seqs.as_any()];
    let event = tuple_new.call1((event_class, PyTuple::new(py, fields).ok()?)).ok()?;
    Some(MessageEvent { decoded: Decoded::Event(event), time, message: record.message.into_any(), kept })
}

/// What the blob keeps of a record, after its kind byte (the forms `EventLog._decode` reads); a
/// plain event's `data` object alone (`KIND_DATA`) is written as `decode_records` reads it.
#[derive(Clone, Copy)]
enum Kept {
    /// The whole record (the Python decoder reads it).
    Record,
    /// A message event's record, its message (at this span) cut out, `null` in its place.
    RecordWithoutMessage((usize, usize)),
    /// A vouched message append, in the in-memory move's form (`KeptAppend`).
    Append(KeptAppend),
}

impl Kept {
    /// The kind byte, and the parts of `record` (a record's whole text) written after it: never
    /// more bytes than the record's.
    fn parts(self, record: &[u8]) -> (u8, [&[u8]; 7]) {
        let whole = [record, b"", b"", b"", b"", b"", b""];
        match self {
            Kept::Record => (KIND_RECORD, whole),
            // The event keeps its message as the `Message` (`EventLog` puts it back when it
            // rebuilds the event), so a copy in the record would double its memory.
            Kept::RecordWithoutMessage((start, stop)) if stop - start >= NULL.len() => {
                (KIND_MESSAGE_RECORD, [&record[..start], NULL, &record[stop..], b"", b"", b"", b""])
            }
            Kept::RecordWithoutMessage(_) => (KIND_MESSAGE_RECORD, whole), // no message is this short
            Kept::Append(append) => append.parts(record),
        }
    }
}

/// `decode_records`' `pending` as it is built: consecutive vouched appends gather into one run.
struct Pending<'py> {
    list: Bound<'py, PyList>,
    seqs: Vec<usize>,
    tags: Vec<Bound<'py, PyAny>>,
}

impl<'py> Pending<'py> {
    /// A vouched append, and what `Surface.fold_appends` must know of it (`Append::into_tag`).
    fn vouched(&mut self, seq: usize, append: Append<'py>) -> PyResult<()> {
        let tag = append.into_tag(self.list.py())?;
        self.seqs.push(seq);
        self.tags.push(tag);
        Ok(())
    }

    /// An item for the full checks: an `Event`, or the index of a record left to Python.
    fn other(&mut self, item: impl IntoPyObject<'py>) -> PyResult<()> {
        self.flush()?;
        self.list.append(item)
    }

    fn flush(&mut self) -> PyResult<()> {
        if !self.seqs.is_empty() {
            let py = self.list.py();
            let seqs = PyList::new(py, self.seqs.drain(..))?;
            let tags = PyList::new(py, self.tags.drain(..))?;
            self.list.append((seqs, tags))?;
        }
        Ok(())
    }
}

/// Decode every record into `EventLog` columns: `(types, times, messages, blob, ends, pending)`.
///
/// `types`/`messages` are lists (`None` where the Python decoder must look), `times` and `ends`
/// native-endian `int64`/`uint64` bytes, `blob` a bytearray of a kind byte and a text per event
/// (`Kept`): a plain event's `data`; a vouched message append's `[data, source seqs]` with `null`
/// for its message, or nothing for a user message citing nothing; any other decoded message
/// event's record with `null` where its message was (`without_message`); else the record as it is.
/// `pending` lists, in seq order, each message event as an `Event`, the index of each record
/// left to the Python decoder, and each run of vouched appends as `(seqs, tags)`
/// (`Pending::vouched`; their `Message`s are in `messages`).
///
/// A `Records` whose checksums are left to check is checked record by record on the way (on the
/// thread ahead when there is one): at the first record whose text does not match its checksum,
/// the answer is that record's index instead of the columns.
#[pyfunction]
#[pyo3(signature = (records, event_class, /))]
fn decode_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    event_class: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    // No collection while the log's objects are built: none of them can be part of a cycle.
    let _no_collections = GcPause::new(py);
    // Every record's text first (borrowed, not copied), so that the blob is the bytearray itself,
    // allocated once at its size: a log's records are most of its memory, and a second copy of
    // them costs a page fault per 4 KiB.
    let block = records.cast::<Records>().ok().map(|block| block.get());
    let items: Vec<Bound<'py, PyAny>> = match block {
        Some(_) => Vec::new(),
        None => records.try_iter()?.collect::<PyResult<_>>()?,
    };
    let mut texts: Vec<[&[u8]; 2]> = Vec::with_capacity(block.map_or(items.len(), |block| block.len()));
    if let Some(block) = block {
        texts = block.texts(py);
    } else {
        for item in &items {
            let text = match item.cast::<PyBytes>() {
                Ok(bytes) => bytes.as_bytes(),
                Err(_) => item.cast::<PyString>()?.to_str()?.as_bytes(),
            };
            texts.push([text, b""]);
        }
    }
    let count = texts.len();
    // Gathered in vectors and made lists once, at their final size: no list regrown per record.
    let mut types: Vec<Bound<'py, PyAny>> = Vec::with_capacity(count);
    let mut messages: Vec<Bound<'py, PyAny>> = Vec::with_capacity(count);
    let mut pending = Pending { list: PyList::empty(py), seqs: Vec::new(), tags: Vec::new() };
    let mut times: Vec<i64> = Vec::with_capacity(count);
    let mut ends: Vec<u64> = Vec::with_capacity(count);
    let mut type_names: Vec<(Vec<u8>, Bound<'py, PyString>)> = Vec::new();
    let mut joined = Vec::new();
    let tuple_new = py.get_type::<PyTuple>().getattr("__new__")?;
    let none = py.None().into_bound(py);

    // At most a kind byte and the record's text per event: what is kept of each (`Kept`) is less.
    let mut blob = Blob::new(py, texts.iter().map(|[body, tail]| 1 + body.len() + tail.len()).sum())?;
    // The records are sorted ahead on a second thread (`sort_ahead.rs`) while this one builds.
    let unchecked = block.map_or(&[][..], |block| block.unchecked_checksums());
    let decoded = with_sorted_records(&texts, unchecked, |sorted| -> PyResult<Result<(), usize>> {
        for (seq, [body, tail]) in texts.iter().enumerate() {
            let mut intern = |name: &[u8]| {
                if let Some((_, value)) = type_names.iter().find(|(known, _)| known == name) {
                    return value.clone();
                }
                // SAFETY: `sort` checked the record is UTF-8 and the span lies between ASCII quotes.
                let value = PyString::intern(py, unsafe { std::str::from_utf8_unchecked(name) });
                type_names.push((name.to_vec(), value.clone()));
                value
            };
            // The verdict: sorted ahead, or here, on the record's text (borrowed where it lies in
            // one piece, else joined in `joined`): only what is kept is written to the blob.
            let mut text: &[u8] = &[];
            let (verdict, tape) = match sorted.verdict_ahead(seq) {
                Some(Some(plain @ Sorted::Plain(..))) => (plain, None),
                _ => {
                    text = if tail.is_empty() {
                        body
                    } else {
                        joined.clear();
                        joined.extend_from_slice(body);
                        joined.extend_from_slice(tail);
                        &joined
                    };
                    let Some(sorted) = sorted.next(text, seq) else { return Ok(Err(seq)) };
                    sorted
                }
            };
            if let Sorted::Plain(name, time, data) = verdict {
                // A plain record keeps only its data, copied from the record where it lies (its
                // type and data lie before the record's closing brace, so within `body`): a record
                // sorted ahead, two thirds of a log's records, is never copied whole.
                debug_assert!(name.1 <= body.len() && data.1 <= body.len());
                types.push(intern(&body[name.0..name.1]).into_any());
                times.push(time);
                messages.push(none.clone());
                blob.extend(KIND_DATA, &[&body[data.0..data.1]])?;
                ends.push(blob.len() as u64);
                continue;
            }
            // A message event read in one pass, or a record left to the Python decoder.
            let read = match verdict {
                Sorted::Message(span) => {
                    let event_type = intern(&text[span.0..span.1]);
                    // SAFETY: `sort` checked the record is UTF-8.
                    let text = unsafe { std::str::from_utf8_unchecked(text) };
                    message_event(py, text, tape, seq, &event_type, event_class, &tuple_new).map(|read| (read, event_type))
                }
                _ => None,
            };
            let kept = match read {
                Some((read, event_type)) => {
                    types.push(event_type.into_any());
                    times.push(read.time);
                    messages.push(read.message);
                    match read.decoded {
                        Decoded::Vouched(append) => pending.vouched(seq, append)?,
                        Decoded::Event(event) => pending.other(event)?,
                    }
                    read.kept
                }
                None => {
                    types.push(none.clone());
                    times.push(0);
                    messages.push(none.clone());
                    pending.other(seq)?;
                    Kept::Record
                }
            };
            let (kind, parts) = kept.parts(text);
            blob.extend(kind, &parts)?;
            ends.push(blob.len() as u64);
        }
        Ok(Ok(()))
    })?;
    if let Err(damaged) = decoded {
        return Ok(damaged.into_pyobject(py)?.into_any());
    }
    if let Some(block) = block {
        block.mark_checked();
    }
    pending.flush()?;
    Ok(decoded_columns(types, &times, messages, blob, &ends, pending.list)?.into_any())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::event_columns::{KIND_MESSAGE, KIND_USER};

    fn written(kept: Kept, record: &[u8]) -> (u8, Vec<u8>) {
        let (kind, parts) = kept.parts(record);
        let written = parts.concat();
        assert!(written.len() <= record.len());
        (kind, written)
    }

    #[test]
    fn a_message_is_cut_to_null_and_the_rest_kept() {
        let text = br#"{"data":{"turn":1,"message":{"id":"x"},"usage":{}}}"#;
        let start = text.windows(3).position(|window| window == b"{\"i").unwrap();
        let stop = start + br#"{"id":"x"}"#.len();
        let cut = written(Kept::RecordWithoutMessage((start, stop)), text);
        assert_eq!(cut, (KIND_MESSAGE_RECORD, br#"{"data":{"turn":1,"message":null,"usage":{}}}"#.to_vec()));
        assert_eq!(written(Kept::RecordWithoutMessage((1, 3)), b"[{}]"), (KIND_MESSAGE_RECORD, b"[{}]".to_vec()));
        assert_eq!(written(Kept::Record, text), (KIND_RECORD, text.to_vec()));
        assert_eq!(written(Kept::Append(KeptAppend::UserMessage), text), (KIND_USER, Vec::new()));
    }

    #[test]
    fn an_envelope_keeps_its_data_with_null_for_the_message_and_its_seqs() {
        let text = br#"{"seq":3,"data":{"turn":1,"message":{"id":"x"}},"source_event_seqs":[1,2]}"#;
        let find = |needle: &[u8]| text.windows(needle.len()).position(|window| window == needle).unwrap();
        let data = (find(b"{\"turn"), find(b",\"source"));
        let message = (find(b"{\"id"), find(b"}},") + 1);
        let seqs = (find(b"[1"), text.len() - 1);
        let kept = written(Kept::Append(KeptAppend::Envelope { data, message, seqs }), text);
        assert_eq!(kept, (KIND_MESSAGE, br#"[{"turn":1,"message":null},[1,2]]"#.to_vec()));
    }
}
