//! Native decoding of a stored session log: one call per log instead of a Python loop per record.
//!
//! `split_records` cuts the event lines of a JSON Lines log (format 2: each line is its record
//! with the 18-byte checksum suffix `,"crc":"%08x"}` in place of the closing brace) and checks
//! every line's CRC-32C, keeping only spans into the file's bytes (`Records`). `decode_records`
//! turns records (a `Records`, or any sequence of `bytes`/`str` records, e.g. SQLite rows) into
//! the compact columns of `dshkit.session.event_log.EventLog`, and sorts them three ways:
//!
//! - plain: a record of a known type without a message (`turn/start`, `assistant/chunk`, ...)
//!   whose text a strict validating scan proves to parse and whose fields pass the append
//!   rules of its type. It is kept as its text only: no Python object is built for it, and
//!   folding it would change nothing.
//! - message: a `user/message`, `assistant/message` or `tool/result` record, parsed with the
//!   frozen-value parser and its `Message` rebuilt here; returned as an `Event` for the caller
//!   to hold to the surface rules.
//! - anything else (an unknown type, a `request/header`, a float with an exponent, a `\u`
//!   escape in a key, a malformed record ...): left to the Python decoder by its index. The scan
//!   is deliberately narrower than the parser, so "plain" never vouches for a record the
//!   parser or the rules would refuse; everything it does not vouch for takes the full path.

use pyo3::exceptions::PyIndexError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::checksum::crc32c_of_parts;
use crate::frozendict::FrozenDict;
use crate::json::plain_run_len;
use crate::json_parse::parse;
use crate::message::freeze_message;

/// `,"crc":"` + 8 hex digits + `"}`.
const SUFFIX_LENGTH: usize = 18;
/// Deeper records take the full path (the parser's own limit is higher).
const MAX_SCAN_DEPTH: usize = 64;
/// Objects with more members than this take the full path (keeps duplicate detection cheap).
const MAX_MEMBERS: usize = 32;
/// Kind bytes of `EventLog`'s compact form: a plain record, a message event's record.
const KIND_RECORD: u8 = b'R';
const KIND_MESSAGE_RECORD: u8 = b'S';

/// The line suffix that seals a record with checksum `crc`.
fn sealing_suffix(crc: u32) -> [u8; SUFFIX_LENGTH] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut suffix = *b",\"crc\":\"00000000\"}";
    for i in 0..8 {
        suffix[8 + i] = HEX[((crc >> (28 - 4 * i)) & 0xf) as usize];
    }
    suffix
}

/// The record a sealed line holds (its text without the suffix, then `}`), or `None` if the
/// line's checksum does not match (as `dshkit.session.records.unseal_line`).
fn unseal(line: &[u8]) -> Option<&[u8]> {
    if line.len() <= SUFFIX_LENGTH {
        return None;
    }
    let (body, suffix) = line.split_at(line.len() - SUFFIX_LENGTH);
    (suffix == sealing_suffix(crc32c_of_parts(&[body, b"}"]))).then_some(body)
}

/// Offset of the first `\n` in `data`, 8 bytes at a time.
fn find_newline(data: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = data.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let value = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ (ONES * b'\n' as u64);
        if value.wrapping_sub(ONES) & !value & HIGHS != 0 {
            break;
        }
        offset += 8;
    }
    data[offset..].iter().position(|&b| b == b'\n').map(|i| offset + i)
}

/// The event records of a JSON Lines log, as spans of the file's bytes.
#[pyclass(frozen, sequence, module = "dshkit._core", name = "Records")]
pub(crate) struct Records {
    content: Py<PyBytes>,
    /// Each record's text: `content[start..end]`, followed by `}` when `sealed`.
    spans: Vec<(usize, usize)>,
    sealed: bool,
}

impl Records {
    fn parts<'a>(&self, content: &'a [u8], index: usize) -> [&'a [u8]; 2] {
        let (start, end) = self.spans[index];
        [&content[start..end], if self.sealed { b"}" } else { b"" }]
    }
}

#[pymethods]
impl Records {
    fn __len__(&self) -> usize {
        self.spans.len()
    }

    /// The text of record `index` (without a checksum suffix), as `bytes`.
    fn __getitem__<'py>(&self, py: Python<'py>, index: isize) -> PyResult<Bound<'py, PyBytes>> {
        let position = if index < 0 { index + self.spans.len() as isize } else { index };
        if position < 0 || position as usize >= self.spans.len() {
            return Err(PyIndexError::new_err("record index out of range"));
        }
        let [body, tail] = self.parts(self.content.bind(py).as_bytes(), position as usize);
        Ok(PyBytes::new(py, &[body, tail].concat()))
    }
}

/// The lines in `content[start..end]` (each ending with `\n`) as records, each checksum checked
/// when `sealed`: `(records, -1)`, or `(None, index)` naming the first line that fails.
#[pyfunction]
#[pyo3(signature = (content, start, end, sealed, /))]
fn split_records<'py>(
    py: Python<'py>,
    content: Bound<'py, PyBytes>,
    start: usize,
    end: usize,
    sealed: bool,
) -> (Option<Records>, isize) {
    let bytes = content.as_bytes();
    let end = end.min(bytes.len());
    let mut spans = Vec::new();
    let mut at = start.min(end);
    let failed = py.detach(|| {
        while at < end {
            let line_end = find_newline(&bytes[at..end]).map_or(end, |i| at + i);
            let line = &bytes[at..line_end];
            if sealed {
                match unseal(line) {
                    Some(body) => spans.push((at, at + body.len())),
                    None => return Some(spans.len()),
                }
            } else {
                spans.push((at, line_end));
            }
            at = line_end + 1;
        }
        None
    });
    match failed {
        Some(index) => (None, index as isize),
        None => (Some(Records { content: content.unbind(), spans, sealed }), -1),
    }
}

/// The record texts of `(text, stored checksum)` rows (a store with a checksum column), each
/// checked: `(texts, -1)`, or `(None, index)` of the first row whose checksum is not an `int`
/// equal to the CRC-32C of its text (`bytes`, or the UTF-8 of a `str`).
#[pyfunction]
#[pyo3(signature = (rows, /))]
fn verified_rows<'py>(py: Python<'py>, rows: &Bound<'py, PyAny>) -> PyResult<(Option<Bound<'py, PyList>>, isize)> {
    let texts = PyList::empty(py);
    for (index, row) in rows.try_iter()?.enumerate() {
        let row = row?;
        let good = (|| {
            let row = row.cast::<PyTuple>().ok().filter(|row| row.len() == 2)?;
            let (text, stored) = (row.get_item(0).ok()?, row.get_item(1).ok()?);
            if unsafe { ffi::PyLong_CheckExact(stored.as_ptr()) } == 0 {
                return None;
            }
            let crc = if let Ok(bytes) = text.cast::<PyBytes>() {
                crc32c_of_parts(&[bytes.as_bytes()])
            } else {
                crc32c_of_parts(&[text.cast::<PyString>().ok()?.to_str().ok()?.as_bytes()])
            };
            (stored.extract::<u32>().ok()? == crc).then_some(text)
        })();
        match good {
            Some(text) => texts.append(text)?,
            None => return Ok((None, index as isize)),
        }
    }
    Ok((Some(texts), -1))
}

// ---------------------------------------------------------------------------------------------
// The validating scan

/// What a scanned value is (spans are byte ranges of the scanned text).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Int(i64),
    /// A string's text between its quotes (escapes left as written).
    Str,
    Object(usize, usize),
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Member {
    key: (usize, usize),
    value: Kind,
}

/// `Err(())`: not vouched for, take the full path.
type Scan<T> = Result<T, ()>;

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Scan<()> {
        self.skip_whitespace();
        if self.peek() != Some(byte) {
            return Err(());
        }
        self.pos += 1;
        Ok(())
    }

    fn value(&mut self, depth: usize, members: Option<&mut Vec<Member>>) -> Scan<Kind> {
        self.skip_whitespace();
        match self.peek().ok_or(())? {
            b'{' => self.object(depth, members),
            b'[' => self.array(depth),
            b'"' => {
                self.string()?;
                Ok(Kind::Str)
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Scan<Kind> {
        if !self.bytes[self.pos..].starts_with(word) {
            return Err(());
        }
        self.pos += word.len();
        Ok(Kind::Other)
    }

    /// An object; with `members`, its members are collected (keys must hold no escape), and with
    /// `data` too, the members of its member `"data"` if that is an object.
    fn object(&mut self, depth: usize, members: Option<&mut Vec<Member>>) -> Scan<Kind> {
        self.object_with_data(depth, members, None)
    }

    fn object_with_data(
        &mut self,
        depth: usize,
        mut members: Option<&mut Vec<Member>>,
        mut data: Option<&mut Vec<Member>>,
    ) -> Scan<Kind> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        let start = self.pos;
        self.pos += 1; // '{'
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Kind::Object(start, self.pos));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(());
            }
            let (key_start, key_end, escaped) = self.string()?;
            self.expect(b':')?;
            let inner = match data.as_deref_mut() {
                Some(inner) if &self.bytes[key_start..key_end] == b"data" => {
                    if !inner.is_empty() {
                        return Err(()); // "data" twice
                    }
                    Some(inner)
                }
                _ => None,
            };
            let value = self.value(depth + 1, inner)?;
            if let Some(members) = members.as_deref_mut() {
                if escaped || members.len() >= MAX_MEMBERS {
                    return Err(());
                }
                members.push(Member { key: (key_start, key_end), value });
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Kind::Object(start, self.pos));
                }
                _ => return Err(()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Scan<Kind> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        self.pos += 1; // '['
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Kind::Other);
        }
        loop {
            self.value(depth + 1, None)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Kind::Other);
                }
                _ => return Err(()),
            }
        }
    }

    /// A string at its opening quote: (text start, text end, whether it holds an escape).
    fn string(&mut self) -> Scan<(usize, usize, bool)> {
        self.pos += 1; // '"'
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos += plain_run_len(&self.bytes[self.pos..]);
            match self.peek().ok_or(())? {
                b'"' => {
                    self.pos += 1;
                    return Ok((start, self.pos - 1, escaped));
                }
                b'\\' => {
                    escaped = true;
                    match self.bytes.get(self.pos + 1).ok_or(())? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 2,
                        b'u' => {
                            let hex = self.bytes.get(self.pos + 2..self.pos + 6).ok_or(())?;
                            let text = std::str::from_utf8(hex).map_err(|_| ())?;
                            let code = u32::from_str_radix(text, 16).map_err(|_| ())?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) || (0xD800..=0xDFFF).contains(&code) {
                                return Err(()); // surrogates (pairs included) take the full path
                            }
                            self.pos += 6;
                        }
                        _ => return Err(()),
                    }
                }
                _ => return Err(()), // a control character
            }
        }
    }

    /// An integer of at most 18 digits, or a fraction without exponent: always in range.
    fn number(&mut self) -> Scan<Kind> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let start = self.pos;
        match self.peek().ok_or(())? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return Err(()),
        }
        let digits = &self.bytes[start..self.pos];
        if digits.len() > 18 || matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(());
        }
        let mut kind = Kind::Int(0);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let fraction = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if self.pos == fraction || self.pos - fraction > 20 {
                return Err(());
            }
            kind = Kind::Other;
        }
        if let Some(b'e' | b'E') = self.peek() {
            return Err(());
        }
        if kind == Kind::Other {
            return Ok(kind);
        }
        let magnitude = digits.iter().fold(0i64, |value, &digit| value * 10 + (digit - b'0') as i64);
        Ok(Kind::Int(if negative { -magnitude } else { magnitude }))
    }
}

/// The members of the object `text` if the scan vouches for it (a whole value, nothing after).
fn scan_object(text: &[u8]) -> Scan<Vec<Member>> {
    Ok(scan_record(text, false)?.0)
}

/// The members of the object `text` and (with `with_data`) of its member `"data"`, if the scan
/// vouches for it.
fn scan_record(text: &[u8], with_data: bool) -> Scan<(Vec<Member>, Vec<Member>)> {
    let mut scanner = Scanner { bytes: text, pos: 0 };
    let mut members = Vec::with_capacity(8);
    let mut data = Vec::new();
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    scanner.object_with_data(0, Some(&mut members), if with_data { Some(&mut data) } else { None })?;
    scanner.skip_whitespace();
    if scanner.pos != text.len() {
        return Err(());
    }
    Ok((members, data))
}

/// The type of a record written the way dshkit writes it (`{"seq":N,"time":T,"type":"...",`),
/// if it is that of a message event and `N` is `seq`: such a record goes straight to the parser.
fn message_type(text: &[u8], seq: usize) -> Option<(usize, usize)> {
    let digits = |at: usize| at + text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = text.strip_prefix(b"{\"seq\":")?;
    let mut at = text.len() - rest.len();
    let seq_end = digits(at);
    if std::str::from_utf8(&text[at..seq_end]).ok()?.parse::<usize>().ok()? != seq {
        return None;
    }
    at = seq_end;
    at += text[at..].starts_with(b",\"time\":").then_some(8)?;
    at = digits(at);
    at += text[at..].starts_with(b",\"type\":\"").then_some(9)?;
    let end = at + text[at..].iter().position(|&b| b == b'"')?;
    MESSAGE_TYPES.contains(&&text[at..end]).then_some((at, end))
}

/// The members of an object already scanned (at `start..end` of `text`), collected.
fn members_of(text: &[u8], start: usize, end: usize) -> Scan<Vec<Member>> {
    let members = scan_object(&text[start..end])?;
    Ok(members
        .into_iter()
        .map(|m| Member { key: (m.key.0 + start, m.key.1 + start), value: shift(m.value, start) })
        .collect())
}

fn shift(kind: Kind, by: usize) -> Kind {
    match kind {
        Kind::Object(start, end) => Kind::Object(start + by, end + by),
        other => other,
    }
}

/// The value under `key`; `Err` when the key repeats (the parser keeps the last: take the full path).
fn lookup(text: &[u8], members: &[Member], key: &[u8]) -> Scan<Option<Kind>> {
    let mut found = None;
    for member in members {
        if &text[member.key.0..member.key.1] == key {
            if found.is_some() {
                return Err(());
            }
            found = Some(member.value);
        }
    }
    Ok(found)
}

fn has_int(text: &[u8], members: &[Member], key: &[u8]) -> Scan<bool> {
    Ok(matches!(lookup(text, members, key)?, Some(Kind::Int(_))))
}

fn has_str(text: &[u8], members: &[Member], key: &[u8]) -> Scan<bool> {
    Ok(lookup(text, members, key)? == Some(Kind::Str))
}

/// Whether the data of a plain event of type `event_type` passes the append rules of its type
/// (`dshkit.session.events.check_plain_data`); `Err` for a type this scan does not vouch for.
fn plain_data_passes(event_type: &[u8], text: &[u8], data: &[Member]) -> Scan<bool> {
    let turn = || has_int(text, data, b"turn");
    let step = || Ok::<_, ()>(turn()? && has_int(text, data, b"step")?);
    match event_type {
        b"turn/start" => turn(),
        b"step/start" | b"step/end" | b"assistant/chunk" => step(),
        b"tool/call" => Ok(step()?
            && has_str(text, data, b"call_id")?
            && has_str(text, data, b"name")?
            && has_str(text, data, b"arguments")?),
        b"turn/end" => {
            let Some(Kind::Object(start, end)) = lookup(text, data, b"reason")? else { return Ok(false) };
            Ok(turn()? && has_str(text, &members_of(text, start, end)?, b"kind")?)
        }
        b"compaction/start" | b"compaction/summary" | b"compaction/prune" | b"compaction/end" => Ok(true),
        _ => Err(()),
    }
}

const MESSAGE_TYPES: [&[u8]; 3] = [b"user/message", b"assistant/message", b"tool/result"];

enum Sorted {
    /// A plain event: its type (a span of the text) and time.
    Plain((usize, usize), i64),
    /// A message event: its type's span.
    Message((usize, usize)),
    Other,
}

fn sort(text: &[u8], seq: usize) -> Sorted {
    let sorted = || -> Scan<Sorted> {
        std::str::from_utf8(text).map_err(|_| ())?;
        if let Some(span) = message_type(text, seq) {
            return Ok(Sorted::Message(span));
        }
        let (top, data) = scan_record(text, true)?;
        let event_type = match lookup(text, &top, b"type")? {
            Some(Kind::Str) => {
                let member = top.iter().find(|m| &text[m.key.0..m.key.1] == b"type").expect("found above");
                // The value's span: after the key's closing quote, the colon, the opening quote.
                let (start, end) = value_span(text, member.key.1)?;
                (start, end)
            }
            _ => return Err(()),
        };
        let type_text = &text[event_type.0..event_type.1];
        if type_text.contains(&b'\\') {
            return Err(());
        }
        if MESSAGE_TYPES.contains(&type_text) {
            return Ok(Sorted::Message(event_type));
        }
        if top.len() != 4 || lookup(text, &top, b"seq")? != Some(Kind::Int(seq as i64)) {
            return Err(());
        }
        let Some(Kind::Int(time)) = lookup(text, &top, b"time")? else { return Err(()) };
        let Some(Kind::Object(..)) = lookup(text, &top, b"data")? else { return Err(()) };
        if !plain_data_passes(type_text, text, &data)? {
            return Err(());
        }
        Ok(Sorted::Plain(event_type, time))
    };
    sorted().unwrap_or(Sorted::Other)
}

/// The span of the string value following a key whose closing quote ends at `key_end`.
fn value_span(text: &[u8], key_end: usize) -> Scan<(usize, usize)> {
    let mut scanner = Scanner { bytes: text, pos: key_end + 1 };
    scanner.expect(b':')?;
    scanner.skip_whitespace();
    let (start, end, _) = scanner.string()?;
    Ok((start, end))
}

// ---------------------------------------------------------------------------------------------
// Decoding into columns

/// A message event rebuilt as `event_class` (the `Event` named tuple), or `None` when anything
/// is off (the Python decoder then names what).
fn message_event<'py>(
    py: Python<'py>,
    text: &str,
    seq: usize,
    event_type: &Bound<'py, PyString>,
    event_class: &Bound<'py, PyAny>,
    tuple_new: &Bound<'py, PyAny>,
) -> Option<(Bound<'py, PyAny>, i64, Bound<'py, PyAny>)> {
    let record = parse(py, text).ok()?;
    let record = record.cast::<FrozenDict>().ok()?.get();
    let field = |key: &str| record.get_str(py, key);
    let exact_int = |value: &Bound<'py, PyAny>| unsafe { ffi::PyLong_CheckExact(value.as_ptr()) } != 0;
    let seq_value = field("seq")?;
    if !exact_int(&seq_value) || seq_value.extract::<i64>().ok()? != seq as i64 {
        return None;
    }
    let time = field("time")?;
    if !exact_int(&time) {
        return None;
    }
    let data = field("data")?;
    let (message, data) = if event_type.to_str().ok()? == "user/message" {
        let message = freeze_message(&data).ok()?.into_any();
        (message.clone(), message)
    } else {
        let envelope = data.cast::<FrozenDict>().ok()?;
        let message = freeze_message(&envelope.get().get_str(py, "message")?).ok()?.into_any();
        let replacement = PyDict::new(py);
        replacement.set_item("message", &message).ok()?;
        (message, envelope.call_method1("__or__", (replacement,)).ok()?)
    };
    let surface_op = field("surface_op")?;
    let source_seqs = field("source_event_seqs")?;
    if !source_seqs.is_exact_instance_of::<PyTuple>() {
        return None;
    }
    let fields = PyTuple::new(py, [event_type.as_any(), &seq_value, &time, &data, &surface_op, &source_seqs]).ok()?;
    let event = tuple_new.call1((event_class, fields)).ok()?;
    Some((event, time.extract().ok()?, message))
}

/// Decode every record into `EventLog` columns: `(types, times, messages, blob, ends, pending)`.
///
/// `types`/`messages` are lists (`None` where the Python decoder must look), `times` and `ends`
/// native-endian `int64`/`uint64` bytes, `blob` a bytearray of kind byte + record text per
/// event. `pending` lists, in seq order, each message event as an `Event` and the index of each
/// record left to the Python decoder.
#[pyfunction]
#[pyo3(signature = (records, event_class, /))]
fn decode_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    event_class: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let types = PyList::empty(py);
    let messages = PyList::empty(py);
    let pending = PyList::empty(py);
    let mut times: Vec<i64> = Vec::new();
    let mut ends: Vec<u64> = Vec::new();
    let mut blob: Vec<u8> = Vec::new();
    let mut type_names: Vec<(Vec<u8>, Bound<'py, PyString>)> = Vec::new();
    let tuple_new = py.get_type::<PyTuple>().getattr("__new__")?;
    let none = py.None().into_bound(py);

    let mut add = |seq: usize, parts: [&[u8]; 2]| -> PyResult<()> {
        let kind_at = blob.len();
        blob.push(KIND_RECORD);
        blob.extend_from_slice(parts[0]);
        blob.extend_from_slice(parts[1]);
        let text = &blob[kind_at + 1..];
        let mut intern = |span: (usize, usize)| {
            let name = &text[span.0..span.1];
            if let Some((_, value)) = type_names.iter().find(|(known, _)| known == name) {
                return value.clone();
            }
            // SAFETY: `sort` checked the record is UTF-8 and the span lies between ASCII quotes.
            let value = PyString::intern(py, unsafe { std::str::from_utf8_unchecked(name) });
            type_names.push((name.to_vec(), value.clone()));
            value
        };
        let mut kind = KIND_RECORD;
        match sort(text, seq) {
            Sorted::Plain(span, time) => {
                types.append(intern(span))?;
                times.push(time);
                messages.append(&none)?;
            }
            sorted => {
                let decoded = match sorted {
                    Sorted::Message(span) => {
                        let event_type = intern(span);
                        // SAFETY: `sort` checked the record is UTF-8.
                        let text = unsafe { std::str::from_utf8_unchecked(text) };
                        message_event(py, text, seq, &event_type, event_class, &tuple_new)
                            .map(|(event, time, message)| (event, time, message, event_type))
                    }
                    _ => None,
                };
                match decoded {
                    Some((event, time, message, event_type)) => {
                        types.append(event_type)?;
                        times.push(time);
                        messages.append(message)?;
                        pending.append(event)?;
                        kind = KIND_MESSAGE_RECORD;
                    }
                    None => {
                        types.append(&none)?;
                        times.push(0);
                        messages.append(&none)?;
                        pending.append(seq)?;
                    }
                }
            }
        }
        blob[kind_at] = kind;
        ends.push(blob.len() as u64);
        Ok(())
    };

    if let Ok(block) = records.cast::<Records>() {
        let block = block.get();
        let content = block.content.bind(py).as_bytes();
        for seq in 0..block.spans.len() {
            add(seq, block.parts(content, seq))?;
        }
    } else {
        for (seq, item) in records.try_iter()?.enumerate() {
            let item = item?;
            if let Ok(bytes) = item.cast::<PyBytes>() {
                add(seq, [bytes.as_bytes(), b""])?;
            } else {
                let text = item.cast::<PyString>()?.to_str()?;
                add(seq, [text.as_bytes(), b""])?;
            }
        }
    }
    let as_bytes = |words: Vec<u8>| PyBytes::new(py, &words);
    let times_bytes = as_bytes(times.iter().flat_map(|t| t.to_ne_bytes()).collect());
    let ends_bytes = as_bytes(ends.iter().flat_map(|e| e.to_ne_bytes()).collect());
    let blob = PyByteArray::new(py, &blob);
    PyTuple::new(py, [types.into_any(), times_bytes.into_any(), messages.into_any(), blob.into_any(), ends_bytes.into_any(), pending.into_any()])
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Records>()?;
    m.add_function(wrap_pyfunction!(split_records, m)?)?;
    m.add_function(wrap_pyfunction!(verified_rows, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(text: &str, seq: usize) -> Option<i64> {
        match sort(text.as_bytes(), seq) {
            Sorted::Plain(_, time) => Some(time),
            _ => None,
        }
    }

    #[test]
    fn the_suffix_matches_the_python_format() {
        let record = br#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}"#;
        let line = [&record[..record.len() - 1], &sealing_suffix(crc32c_of_parts(&[record]))[..]].concat();
        assert_eq!(unseal(&line), Some(&record[..record.len() - 1]));
        assert!(line.ends_with(format!(",\"crc\":\"{:08x}\"}}", crc32c_of_parts(&[record])).as_bytes()));
        let mut flipped = line.clone();
        flipped[10] ^= 1;
        assert_eq!(unseal(&flipped), None);
        assert_eq!(unseal(b"{}"), None);
    }

    #[test]
    fn newlines_are_found_at_every_offset() {
        for length in 0..40 {
            for at in 0..length {
                let mut data = vec![b'x'; length];
                data[at] = b'\n';
                assert_eq!(find_newline(&data), Some(at));
            }
            assert_eq!(find_newline(&vec![b'x'; length]), None);
        }
    }

    #[test]
    fn plain_events_are_vouched_for_only_when_every_rule_holds() {
        let chunk = r#"{"seq":3,"time":17,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"text":"a\"b\u00e9","n":[1.5,-0,null,true]}}}"#;
        assert_eq!(plain(chunk, 3), Some(17));
        assert_eq!(plain(chunk, 4), None, "seq must be the index");
        for bad in [
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":"1"}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"turn":"x"}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1},"surface_op":"append"}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1.0}}"#,
            r#"{"seq":0,"time":1.5,"type":"turn/start","data":{"turn":1}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}} x"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1e3}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":"\ud800"}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":"a	b"}}"#,
            r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":01}}"#,
            r#"{"seq":0,"time":1,"type":"turn/end","data":{"turn":1,"reason":{"kind":1}}}"#,
            r#"{"seq":0,"time":1,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c","name":"n"}}"#,
            r#"{"seq":0,"time":1,"type":"plugin/thing","data":{"ignorable":true}}"#,
            r#"{"seq":0,"time":1,"type":"request/header","data":{}}"#,
            r#"{"seq":0,"time":1,"type":"turn\/start","data":{"turn":1}}"#,
            r#"{"seq":0,"time":12345678901234567890,"type":"turn/start","data":{"turn":1}}"#,
        ] {
            assert_eq!(plain(bad, 0), None, "{bad}");
        }
        let end = r#"{"seq":0,"time":1,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#;
        assert_eq!(plain(end, 0), Some(1));
        let call = r#"{"seq":0,"time":-2,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c","name":"n","arguments":"{}"}}"#;
        assert_eq!(plain(call, 0), Some(-2));
        let deep = format!(r#"{{"seq":0,"time":1,"type":"compaction/end","data":{{"x":{}1{}}}}}"#, "[".repeat(70), "]".repeat(70));
        assert_eq!(plain(&deep, 0), None);
        assert!(matches!(sort(br#"{"seq":0,"type":"user/message"}"#, 0), Sorted::Message(_)));
        let written = br#"{"seq":12,"time":1764520000000,"type":"tool/result","data":{}}"#;
        assert_eq!(message_type(written, 12).map(|(start, end)| &written[start..end]), Some(&b"tool/result"[..]));
        assert_eq!(message_type(written, 11), None);
        assert_eq!(message_type(br#"{"seq":0,"time":1,"type":"turn/start","data":{}}"#, 0), None);
        assert_eq!(message_type(br#"{"seq":0,"time":1,"type":"user/message"#, 0), None);
        assert!(matches!(sort(b"{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1,\"x\":\"\xff\"}}", 0), Sorted::Other));
    }
}
