//! A stored message event's record (`user/message`, `assistant/message`, `tool/result`) read in
//! one pass, for `decode_records` (`records.rs`).
//!
//! The parser reads the record's envelope (`seq`, `time`, `type`, `data`, `surface_op`,
//! `source_event_seqs`) field by field without building it, and the message (the data of a
//! user/message, else `data.message`) straight into a `Message` (`Parser::object_fields`, then
//! the checks of `creation::message_from_fields`); the other data fields (`turn`, `step`,
//! `usage` ...) are parsed as `parse` parses them and kept aside. Every value is parsed at the
//! depth it has in the record, so the text is accepted exactly when `parse` accepts it.
//!
//! It answers only when sure, like the rest of the native decoding: a record this reading does
//! not take as it is (a repeated or escaped key, a missing or ill-typed field, a message that
//! breaks a rule, bad JSON ...) is `None`, and the Python decoder then decodes it and names
//! what is wrong. A key no event reads is parsed and dropped, as the Python decoder drops it.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::json::read::parse::{integer_value, run, Parsed, Parser, Span, Value};
use crate::json::scan::digit_run_len;
use crate::log::event_columns::{KIND_MESSAGE, KIND_USER};
use crate::log::message_vouch::envelope_field_passes;
use crate::json::read::recent::RECENT_SOURCES;
use crate::message::creation::{message_from_fields, FIELDS, SOURCE};
use crate::value::freeze::freeze_at;
use crate::value::message::Message;

/// The record's keys an event reads, in the order of the slots of `Parser::message_record`.
pub(crate) const ENVELOPE: [&str; 6] = ["seq", "time", "type", "data", "surface_op", "source_event_seqs"];
pub(crate) const SEQ: usize = 0;
pub(crate) const TIME: usize = 1;
pub(crate) const TYPE: usize = 2;
pub(crate) const DATA: usize = 3;
pub(crate) const SURFACE_OP: usize = 4;
pub(crate) const SOURCE_SEQS: usize = 5;

/// The slot of `ENVELOPE` a key names (a `match`: compared by length and a load or two, not
/// by a `memcmp` call per name).
pub(crate) fn envelope_slot(key: &[u8]) -> Option<usize> {
    let slot = match key {
        b"seq" => SEQ,
        b"time" => TIME,
        b"type" => TYPE,
        b"data" => DATA,
        b"surface_op" => SURFACE_OP,
        b"source_event_seqs" => SOURCE_SEQS,
        _ => return None,
    };
    debug_assert_eq!(ENVELOPE[slot].as_bytes(), key);
    Some(slot)
}

/// The data of an assistant/message or tool/result beside its message.
pub(crate) struct Envelope<'py> {
    /// The other fields, in order: each key's span in the record's text and its frozen value.
    pub(crate) fields: Vec<((usize, usize), Bound<'py, PyAny>)>,
    /// How many of `fields` come before `message` in the data.
    pub(crate) message_at: usize,
}

/// A record's data as `Parser::message_data` reads it: the message, its span, the rest of the data.
pub(crate) type MessageData<'py> = (Bound<'py, Message>, (usize, usize), Option<Envelope<'py>>);

/// A message event's record, read by `read_message_record`.
pub(crate) struct MessageRecord<'py> {
    /// `time`, an integer literal.
    pub(crate) time: i64,
    pub(crate) message: Bound<'py, Message>,
    /// Where the message's object lies in the record's text (its `{` to after its `}`).
    pub(crate) message_span: (usize, usize),
    /// `None` for a user/message, whose data is its message.
    pub(crate) envelope: Option<Envelope<'py>>,
    /// Where the data's object lies in the record's text (the message's span for a user/message).
    pub(crate) data_span: (usize, usize),
    pub(crate) surface_op: Bound<'py, PyAny>,
    pub(crate) source_seqs: Bound<'py, PyTuple>,
    /// Where `source_event_seqs`' array lies in the record's text.
    pub(crate) source_seqs_span: (usize, usize),
}

impl<'py> MessageRecord<'py> {
    /// `events._check_envelope` passes on the event's data (`text`: the record it was read from).
    pub(crate) fn envelope_passes(&self, text: &str) -> bool {
        let py = self.message.py();
        self.envelope.as_ref().is_none_or(|envelope| {
            envelope.fields.iter().all(|(key, value)| envelope_field_passes(py, &text[key.0..key.1], value))
        })
    }

    /// The event's data as the Python decoder builds it: the `Message` of a user/message, else
    /// the data with its message in place (`data | {"message": message}`, the same `FrozenDict`).
    pub(crate) fn data(&self, text: &str) -> PyResult<Bound<'py, PyAny>> {
        let py = self.message.py();
        let Some(envelope) = &self.envelope else { return Ok(self.message.clone().into_any()) };
        let data = PyDict::new(py);
        for (index, (key, value)) in envelope.fields.iter().enumerate() {
            if index == envelope.message_at {
                data.set_item("message", &self.message)?;
            }
            data.set_item(&text[key.0..key.1], value)?;
        }
        if envelope.message_at == envelope.fields.len() {
            data.set_item("message", &self.message)?;
        }
        freeze_at(data.as_any(), "FrozenDict")
    }
}

/// How `EventLog`'s compact form keeps a message append vouched for natively (`log/records.rs`,
/// `original/columns.rs`; `event_columns.rs` names the forms): `U` alone for a user/message citing
/// nothing, whose data is its message; else `M` and `[data, source seqs]` with `null` for the
/// message (the event keeps its `Message` as the object), from spans of the record's text.
#[derive(Clone, Copy)]
pub(crate) enum KeptAppend {
    UserMessage,
    Envelope { data: (usize, usize), message: (usize, usize), seqs: (usize, usize) },
}

impl KeptAppend {
    /// The form of `record`, a message event of type `event_type`.
    pub(crate) fn of(record: &MessageRecord<'_>, event_type: &str) -> Self {
        if event_type == "user/message" && record.source_seqs.is_empty() {
            return KeptAppend::UserMessage;
        }
        KeptAppend::Envelope { data: record.data_span, message: record.message_span, seqs: record.source_seqs_span }
    }

    /// The kind byte, and the parts of the record's `text` written after it.
    pub(crate) fn parts(self, text: &[u8]) -> (u8, [&[u8]; 7]) {
        match self {
            KeptAppend::UserMessage => (KIND_USER, [&b""[..]; 7]),
            KeptAppend::Envelope { data, message, seqs } => {
                (KIND_MESSAGE, [b"[", &text[data.0..message.0], b"null", &text[message.1..data.1], b",", &text[seqs.0..seqs.1], b"]"])
            }
        }
    }
}

/// The record `text` of event `seq`, which holds a message event of type `event_type`, read in
/// one pass; `None` when anything is off or unusual (the Python decoder then decodes it).
pub(crate) fn read_message_record<'py>(py: Python<'py>, text: &str, seq: usize, event_type: &str) -> Option<MessageRecord<'py>> {
    run(py, text, |parser| parser.message_record(seq, event_type)).ok().flatten()
}

impl<'a, 'py> Parser<'a, 'py> {
    /// The record at the top level. `Ok(None)` stops at the first doubt (the rest unread).
    fn message_record(&mut self, seq: usize, event_type: &str) -> Parsed<Option<MessageRecord<'py>>> {
        self.skip_whitespace();
        if self.peek() != Some(b'{') {
            return Ok(None);
        }
        self.pos += 1;
        let mut seen = [false; ENVELOPE.len()];
        let (mut time, mut read, mut surface_op, mut source_seqs) = (None, None, None, None);
        let (mut data_span, mut source_seqs_span) = ((0, 0), (0, 0));
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            return Ok(None);
        }
        loop {
            let Some((start, end)) = self.plain_key()? else { return Ok(None) };
            self.colon()?;
            let slot = envelope_slot(&self.bytes[start..end]);
            if let Some(slot) = slot {
                if std::mem::replace(&mut seen[slot], true) {
                    return Ok(None); // a repeated key: the Python decoder takes the last
                }
            }
            let good = match slot {
                Some(DATA) => {
                    self.skip_whitespace();
                    let start = self.pos;
                    read = self.message_data(event_type == "user/message")?;
                    data_span = (start, self.pos);
                    read.is_some()
                }
                Some(SEQ) => self.int_literal()? == Some(seq as i64),
                Some(TIME) => {
                    time = self.int_literal()?;
                    time.is_some()
                }
                Some(TYPE) => self.string_literal()?.is_some_and(|(start, end)| &self.bytes[start..end] == event_type.as_bytes()),
                Some(SURFACE_OP) => {
                    surface_op = Some(self.surface_op()?);
                    true
                }
                Some(SOURCE_SEQS) => {
                    self.skip_whitespace();
                    let start = self.pos;
                    let Value(value, _) = self.value(1)?;
                    source_seqs_span = (start, self.pos);
                    source_seqs = value.cast_into_exact::<PyTuple>().ok();
                    source_seqs.is_some()
                }
                _ => {
                    self.value(1)?; // a key no event reads
                    true
                }
            };
            if !good {
                return Ok(None);
            }
            if self.after_member(b'}', "expected `,` or `}`", "EOF while parsing an object")? {
                break;
            }
        }
        let (true, true) = (seen[SEQ], seen[TYPE]) else { return Ok(None) };
        let (Some(time), Some((message, message_span, envelope)), Some(surface_op), Some(source_seqs)) = (time, read, surface_op, source_seqs)
        else {
            return Ok(None);
        };
        Ok(Some(MessageRecord { time, message, message_span, envelope, data_span, surface_op, source_seqs, source_seqs_span }))
    }

    /// The record's data (its value next): the message itself for a user/message, else an
    /// object holding it under `message` beside other fields. With the message, its span.
    fn message_data(&mut self, user: bool) -> Parsed<Option<MessageData<'py>>> {
        self.skip_whitespace();
        if self.peek() != Some(b'{') {
            return Ok(None);
        }
        if user {
            let start = self.pos;
            return Ok(self.message(1)?.map(|message| (message, (start, self.pos), None)));
        }
        self.enter(1)?;
        self.pos += 1;
        let mut fields: Vec<((usize, usize), Bound<'py, PyAny>)> = Vec::with_capacity(4);
        let mut message = None;
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            return Ok(None);
        }
        loop {
            let Some(key) = self.plain_key()? else { return Ok(None) };
            self.colon()?;
            let key_text = &self.bytes[key.0..key.1];
            if key_text == b"message" {
                self.skip_whitespace();
                if message.is_some() || self.peek() != Some(b'{') {
                    return Ok(None);
                }
                let start = self.pos;
                let Some(read) = self.message(2)? else { return Ok(None) };
                message = Some((read, (start, self.pos), fields.len()));
            } else {
                if fields.iter().any(|(seen, _)| &self.bytes[seen.0..seen.1] == key_text) {
                    return Ok(None);
                }
                let Value(value, _) = self.value(2)?;
                fields.push((key, value));
            }
            if self.after_member(b'}', "expected `,` or `}`", "EOF while parsing an object")? {
                break;
            }
        }
        let Some((message, span, message_at)) = message else { return Ok(None) };
        Ok(Some((message, span, Some(Envelope { fields, message_at }))))
    }

    /// The message object whose `{` is next, `depth` containers below the record's root, as a
    /// `Message`; `None` if it breaks a rule of `freeze_message`.
    fn message(&mut self, depth: usize) -> Parsed<Option<Bound<'py, Message>>> {
        let mut recent = RECENT_SOURCES.try_lock().ok();
        let fields = self.object_fields(&FIELDS, depth, recent.as_deref_mut().map(|objects| (SOURCE, objects)))?;
        Ok(message_from_fields(self.py, fields).ok())
    }

    /// The value next, when it is an integer literal that fits in an `i64` (as `parse` reads
    /// one): `None` for any other value, read no further.
    #[inline(always)]
    fn int_literal(&mut self) -> Parsed<Option<i64>> {
        self.skip_whitespace();
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        let digits = &self.bytes[start + negative as usize..];
        let count = digit_run_len(digits);
        let end = start + negative as usize + count;
        let leading_zero = count > 1 && digits[0] == b'0';
        if count == 0 || leading_zero || matches!(self.bytes.get(end), Some(b'.' | b'e' | b'E')) {
            return Ok(None);
        }
        let value = integer_value(&digits[..count], negative);
        if value.is_some() {
            self.pos = end;
        }
        Ok(value)
    }

    /// The span of the string value next, when it is a string without escapes: `None` for any
    /// other value, read no further.
    fn string_literal(&mut self) -> Parsed<Option<(usize, usize)>> {
        self.skip_whitespace();
        if self.peek() != Some(b'"') {
            return Ok(None);
        }
        self.pos += 1;
        Ok(match self.string()? {
            Span::Input(start, end) => Some((start, end)),
            Span::Scratch => None,
        })
    }

    /// `surface_op`'s value, as `parse` reads it; the shared `"append"` for the usual one.
    fn surface_op(&mut self) -> Parsed<Bound<'py, PyAny>> {
        self.skip_whitespace();
        let append = b"\"append\"";
        if self.bytes[self.pos..].starts_with(append) {
            self.pos += append.len();
            return Ok(intern!(self.py, "append").clone().into_any());
        }
        let Value(value, _) = self.value(1)?;
        Ok(value)
    }

    /// An object key's span in the text (the key next), or `None` for a key with an escape.
    #[inline(always)]
    fn plain_key(&mut self) -> Parsed<Option<(usize, usize)>> {
        self.key_start()?;
        Ok(match self.string()? {
            Span::Input(start, end) => Some((start, end)),
            Span::Scratch => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_slots_are_the_envelope_names() {
        for (slot, name) in ENVELOPE.iter().enumerate() {
            assert_eq!(envelope_slot(name.as_bytes()), Some(slot));
        }
        for other in [&b""[..], b"se", b"seqs", b"Seq", b"message", b"source_event_seq", b"crc"] {
            assert_eq!(envelope_slot(other), None);
        }
    }
}
