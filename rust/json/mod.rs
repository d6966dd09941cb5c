//! Exact JSON for frozen trees and messages: keys are data, ints stay ints, no NaN. Reading
//! (`read/`) and writing (`write/`) never use each other; both use the byte scanning of `scan`
//! and the `str` edges of `text`. Above `value/`, below `message/` and `log/`.

pub(crate) mod read;
pub(crate) mod scan;
pub(crate) mod text;
pub(crate) mod write;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    write::register(m)?;
    read::register(m)
}
