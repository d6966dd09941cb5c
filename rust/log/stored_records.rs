//! The records of a stored log as spans of its bytes (`Records`), and their checksums.
//!
//! `split_records` cuts the event lines of a JSON Lines log (format 2: each line is its record
//! with the 18-byte checksum suffix `,"crc":"%08x"}` in place of the closing brace);
//! `verified_joined` pairs a table's records, read as one value or as parts (packs, rows), with
//! their stored checksums; `verified_rows` checks rows one by one. A checksum may be left to
//! check where its record is first read (`decode_records`, `records.rs`, on its thread ahead;
//! `Records.check` for any other reader). The bytes are held as they were given: `bytes`, or
//! read-only buffers (a mapped log file, a database driver's result), never copied into one.

use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::json::scan::find_byte;
use crate::log::checksum::crc32c_of_parts;

/// `,"crc":"` + 8 hex digits + `"}`.
const SUFFIX_LENGTH: usize = 18;

/// The record a sealed line holds (its text without the suffix, then `}`), or `None` if the
/// line is not sealed or its checksum does not match (as `dshkit.session.records.unseal_line`).
fn unseal(line: &[u8]) -> Option<&[u8]> {
    let crc = sealed_checksum(line)?;
    let body = &line[..line.len() - SUFFIX_LENGTH];
    (crc32c_of_parts(&[body, b"}"]) == crc).then_some(body)
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
pub(crate) enum Piece {
    Bytes(Py<PyBytes>),
    Buffer(PyBuffer<u8>),
}

impl Piece {
    /// `piece` as it is (`bytes`), or its buffer when that is read-only and contiguous.
    pub(crate) fn new(piece: &Bound<'_, PyAny>) -> PyResult<Self> {
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

    pub(crate) fn bytes<'a>(&'a self, py: Python<'a>) -> &'a [u8] {
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

    /// What a split or a pairing answers: `(records, -1)`, or `(None, index)` of the first record
    /// that fails, a checksum left to check before the line the split stopped at included.
    fn answer(py: Python<'_>, content: Content, lines: Lines, sealed: bool) -> (Option<Records>, isize) {
        let Lines { spans, unchecked, failed } = lines;
        let records = Records::new(content, spans, sealed, unchecked);
        match failed {
            Some(index) => {
                let view = records.content.view(py);
                let first = py.detach(|| records.first_failing(&view, index));
                (None, first.unwrap_or(index) as isize)
            }
            None => (Some(records), -1),
        }
    }

    /// How many records.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Every record's text, in order, as its parts (`parts`).
    pub(crate) fn texts<'a>(&'a self, py: Python<'a>) -> Vec<[&'a [u8]; 2]> {
        self.all_parts(&self.content.view(py))
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
    pub(crate) fn mark_checked(&self) {
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
        self.len()
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
    let lines = py.detach(|| form.split_in_two(bytes, start.min(end), end));
    Ok(Records::answer(py, content, lines, sealed))
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

impl Lines {
    /// Consecutive runs of lines as one, up to the first line that fails.
    fn joined(runs: impl IntoIterator<Item = Lines>) -> Lines {
        let mut all = Lines::default();
        for lines in runs {
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
}

/// `first` on this thread while `later` runs on a scoped one; `later` here too if that thread
/// cannot start (a process at its limit) or stops.
fn side_by_side<T: Send>(first: impl FnOnce() -> T, later: impl Fn() -> T + Sync) -> (T, T) {
    let (first, done) = std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().spawn_scoped(scope, &later);
        (first(), thread.ok().and_then(|thread| thread.join().ok()))
    });
    (first, done.unwrap_or_else(later))
}

impl LineForm {
    /// The lines of `bytes[start..end]`, its second half split on a scoped thread when it is large.
    fn split_in_two(self, bytes: &[u8], start: usize, end: usize) -> Lines {
        let middle = start + (end - start) / 2;
        let second = match find_newline(&bytes[middle..end]) {
            Some(newline) if end - start >= SPLIT_IN_TWO_FROM => middle + newline + 1,
            _ => return self.split(bytes, start, end),
        };
        let (first, later) = side_by_side(|| self.split(bytes, start, second), || self.split(bytes, second, end));
        Lines::joined([first, later])
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

/// The checksum a sealed line states (its suffix as `seal_line` writes it: lowercase hex), or
/// `None` for a line that is not sealed.
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
    let lists: Vec<Bound<'py, PyString>> = if per_piece {
        crcs.try_iter()?.map(|list| Ok(list?.cast_into::<PyString>()?)).collect::<PyResult<_>>()?
    } else {
        vec![crcs.cast::<PyString>()?.clone()]
    };
    if per_piece && lists.len() != pieces.len() {
        return Err(PyValueError::new_err(format!("{} parts and {} lists of checksums: one list per part", pieces.len(), lists.len())));
    }
    let lists: Vec<&str> = lists.iter().map(|list| list.to_str()).collect::<PyResult<_>>()?;
    let content = Content(pieces);
    let view = content.view(py);
    let lines = py.detach(|| if per_piece { pair_pieces(&view, &lists, defer_checks) } else { pair(&view, 0, view.len(), lists[0], defer_checks) });
    Ok(Records::answer(py, content, lines, false))
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
    match second {
        None => Lines::joined(group(0..view.0.len())),
        Some(second) => {
            let (first, later) = side_by_side(|| group(0..second), || group(second..view.0.len()));
            Lines::joined(first.into_iter().chain(later))
        }
    }
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Records>()?;
    m.add_function(wrap_pyfunction!(split_records, m)?)?;
    m.add_function(wrap_pyfunction!(verified_rows, m)?)?;
    m.add_function(wrap_pyfunction!(verified_joined, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suffix_matches_the_python_format() {
        let record = br#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}"#;
        let sealing_suffix = format!(",\"crc\":\"{:08x}\"}}", crc32c_of_parts(&[record]));
        let line = [&record[..record.len() - 1], sealing_suffix.as_bytes()].concat();
        assert_eq!(unseal(&line), Some(&record[..record.len() - 1]));
        assert!(line.ends_with(format!(",\"crc\":\"{:08x}\"}}", crc32c_of_parts(&[record])).as_bytes()));
        let mut flipped = line.clone();
        flipped[10] ^= 1;
        assert_eq!(unseal(&flipped), None);
        assert_eq!(unseal(b"{}"), None);
        let upper = String::from_utf8(line.clone()).unwrap().replace(&sealing_suffix, &sealing_suffix.to_uppercase().replace("CRC", "crc"));
        if upper.as_bytes() != &line[..] {
            assert_eq!(unseal(upper.as_bytes()), None, "a checksum in upper case is not as dshkit writes it");
        }
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
