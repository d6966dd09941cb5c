//! A message event's record read from its tape (`json/read/tape.rs`), which the second thread of
//! `decode_records` made (`sort_ahead.rs`): the same `MessageRecord` as `read_message_record`
//! reads from the text, field for field, with only the objects left to make on the GIL thread.
//!
//! Each step mirrors one of `message_record.rs`: the envelope's slots, the data (a user/message's
//! message, else an object holding it under `message`), the message's four fields checked by
//! `message_from_fields`. Where that reading answers `None`, so does this one; the caller then
//! reads the text the usual way, so a record this reading does not take still gets the answer,
//! or names the error, exactly as before.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::json::read::fields::Fields;
use crate::json::read::keys::KEY_CACHE;
use crate::json::read::tape::{Tape, TapeBuffers, TapeReader, Token};
use crate::log::message_record::{envelope_slot, read_message_record, Envelope, MessageData, MessageRecord, DATA, ENVELOPE, SEQ, SOURCE_SEQS, SURFACE_OP, TIME, TYPE};
use crate::json::read::recent::RECENT_SOURCES;
use crate::message::creation::{message_from_fields, FIELDS, SOURCE};
use crate::value::message::Message;

/// The record `text` of event `seq` (a message event of type `event_type`) from its `tape`;
/// `None` where `read_message_record` would answer `None`.
pub(crate) fn read_message_tape<'py>(py: Python<'py>, text: &str, tape: Tape<'_>, seq: usize, event_type: &str) -> Option<MessageRecord<'py>> {
    // As `parse::run`: without the key cache when another parse holds it.
    let mut guard = KEY_CACHE.try_lock().ok();
    let keys = guard.as_deref_mut().map(|slots| slots.get_or_insert_with(crate::json::read::keys::KeySlots::new));
    TapeReader::new(py, text, tape, keys).message_record(seq, event_type)
}

fn span(start: u32, end: u32) -> (usize, usize) {
    (start as usize, end as usize)
}

impl<'py> TapeReader<'_, 'py> {
    /// The record at the top level (`Parser::message_record`).
    fn message_record(&mut self, seq: usize, event_type: &str) -> Option<MessageRecord<'py>> {
        let Token::Object { len, .. } = self.next() else { return None };
        if len == 0 {
            return None;
        }
        let mut seen = [false; ENVELOPE.len()];
        let (mut time, mut read, mut surface_op, mut source_seqs) = (None, None, None, None);
        let (mut data_span, mut source_seqs_span) = ((0, 0), (0, 0));
        for _ in 0..len {
            let Token::Key { start, end } = self.next() else { return None };
            let slot = envelope_slot(self.text_of(Token::Key { start, end }).as_bytes());
            if let Some(slot) = slot {
                if std::mem::replace(&mut seen[slot], true) {
                    return None;
                }
            }
            let value = self.next();
            let good = match (slot, value) {
                (Some(DATA), Token::Object { start, end, len }) => {
                    read = self.message_data(event_type == "user/message", (start, end), len);
                    data_span = span(start, end);
                    read.is_some()
                }
                (Some(SEQ), Token::Int(value)) => value == seq as i64,
                (Some(TIME), Token::Int(value)) => {
                    time = Some(value);
                    true
                }
                (Some(TYPE), Token::Str { .. }) => self.text_of(value) == event_type,
                (Some(SURFACE_OP), Token::Str { .. }) if self.text_of(value) == "append" => {
                    surface_op = Some(intern!(self.py, "append").clone().into_any());
                    true
                }
                (Some(SURFACE_OP), _) => {
                    surface_op = Some(self.value_of(value).0);
                    true
                }
                (Some(SOURCE_SEQS), Token::Array { start, end, .. }) => {
                    source_seqs = self.value_of(value).0.cast_into_exact::<PyTuple>().ok();
                    source_seqs_span = span(start, end);
                    source_seqs.is_some()
                }
                (None, _) => {
                    self.skip(value); // a key no event reads
                    true
                }
                _ => false,
            };
            if !good {
                return None;
            }
        }
        let (true, true) = (seen[SEQ], seen[TYPE]) else { return None };
        let (time, (message, message_span, envelope), surface_op, source_seqs) = (time?, read?, surface_op?, source_seqs?);
        Some(MessageRecord { time, message, message_span, envelope, data_span, surface_op, source_seqs, source_seqs_span })
    }

    /// The record's data, an object of `len` members at `data` (`Parser::message_data`).
    fn message_data(&mut self, user: bool, data: (u32, u32), len: u32) -> Option<MessageData<'py>> {
        if user {
            return self.message(len).map(|message| (message, span(data.0, data.1), None));
        }
        if len == 0 {
            return None;
        }
        let mut fields = Vec::with_capacity(4);
        let mut message = None;
        for _ in 0..len {
            let key = self.next();
            let Token::Key { start, end } = key else { return None };
            let is_message = self.text_of(key) == "message";
            match self.next() {
                // The tokenizer refused repeated keys: this is the only `message`.
                Token::Object { start, end, len } if is_message => {
                    message = Some((self.message(len)?, span(start, end), fields.len()));
                }
                _ if is_message => return None,
                value => fields.push((span(start, end), self.value_of(value).0)),
            }
        }
        let (message, message_span, message_at) = message?;
        Some((message, message_span, Some(Envelope { fields, message_at })))
    }

    /// The message, an object of `len` members (`Parser::message`): `None` for a key that is
    /// not one of a message's four (which `message_from_fields` refuses) or a broken rule.
    fn message(&mut self, len: u32) -> Option<Bound<'py, Message>> {
        let mut fields = Fields { values: std::array::from_fn(|_| None), unknown: None };
        let mut recent = RECENT_SOURCES.try_lock().ok();
        for _ in 0..len {
            let Token::Key { start, end } = self.next() else { return None };
            let name = self.text_of(Token::Key { start, end });
            let slot = FIELDS.iter().position(|field| *field == name)?;
            fields.values[slot] = Some(match recent.as_deref_mut() {
                Some(objects) if slot == SOURCE => self.recent_value(objects),
                _ => self.value(),
            });
        }
        message_from_fields(self.py, fields).ok()
    }
}

/// What a reading of a record gives, as a tuple the tests compare: time, message, its span, the
/// data's span, surface_op, source seqs and their span, the data's other fields (key, value) and
/// the message's place among them, whether the envelope passes, and the event's data.
fn record_summary<'py>(py: Python<'py>, text: &str, record: Option<MessageRecord<'py>>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(record) = record else { return Ok(None) };
    let envelope = match &record.envelope {
        None => py.None().into_bound(py),
        Some(envelope) => {
            let fields: Vec<(&str, Bound<'py, PyAny>)> = envelope.fields.iter().map(|(key, value)| (&text[key.0..key.1], value.clone())).collect();
            (fields, envelope.message_at).into_pyobject(py)?.into_any()
        }
    };
    let passes = record.envelope_passes(text);
    let data = record.data(text)?;
    let items = (record.time, record.message, record.message_span, record.data_span, record.surface_op, record.source_seqs, record.source_seqs_span);
    Ok(Some((items, envelope, passes, data).into_pyobject(py)?))
}

/// For the tests: record `text` of event `seq` read from its text (`read_message_record`) and
/// from its tape (`read_message_tape`), each summed up as a tuple or `None`, and whether the
/// tokenizer made a tape at all.
#[pyfunction]
#[pyo3(signature = (text, seq, event_type, /))]
fn _read_message_record_both_ways<'py>(
    py: Python<'py>,
    text: &str,
    seq: usize,
    event_type: &str,
) -> PyResult<(Option<Bound<'py, PyTuple>>, Option<Bound<'py, PyTuple>>, bool)> {
    let mut buffers = TapeBuffers::default();
    let taped = buffers.tokenize(text);
    let from_tape = taped.clone().and_then(|range| read_message_tape(py, text, buffers.tape(range), seq, event_type));
    let from_text = read_message_record(py, text, seq, event_type);
    Ok((record_summary(py, text, from_text)?, record_summary(py, text, from_tape)?, taped.is_some()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_read_message_record_both_ways, m)?)
}
