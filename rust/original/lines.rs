//! An original log's lines as spans of the bytes read (`split_original_lines`), not as a `bytes`
//! object each: an open of 40,000 records made and freed 40,000 of them on the GIL thread (~4 ms
//! of ~55) only for `decode_original_records` to read their bytes. A line is made a `bytes` when
//! Python asks for it (the crash-tail walk from the end, a record left to the Python decoder);
//! slicing shares the bytes, so the crash-tail rules cut the list as before.

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySlice};

use crate::json::scan::find_byte;

/// The lines of an original log: `content[start..end]` per line, without its newline.
#[pyclass(frozen, sequence, module = "dshkit._core", name = "OriginalLines")]
pub(crate) struct OriginalLines {
    content: Py<PyBytes>,
    spans: Vec<(usize, usize)>,
}

impl OriginalLines {
    /// Each line's text, borrowed from `content` (which `self` keeps alive).
    pub(crate) fn texts<'a>(&'a self, py: Python<'a>) -> Vec<&'a [u8]> {
        let content = self.content.bind(py).as_bytes();
        self.spans.iter().map(|&(start, end)| &content[start..end]).collect()
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
            let lines = OriginalLines { content: self.content.clone_ref(py), spans: self.spans[start..stop].to_vec() };
            return Ok(Bound::new(py, lines)?.into_any());
        }
        let index: isize = index.extract()?;
        let position = if index < 0 { index + self.spans.len() as isize } else { index };
        if position < 0 || position as usize >= self.spans.len() {
            return Err(PyIndexError::new_err("line index out of range"));
        }
        let (start, end) = self.spans[position as usize];
        Ok(PyBytes::new(py, &self.content.bind(py).as_bytes()[start..end]).into_any())
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

/// `content[start:].split(b"\n")` as `OriginalLines`: line ends found a block at a time
/// (`json/scan.rs`), no line copied.
#[pyfunction]
#[pyo3(signature = (content, start, /))]
fn split_original_lines(py: Python<'_>, content: Bound<'_, PyBytes>, start: usize) -> OriginalLines {
    let bytes = content.as_bytes();
    let spans = py.detach(|| line_spans(bytes, start));
    OriginalLines { content: content.unbind(), spans }
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
}
