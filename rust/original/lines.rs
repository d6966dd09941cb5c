//! The original's plain log split into its lines natively: `bytes.split(b"\n")` tests a byte at a
//! time and needs the body sliced off the header first (a copy of the whole log); here each line
//! end is found a block at a time (`json/scan.rs`) and each line copied once, into its `bytes`.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::json::scan::find_byte;

/// Where each line of `bytes[start..]` ends: as `split(b"\n")`, a last piece after the last newline
/// (empty when the text ends with one).
fn line_spans(bytes: &[u8], start: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut at = start.min(bytes.len());
    while let Some(offset) = find_byte(&bytes[at..], b'\n') {
        spans.push((at, at + offset));
        at += offset + 1;
    }
    spans.push((at, bytes.len()));
    spans
}

/// `content[start:].split(b"\n")`, without the copy of `content[start:]`.
#[pyfunction]
#[pyo3(signature = (content, start, /))]
fn split_original_lines<'py>(py: Python<'py>, content: &Bound<'py, PyBytes>, start: usize) -> PyResult<Bound<'py, PyList>> {
    let bytes = content.as_bytes();
    PyList::new(py, line_spans(bytes, start).into_iter().map(|(from, to)| PyBytes::new(py, &bytes[from..to])))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
