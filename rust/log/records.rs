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
//! - message: a `user/message`, `assistant/message` or `tool/result` record, read in one pass
//!   (`message_record.rs`: the envelope field by field, the message straight into a `Message`);
//!   returned as an `Event` for the caller to hold to the surface rules, or, when it passes
//!   every stateless append rule (`message_vouch.rs`), as a vouched append.
//! - anything else (an unknown type, a `request/header`, a float with an exponent, a `\u`
//!   escape in a key, a malformed record ...): left to the Python decoder by its index. The scan
//!   is deliberately narrower than the parser, so "plain" never vouches for a record the
//!   parser or the rules would refuse; everything it does not vouch for takes the full path.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::json::read::tape::Tape;
use crate::json::scan::find_byte;
use crate::log::checksum::crc32c_of_parts;
use crate::log::event_columns::{KIND_DATA, KIND_MESSAGE, KIND_USER};
use crate::log::message_record::read_message_record;
use crate::log::message_tape::read_message_tape;
use crate::log::message_vouch::{vouch_message_append, Append};
use crate::log::record_scan::Sorted;
use crate::log::sort_ahead::with_sorted_records;
use crate::value::strs::text_of;
use crate::value::walk::untrack;

/// `,"crc":"` + 8 hex digits + `"}`.
const SUFFIX_LENGTH: usize = 18;
/// Kind bytes of `EventLog`'s compact form only a stored record has (`Kept`; the others are
/// `event_columns.rs`'): a record the Python decoder reads, a message event's record.
const KIND_RECORD: u8 = b'R';
const KIND_MESSAGE_RECORD: u8 = b'S';
const NULL: &[u8] = b"null";

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

/// Offset of the first `\n` in `data`.
fn find_newline(data: &[u8]) -> Option<usize> {
    find_byte(data, b'\n')
}

/// The event records of a stored log, as spans of its bytes (a JSON Lines file, or a table read as one value).
///
/// Their checksums may be left to check (`split_records(..., defer_checks=True)`): then each is
/// checked where the record is first read, `decode_records` checking them all on the thread that
/// sorts the records ahead of it, so that an open does not pass over the whole log once more
/// before decoding it. No text is handed out unchecked: `check()` checks what is left and names the
/// first record that fails, and `__getitem__` refuses a record that fails.
#[pyclass(frozen, sequence, module = "dshkit._core", name = "Records")]
pub(crate) struct Records {
    content: Content,
    /// Each record's text: `content[start..end]`, followed by `}` when `sealed`.
    spans: Vec<(usize, usize)>,
    sealed: bool,
    /// The CRC-32C each record's text must have, while not yet checked; empty when checked already.
    unchecked: Vec<u32>,
    /// Set once every checksum of `unchecked` was found to hold.
    checked: AtomicBool,
}

/// One buffer of a `Content`: a `bytes` object, or a read-only buffer that cannot change while it
/// is held (a log file mapped read-only, a database driver's result: the export keeps it alive).
enum Piece {
    Bytes(Py<PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl Piece {
    /// `piece` as it is (`bytes`), or its buffer when that is read-only and contiguous.
    fn new(piece: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = piece.cast::<PyBytes>() {
            return Ok(Piece::Bytes(bytes.clone().unbind()));
        }
        let buffer = PyBuffer::<u8>::get(piece)?;
        if !buffer.readonly() || !buffer.is_c_contiguous() {
            return Err(PyTypeError::new_err(format!(
                "records must be spans of bytes or of a read-only contiguous buffer, not of a writable {}",
                piece.get_type().name()?
            )));
        }
        Ok(Piece::Buffer(buffer))
    }

    fn bytes<'a>(&'a self, py: Python<'a>) -> &'a [u8] {
        match self {
            Piece::Bytes(bytes) => bytes.as_bytes(py),
            // SAFETY: a read-only, contiguous buffer of `len_bytes` bytes, exported for as long as
            // `self` holds it, so its memory stays put and unchanged.
            Piece::Buffer(buffer) => unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) },
        }
    }
}

/// The bytes a `Records` holds spans of: one buffer, or several read as if joined by `\n` (a
/// table's packs and rows, not copied into one).
struct Content(Vec<Piece>);

/// A `Content`'s bytes, borrowed: each piece at its offset in the joining (one `\n` between two).
struct ContentView<'a>(Vec<(usize, &'a [u8])>);

impl Content {
    fn view<'a>(&'a self, py: Python<'a>) -> ContentView<'a> {
        let mut base = 0;
        ContentView(
            self.0
                .iter()
                .map(|piece| {
                    let bytes = piece.bytes(py);
                    let at = base;
                    base += bytes.len() + 1;
                    (at, bytes)
                })
                .collect(),
        )
    }
}

impl<'a> ContentView<'a> {
    /// The piece holding offset `at` of the joining, and its offset.
    fn piece(&self, at: usize) -> (usize, &'a [u8]) {
        match self.0.len() {
            0 => (0, &[]), // no parts: read as their join, empty
            1 => self.0[0],
            _ => self.0[self.0.partition_point(|(base, _)| *base <= at).max(1) - 1],
        }
    }

    /// The bytes of a span of the joining (a span never crosses a joining `\n`).
    fn span(&self, (start, end): (usize, usize)) -> &'a [u8] {
        let (base, bytes) = self.piece(start);
        &bytes[start - base..end - base]
    }

    fn len(&self) -> usize {
        self.0.last().map_or(0, |(base, bytes)| base + bytes.len())
    }

    /// The offset of the first `\n` of the joining at or after `at` (within its length).
    fn newline_from(&self, at: usize) -> Option<usize> {
        let (base, bytes) = self.piece(at);
        if let Some(found) = bytes.get(at - base..).and_then(find_newline) {
            return Some(at + found);
        }
        let joining = base + bytes.len(); // the `\n` after this piece, unless it is the last
        (joining < self.len()).then_some(joining)
    }
}

impl Records {
    fn new(content: Content, spans: Vec<(usize, usize)>, sealed: bool, unchecked: Vec<u32>) -> Self {
        Records { content, spans, sealed, unchecked, checked: AtomicBool::new(false) }
    }

    fn parts<'a>(&self, content: &ContentView<'a>, index: usize) -> [&'a [u8]; 2] {
        [content.span(self.spans[index]), self.tail()]
    }

    /// What follows each record's span in its text: the `}` a sealed line's suffix replaced.
    fn tail(&self) -> &'static [u8] {
        if self.sealed { b"}" } else { b"" }
    }

    /// Every record's text, in order: `parts` of each, the pieces walked once rather than
    /// searched per record.
    fn all_parts<'a>(&self, content: &ContentView<'a>) -> Vec<[&'a [u8]; 2]> {
        let mut piece = 0;
        self.spans
            .iter()
            .map(|&(start, end)| {
                while content.0.get(piece + 1).is_some_and(|(base, _)| *base <= start) {
                    piece += 1;
                }
                let (base, bytes) = content.0.get(piece).copied().unwrap_or((0, &[]));
                [&bytes[start - base..end - base], self.tail()]
            })
            .collect()
    }

    /// The checksums still to check, one per record (empty: none is left).
    pub(crate) fn unchecked_checksums(&self) -> &[u32] {
        if self.checked.load(Ordering::Acquire) {
            return &[];
        }
        &self.unchecked
    }

    /// Every checksum was checked, by `decode_records` or `check`.
    fn mark_checked(&self) {
        self.checked.store(true, Ordering::Release);
    }

    /// The first of records `0..stop` whose text does not have its checksum.
    fn first_failing(&self, content: &ContentView<'_>, stop: usize) -> Option<usize> {
        let unchecked = self.unchecked_checksums();
        (0..stop.min(unchecked.len())).find(|&index| crc32c_of_parts(&self.parts(content, index)) != unchecked[index])
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
        let [body, tail] = self.parts(&self.content.view(py), position as usize);
        let unchecked = self.unchecked_checksums();
        if !unchecked.is_empty() && crc32c_of_parts(&[body, tail]) != unchecked[position as usize] {
            return Err(PyValueError::new_err(format!(
                "record {position}: its checksum does not match its text (check() names the first such record)"
            )));
        }
        Ok(PyBytes::new(py, &[body, tail].concat()))
    }

    /// Check every checksum left to check: the index of the first record whose text does not
    /// match its checksum, else -1 (and the records count as checked).
    fn check(&self, py: Python<'_>) -> isize {
        let content = self.content.view(py);
        match py.detach(|| self.first_failing(&content, self.spans.len())) {
            Some(index) => index as isize,
            None => {
                self.mark_checked();
                -1
            }
        }
    }
}

/// The lines in `content[start..end]` (each ending with `\n`) as records, each checksum checked
/// when `sealed`: `(records, -1)`, or `(None, index)` naming the first line that fails. With
/// `defer_checks`, a sealed line's suffix is read now and its CRC-32C compared where the record is
/// first read (`Records`); only a line that is not sealed at all fails here (and a line before it
/// whose checksum fails is named first).
#[pyfunction]
#[pyo3(signature = (content, start, end, sealed, /, defer_checks = false))]
fn split_records<'py>(
    py: Python<'py>,
    content: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    sealed: bool,
    defer_checks: bool,
) -> PyResult<(Option<Records>, isize)> {
    let content = Content(vec![Piece::new(content)?]);
    let bytes = content.0[0].bytes(py);
    let end = end.min(bytes.len());
    let form = LineForm { sealed, defer_checks };
    let Lines { spans, unchecked, failed } = py.detach(|| form.split_in_two(bytes, start.min(end), end));
    let records = Records::new(content, spans, sealed, unchecked);
    let view = records.content.view(py);
    Ok(match failed {
        Some(index) => {
            let first = py.detach(|| records.first_failing(&view, index));
            (None, first.unwrap_or(index) as isize)
        }
        None => (Some(records), -1),
    })
}

/// How `split_records` reads a log's lines.
#[derive(Clone, Copy)]
struct LineForm {
    sealed: bool,
    defer_checks: bool,
}

/// Lines split: each record's span and the checksum left to check for it, up to the first line
/// that fails (`failed`: its index).
#[derive(Default)]
struct Lines {
    spans: Vec<(usize, usize)>,
    unchecked: Vec<u32>,
    failed: Option<usize>,
}

/// Logs from this size are split by two threads, each half from a line's start: splitting is a
/// pass over the whole log before anything else can start.
const SPLIT_IN_TWO_FROM: usize = 1 << 20;

impl LineForm {
    /// The lines of `bytes[start..end]`, its second half split on a scoped thread when it is large.
    fn split_in_two(self, bytes: &[u8], start: usize, end: usize) -> Lines {
        let middle = start + (end - start) / 2;
        let second = match find_newline(&bytes[middle..end]) {
            Some(newline) if end - start >= SPLIT_IN_TWO_FROM => middle + newline + 1,
            _ => return self.split(bytes, start, end),
        };
        let (first, later) = std::thread::scope(|scope| {
            let later = std::thread::Builder::new().spawn_scoped(scope, || self.split(bytes, second, end));
            let first = self.split(bytes, start, second);
            (first, later.ok().and_then(|thread| thread.join().ok()))
        });
        // A thread that could not start (or stopped) leaves its half to this one.
        let later = later.unwrap_or_else(|| self.split(bytes, second, end));
        if first.failed.is_some() {
            return first;
        }
        let offset = first.spans.len();
        let mut lines = first;
        lines.failed = later.failed.map(|index| offset + index);
        lines.spans.extend(later.spans);
        lines.unchecked.extend(later.unchecked);
        lines
    }

    /// The lines of `bytes[start..end]` in order, up to the first that fails.
    fn split(self, bytes: &[u8], start: usize, end: usize) -> Lines {
        let mut lines = Lines::default();
        let mut at = start;
        while at < end {
            let line_end = find_newline(&bytes[at..end]).map_or(end, |i| at + i);
            let line = &bytes[at..line_end];
            if !self.sealed {
                lines.spans.push((at, line_end));
            } else if self.defer_checks {
                let Some(crc) = sealed_checksum(line) else { break };
                lines.spans.push((at, line_end - SUFFIX_LENGTH));
                lines.unchecked.push(crc);
            } else {
                let Some(body) = unseal(line) else { break };
                lines.spans.push((at, at + body.len()));
            }
            at = line_end + 1;
        }
        lines.failed = (at < end).then_some(lines.spans.len());
        lines
    }
}

/// The checksum a sealed line states (its suffix as `sealing_suffix` writes it: lowercase hex),
/// or `None` for a line that is not sealed.
fn sealed_checksum(line: &[u8]) -> Option<u32> {
    if line.len() <= SUFFIX_LENGTH {
        return None;
    }
    let suffix = &line[line.len() - SUFFIX_LENGTH..];
    let (head, digits, tail) = (&suffix[..8], &suffix[8..16], &suffix[16..]);
    if head != b",\"crc\":\"" || tail != b"\"}" {
        return None;
    }
    digits.iter().try_fold(0u32, |crc, &digit| {
        let value = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        Some(crc << 4 | u32::from(value))
    })
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

/// The records of a store's rows read in one query (SQLite: one `group_concat` per column):
/// `bodies`, every record's text joined by `\n` (one `bytes`, or a list of parts read as if joined
/// by `\n`: `bytes` or read-only buffers, kept rather than copied into one); `crcs`, each row's
/// stored checksum as a decimal integer, comma-separated. Each record's checksum is checked:
/// `(records, -1)`, or `(None, index)` of the first record whose stored checksum is not such an
/// integer or not the CRC-32C of its text (the rule of `verified_rows`), or `(None, n)` when there
/// are more records than checksums, or fewer (`n`: the shorter count). A record holding a `\n`
/// splits in two and fails here: the caller reads such a table row by row instead. The records
/// are spans of `bodies`. With `defer_checks`, each CRC-32C is compared where its record is first
/// read (`Records`), and only a checksum that is no such integer, or records and checksums that do
/// not pair up, fail here.
#[pyfunction]
#[pyo3(signature = (bodies, crcs, /, defer_checks = false))]
fn verified_joined<'py>(py: Python<'py>, bodies: &Bound<'py, PyAny>, crcs: &Bound<'py, PyAny>, defer_checks: bool) -> PyResult<(Option<Records>, isize)> {
    let pieces: Vec<Piece> = if bodies.is_instance_of::<PyList>() || bodies.is_instance_of::<PyTuple>() {
        bodies.try_iter()?.map(|part| Piece::new(&part?)).collect::<PyResult<_>>()?
    } else {
        vec![Piece::new(bodies)?]
    };
    // One list for the whole joining, or one per piece (each piece then paired on its own).
    let per_piece = !crcs.is_instance_of::<PyString>();
    let lists: Vec<Bound<'py, PyString>> = match per_piece {
        false => vec![crcs.cast::<PyString>()?.clone()],
        true => crcs.try_iter()?.map(|list| Ok(list?.cast_into::<PyString>()?)).collect::<PyResult<_>>()?,
    };
    if per_piece && lists.len() != pieces.len() {
        return Err(PyValueError::new_err(format!("{} parts and {} lists of checksums: one list per part", pieces.len(), lists.len())));
    }
    let lists: Vec<&str> = lists.iter().map(|list| list.to_str()).collect::<PyResult<_>>()?;
    let content = Content(pieces);
    let view = content.view(py);
    let Lines { spans, unchecked, failed } = py.detach(|| match per_piece {
        false => pair(&view, 0, view.len(), lists[0], defer_checks),
        true => pair_pieces(&view, &lists, defer_checks),
    });
    let records = Records::new(content, spans, false, unchecked);
    let view = records.content.view(py);
    Ok(match failed {
        Some(index) => {
            let first = py.detach(|| records.first_failing(&view, index));
            (None, first.unwrap_or(index) as isize)
        }
        None => (Some(records), -1),
    })
}

/// The records of `view[start..stop]` paired with the comma-separated checksums `list`, in
/// order, up to the first that fails (`verified_joined`'s rule).
fn pair(view: &ContentView<'_>, start: usize, stop: usize, list: &str, defer_checks: bool) -> Lines {
    let mut lines = Lines::default();
    if list.is_empty() {
        lines.failed = (stop > start).then_some(0);
        return lines;
    }
    let mut at = start;
    for stored in StoredChecksums::new(list) {
        if at > stop {
            lines.failed = Some(lines.spans.len()); // more checksums than records
            return lines;
        }
        let end = view.newline_from(at).filter(|&end| end < stop).unwrap_or(stop);
        match stored {
            Some(crc) if defer_checks => lines.unchecked.push(crc),
            Some(crc) if crc == crc32c_of_parts(&[view.span((at, end))]) => {}
            _ => {
                lines.failed = Some(lines.spans.len());
                return lines;
            }
        }
        lines.spans.push((at, end));
        at = end + 1;
    }
    lines.failed = (at <= stop).then_some(lines.spans.len()); // more records than checksums
    lines
}

/// Each piece of `view` paired with its own list of checksums, in order; the later pieces on a
/// scoped thread when the pieces are large and many (see `SPLIT_IN_TWO_FROM`).
fn pair_pieces(view: &ContentView<'_>, lists: &[&str], defer_checks: bool) -> Lines {
    let group = |pieces: std::ops::Range<usize>| -> Vec<Lines> {
        pieces.map(|k| {
            let (base, bytes) = view.0[k];
            pair(view, base, base + bytes.len(), lists[k], defer_checks)
        }).collect()
    };
    let half = view.len() / 2;
    let second = view.0.iter().position(|(base, _)| *base >= half).filter(|&k| k > 0 && view.len() >= SPLIT_IN_TWO_FROM);
    let groups = match second {
        None => vec![group(0..view.0.len())],
        Some(second) => std::thread::scope(|scope| {
            let later = std::thread::Builder::new().spawn_scoped(scope, || group(second..view.0.len()));
            let first = group(0..second);
            let later = later.ok().and_then(|thread| thread.join().ok()).unwrap_or_else(|| group(second..view.0.len()));
            vec![first, later]
        }),
    };
    let mut all = Lines::default();
    for lines in groups.into_iter().flatten() {
        let offset = all.spans.len();
        all.spans.extend(lines.spans);
        all.unchecked.extend(lines.unchecked);
        if let Some(index) = lines.failed {
            all.failed = Some(offset + index);
            break;
        }
    }
    all
}

/// The checksums of a comma-separated list, in order (as `split(',')` cuts it): each a CRC-32C
/// written as a decimal integer of at most 10 digits, else `None`. Read in one pass, without a
/// split and a parse per item (they were half of a joined read's scan).
struct StoredChecksums<'a> {
    /// What is left to read, `None` once the last item was read.
    rest: Option<&'a [u8]>,
}

impl<'a> StoredChecksums<'a> {
    fn new(list: &'a str) -> Self {
        StoredChecksums { rest: Some(list.as_bytes()) }
    }
}

impl Iterator for StoredChecksums<'_> {
    type Item = Option<u32>;

    fn next(&mut self) -> Option<Option<u32>> {
        let text = self.rest?;
        let (mut value, mut at, mut good) = (0u64, 0usize, true);
        while at < text.len() && text[at] != b',' {
            let digit = text[at].wrapping_sub(b'0');
            good &= digit < 10 && at < 10;
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            at += 1;
        }
        self.rest = (at < text.len()).then(|| &text[at + 1..]);
        Some(if good && at > 0 { u32::try_from(value).ok() } else { None })
    }
}

#[cfg(test)]
mod stored_checksums_tests {
    use super::StoredChecksums;

    #[test]
    fn the_list_is_cut_and_read_as_split_and_parse_would() {
        let read = |list: &str| StoredChecksums::new(list).collect::<Vec<_>>();
        assert_eq!(read("0,17,4294967295"), [Some(0), Some(17), Some(u32::MAX)]);
        assert_eq!(read("4294967296,12345678901,x,,+1, 2"), [None, None, None, None, None, None]);
        assert_eq!(read("7,"), [Some(7), None]);
        assert_eq!(read(""), [None]);
        assert_eq!(read("0000000001"), [Some(1)]);
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding into columns

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
            let kept = if type_name == "user/message" && record.source_seqs.is_empty() {
                Kept::Nothing
            } else {
                Kept::Envelope { data: record.data_span, message: record.message_span, seqs: record.source_seqs_span }
            };
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

/// What the blob keeps of a record, after its kind byte (the forms `EventLog._decode` reads).
enum Kept {
    /// The whole record (the Python decoder reads it).
    Record,
    /// Only a plain event's `data` object, at this span: its type and time are in the columns and
    /// its seq is its place, so the rest of the record would only be held twice.
    Data((usize, usize)),
    /// A message event's record, its message (at this span) cut out (`without_message`).
    RecordWithoutMessage((usize, usize)),
    /// Nothing: a user/message appended citing nothing, whose data is its `Message`.
    Nothing,
    /// A message append as `[data, source seqs]` (the in-memory move's form), from the spans of
    /// its data, of the message within it (written as `null`) and of `source_event_seqs`' array.
    /// A user/message's data is its message, so its form is `[null, source seqs]`.
    Envelope { data: (usize, usize), message: (usize, usize), seqs: (usize, usize) },
}

impl Kept {
    /// Cut `record` (a record's text in the blob) down to what is kept, moved to its start: the
    /// kind byte that says which form it is, and the length kept. `scratch` is reused between
    /// records.
    fn cut(self, record: &mut [u8], scratch: &mut Vec<u8>) -> (u8, usize) {
        match self {
            Kept::Record => (KIND_RECORD, record.len()),
            Kept::Data((start, stop)) => {
                record.copy_within(start..stop, 0);
                (KIND_DATA, stop - start)
            }
            Kept::RecordWithoutMessage(span) => (KIND_MESSAGE_RECORD, without_message(record, span)),
            Kept::Nothing => (KIND_USER, 0),
            Kept::Envelope { data, message, seqs } => {
                scratch.clear();
                scratch.push(b'[');
                scratch.extend_from_slice(&record[data.0..message.0]);
                scratch.extend_from_slice(NULL);
                scratch.extend_from_slice(&record[message.1..data.1]);
                scratch.push(b',');
                scratch.extend_from_slice(&record[seqs.0..seqs.1]);
                scratch.push(b']');
                // Never longer than the record, which holds the data, the seqs and more besides.
                record[..scratch.len()].copy_from_slice(scratch);
                (KIND_MESSAGE, scratch.len())
            }
        }
    }
}

/// Cuts the message, at `span`, out of a message event's record `text`, leaving `null` in its
/// place; the length of what is left. The event keeps its message as the `Message` (`EventLog`
/// puts it back when it rebuilds the event), so a copy in the record would double its memory.
fn without_message(text: &mut [u8], (start, stop): (usize, usize)) -> usize {
    if stop - start < NULL.len() {
        return text.len(); // no message is this short; kept whole rather than grown
    }
    text.copy_within(stop.., start + NULL.len());
    text[start..start + NULL.len()].copy_from_slice(NULL);
    text.len() - (stop - start) + NULL.len()
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
    // Every record's text first (borrowed, not copied), so that the blob is the bytearray itself,
    // allocated once at its size: a log's records are most of its memory, and a second copy of
    // them costs a page fault per 4 KiB.
    let block = records.cast::<Records>().ok().map(|block| block.get());
    let items: Vec<Bound<'py, PyAny>> = match block {
        Some(_) => Vec::new(),
        None => records.try_iter()?.collect::<PyResult<_>>()?,
    };
    let mut texts: Vec<[&[u8]; 2]> = Vec::with_capacity(block.map_or(items.len(), |block| block.spans.len()));
    if let Some(block) = block {
        texts = block.all_parts(&block.content.view(py));
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
    let mut scratch = Vec::new();
    let tuple_new = py.get_type::<PyTuple>().getattr("__new__")?;
    let none = py.None().into_bound(py);

    // A kind byte, then the record's text, per event: at most this many bytes (each record is
    // then cut down to what is kept, see `Kept`).
    let blob_len = texts.iter().map(|[body, tail]| 1 + body.len() + tail.len()).sum();
    // SAFETY: a new bytearray of `blob_len` bytes, not yet seen by Python code; every byte of it
    // up to `at` is written below (a kind byte and the text, record after record) and the rest cut
    // off before `blob` is returned, and `text` is read only from bytes already written. On an
    // error it is dropped unread.
    // Not `PyByteArray::new_with`: that zeroes the whole buffer first, one more pass over it.
    let blob = unsafe {
        Bound::from_owned_ptr_or_err(py, ffi::PyByteArray_FromStringAndSize(std::ptr::null(), blob_len as ffi::Py_ssize_t))?
    };
    let buffer: *mut u8 = unsafe { ffi::PyByteArray_AsString(blob.as_ptr()) }.cast();
    // The records are sorted ahead on a second thread (`sort_ahead.rs`) while this one builds.
    let unchecked = block.map_or(&[][..], |block| block.unchecked_checksums());
    let at = with_sorted_records(&texts, unchecked, |sorted| -> PyResult<Result<usize, usize>> {
        let mut at = 0;
        for (seq, [body, tail]) in texts.iter().enumerate() {
            let kind_at = at;
            let text_length = body.len() + tail.len();
            debug_assert!(kind_at + 1 + text_length <= blob_len);
            // SAFETY: `kind_at + 1..` holds `text_length` bytes inside the buffer: `at` never passes
            // the sizes summed into `blob_len`.
            let text_at = unsafe { buffer.add(kind_at + 1) };
            let text = unsafe {
                std::ptr::copy_nonoverlapping(body.as_ptr(), text_at, body.len());
                std::ptr::copy_nonoverlapping(tail.as_ptr(), text_at.add(body.len()), tail.len());
                std::slice::from_raw_parts(text_at, text_length)
            };
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
            let mut kept = Kept::Record;
            let Some((verdict, tape)) = sorted.next(text, seq) else { return Ok(Err(seq)) };
            match verdict {
                Sorted::Plain(span, time, data) => {
                    types.push(intern(span).into_any());
                    times.push(time);
                    messages.push(none.clone());
                    kept = Kept::Data(data);
                }
                sorted => {
                    let read = match sorted {
                        Sorted::Message(span) => {
                            let event_type = intern(span);
                            // SAFETY: `sort` checked the record is UTF-8.
                            let text = unsafe { std::str::from_utf8_unchecked(text) };
                            message_event(py, text, tape, seq, &event_type, event_class, &tuple_new).map(|read| (read, event_type))
                        }
                        _ => None,
                    };
                    match read {
                        Some((read, event_type)) => {
                            types.push(event_type.into_any());
                            times.push(read.time);
                            messages.push(read.message);
                            match read.decoded {
                                Decoded::Vouched(append) => pending.vouched(seq, append)?,
                                Decoded::Event(event) => pending.other(event)?,
                            }
                            kept = read.kept;
                        }
                        None => {
                            types.push(none.clone());
                            times.push(0);
                            messages.push(none.clone());
                            pending.other(seq)?;
                        }
                    }
                }
            }
            // SAFETY: the same bytes as `text`, which is not used again.
            let record = unsafe { std::slice::from_raw_parts_mut(text_at, text_length) };
            let (kind, kept) = kept.cut(record, &mut scratch);
            // SAFETY: `kind_at` lies inside the buffer, before this record's text.
            unsafe { buffer.add(kind_at).write(kind) };
            at = kind_at + 1 + kept;
            ends.push(at as u64);
        }
        Ok(Ok(at))
    })?;
    let at = match at {
        Ok(at) => at,
        Err(damaged) => return Ok(damaged.into_pyobject(py)?.into_any()),
    };
    if let Some(block) = block {
        block.mark_checked();
    }
    if at < blob_len {
        // SAFETY: `blob` is a bytearray only this function holds yet; shrinking keeps the bytes before `at`.
        if unsafe { ffi::PyByteArray_Resize(blob.as_ptr(), at as ffi::Py_ssize_t) } != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    let as_bytes = |words: Vec<[u8; 8]>| PyBytes::new(py, words.as_flattened());
    let times_bytes = as_bytes(times.iter().map(|t| t.to_ne_bytes()).collect());
    let ends_bytes = as_bytes(ends.iter().map(|e| e.to_ne_bytes()).collect());
    let types = PyList::new(py, types)?;
    let messages = PyList::new(py, messages)?;
    // `EventLog` keeps these columns for the session's life and only ever puts an event's type
    // (a `str`) or its `Message` (else `None`) in them, none of which can lead back to a list: a
    // cycle cannot run through them, so the GC need not walk their items (two lists of one per
    // event) at every collection that reaches them.
    untrack(types.as_any());
    untrack(messages.as_any());
    pending.flush()?;
    let pending = pending.list;
    Ok(PyTuple::new(py, [types.into_any(), times_bytes.into_any(), messages.into_any(), blob.into_any(), ends_bytes.into_any(), pending.into_any()])?.into_any())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Records>()?;
    m.add_function(wrap_pyfunction!(split_records, m)?)?;
    m.add_function(wrap_pyfunction!(verified_rows, m)?)?;
    m.add_function(wrap_pyfunction!(verified_joined, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_message_is_cut_to_null_and_the_rest_moved_up() {
        let mut text = br#"{"data":{"turn":1,"message":{"id":"x"},"usage":{}}}"#.to_vec();
        let start = text.windows(3).position(|window| window == b"{\"i").unwrap();
        let stop = start + br#"{"id":"x"}"#.len();
        let kept = without_message(&mut text, (start, stop));
        assert_eq!(&text[..kept], br#"{"data":{"turn":1,"message":null,"usage":{}}}"#);
        let mut short = b"[{}]".to_vec();
        assert_eq!(without_message(&mut short, (1, 3)), 4);
        assert_eq!(short, b"[{}]");
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
}
