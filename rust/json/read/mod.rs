//! Reading JSON text: the parser straight into frozen trees (`parse`), its key cache (`keys`),
//! escaped strings (`strings`), the fixed-field reader that messages and records use (`fields`),
//! the objects read recently that a repeated text takes as they are (`recent`),
//! and texts read ahead without the GIL into a tape that frozen values are built from (`tape`).

pub(crate) mod fields;
pub(crate) mod keys;
pub(crate) mod parse;
pub(crate) mod recent;
pub(crate) mod strings;
pub(crate) mod tape;

use pyo3::prelude::*;

use crate::json::read::parse::parse;
use crate::json::text::json_text;

/// Parse JSON text straight into a frozen tree (`FrozenDict`, tuples, leaves).
#[pyfunction]
#[pyo3(signature = (text, /))]
pub(crate) fn from_json<'py>(text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    parse(text.py(), json_text(text)?)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(from_json, m)?)?;
    Ok(())
}
