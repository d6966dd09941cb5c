//! An original log's lines as spans of the bytes read (`split_original_lines`), not as a `bytes`
//! object each: an open of 40,000 records made and freed 40,000 of them on the GIL thread (~4 ms
//! of ~55) only for `decode_original_records` to read their bytes. A line is made a `bytes` when
//! Python asks for it (the crash-tail walk from the end, a record left to the Python decoder);
//! slicing shares the bytes, so the crash-tail rules cut the list as before. The bytes are parts
//! read as joined, none copied: a large plain log is a read-only mapping of the file up to a
//! line no writer may cut and the rest read (`dsh/plain_read.py`), a compressed log its frames'
//! decompressed texts.

use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice, PyTuple};

use crate::json::scan::find_byte;
use crate::log::stored_records::Piece;

/// The parts of a log's bytes, each at its offset in their joining.
struct Parts(Vec<(usize, Piece)>);

impl Parts {
    /// Each part's bytes at its offset.
    fn view<'a>(&'a self, py: Python<'a>) -> Vec<(usize, &'a [u8])> {
        self.0.iter().map(|(base, piece)| (*base, piece.bytes(py))).collect()
    }
}

/// The lines of an original log: `content[start..end]` per line, without its newline, where
/// `content` is its parts joined (a line never spans two).
#[pyclass(frozen, sequence, module = "dshkit._core", name = "OriginalLines")]
pub(crate) struct OriginalLines {
    parts: Arc<Parts>,
    spans: Vec<(usize, usize)>,
}

impl OriginalLines {
    /// Each line's text, borrowed from the parts (which `self` keeps alive), walked once in order.
    pub(crate) fn texts<'a>(&'a self, py: Python<'a>) -> Vec<&'a [u8]> {
        let parts = self.parts.view(py);
        if let [(_, bytes)] = parts[..] {
            return self.spans.iter().map(|&(start, end)| &bytes[start..end]).collect();
        }
        let mut part = 0;
        self.spans
            .iter()
            .map(|&(start, end)| {
                while parts.get(part + 1).is_some_and(|(base, _)| *base <= start) {
                    part += 1;
                }
                let (base, bytes) = parts[part];
                &bytes[start - base..end - base]
            })
            .collect()
    }

    /// The text of the line at `span`.
    fn text<'a>(&'a self, py: Python<'a>, (start, end): (usize, usize)) -> &'a [u8] {
        let parts = &self.parts.0;
        let (base, piece) = &parts[parts.partition_point(|(base, _)| *base <= start).max(1) - 1];
        &piece.bytes(py)[start - base..end - base]
    }
}

#[pymethods]
impl OriginalLines {
    fn __len__(&self) -> usize {
        self.spans.len()
    }

    /// Line `index` as `bytes`, or the lines of a slice (step 1) sharing the same bytes.
    fn __getitem__<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let range = slice.indices(self.spans.len() as isize)?;
            if range.step != 1 {
                return Err(PyValueError::new_err("OriginalLines slices take no step"));
            }
            let (start, stop) = (range.start as usize, (range.stop.max(range.start)) as usize);
            let lines = OriginalLines { parts: Arc::clone(&self.parts), spans: self.spans[start..stop].to_vec() };
            return Ok(Bound::new(py, lines)?.into_any());
        }
        let index: isize = index.extract()?;
        let position = if index < 0 { index + self.spans.len() as isize } else { index };
        if position < 0 || position as usize >= self.spans.len() {
            return Err(PyIndexError::new_err("line index out of range"));
        }
        Ok(PyBytes::new(py, self.text(py, self.spans[position as usize])).into_any())
    }
}

/// Where each line of `bytes[start..]` ends: as `split(b"\n")`, a last piece after the last newline
/// (empty when the text ends with one).
pub(crate) fn line_spans(bytes: &[u8], start: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = start.min(bytes.len());
    while let Some(offset) = find_byte(&bytes[at..], b'\n') {
        spans.push((at, at + offset));
        at += offset + 1;
    }
    spans.push((at, bytes.len()));
    spans
}

/// The line spans of `parts` read as joined (offsets in the joining), from offset `start`: as
/// `line_spans` of the joining. A line never spans two parts: each part followed by another
/// must end with a newline (`Err`: the first that does not).
fn joined_spans(parts: &[(usize, &[u8])], start: usize) -> Result<Vec<(usize, usize)>, usize> {
    let mut spans = Vec::new();
    for (k, &(base, bytes)) in parts.iter().enumerate() {
        let last = k + 1 == parts.len();
        if !last && bytes.last() != Some(&b'\n') {
            return Err(k);
        }
        spans.extend(line_spans(bytes, start.saturating_sub(base)).into_iter().map(|(from, to)| (base + from, base + to)));
        if !last {
            spans.truncate(spans.len() - 1); // the empty piece after the part's last newline
        }
    }
    Ok(spans)
}

/// `b"".join((content, *rest))[start:].split(b"\n")` as `OriginalLines`: line ends found a block
/// at a time (`json/scan.rs`), no line copied, nor the parts joined. Each part is `bytes` or a
/// read-only contiguous buffer (a mapped log; the decompressed frames of a compressed one); empty
/// parts are left out, and each other part followed by another must end with a newline.
#[pyfunction]
#[pyo3(signature = (content, start, /, *rest))]
fn split_original_lines(py: Python<'_>, content: &Bound<'_, PyAny>, start: usize, rest: &Bound<'_, PyTuple>) -> PyResult<OriginalLines> {
    let mut parts = Vec::with_capacity(1 + rest.len());
    let mut base = 0;
    for part in std::iter::once(content.clone()).chain(rest.iter()) {
        let piece = Piece::new(&part)?;
        let length = piece.bytes(py).len();
        parts.push((base, piece));
        base += length;
    }
    // An empty part holds no line end: left out (all but one when every part is empty).
    let all_empty = parts.iter().all(|(_, piece)| piece.bytes(py).is_empty());
    let mut index = 0;
    parts.retain(|(_, piece)| {
        index += 1;
        (all_empty && index == 1) || !piece.bytes(py).is_empty()
    });
    let parts = Parts(parts);
    let view = parts.view(py);
    let spans = py.detach(|| joined_spans(&view, start));
    let spans = spans.map_err(|_| PyValueError::new_err("split_original_lines: every part followed by another must end with a newline"))?;
    Ok(OriginalLines { parts: Arc::new(parts), spans })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<OriginalLines>()?;
    m.add_function(wrap_pyfunction!(split_original_lines, m)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_match_a_split_on_newlines() {
        for text in ["", "\n", "a", "a\n", "a\nb", "\n\nab\n", "a line of more than sixteen bytes\nand another one, longer still\n"] {
            for start in 0..=text.len() + 1 {
                let expected: Vec<&[u8]> = text.as_bytes()[start.min(text.len())..].split(|&b| b == b'\n').collect();
                let spans: Vec<&[u8]> = line_spans(text.as_bytes(), start).into_iter().map(|(from, to)| &text.as_bytes()[from..to]).collect();
                assert_eq!(spans, expected, "{text:?} from {start}");
            }
        }
    }

    #[test]
    fn spans_of_two_parts_are_those_of_their_joining() {
        for (head, tail) in [("h\n", ""), ("h\na\n", "b\nc"), ("h\n\n", "\n"), ("header\nx\n", "y\nz\n")] {
            let joined = format!("{head}{tail}");
            for start in 0..=joined.len() + 1 {
                let parts = [(0, head.as_bytes()), (head.len(), tail.as_bytes())];
                assert_eq!(joined_spans(&parts, start), Ok(line_spans(joined.as_bytes(), start)), "{head:?} + {tail:?} from {start}");
            }
        }
        assert_eq!(joined_spans(&[(0, &b"h\na"[..]), (3, &b"b\n"[..])], 0), Err(0), "a line across the parts");
    }
}
