//! The original TypeScript harness's session logs read natively (the `session` layer, beside
//! `log/`): one call per log turns the records whose translation into dshkit's vocabulary is
//! plain (boundaries, chunks, packed chunk rows, the original's own types that dshkit presents
//! marked ignorable) into `EventLog` columns, and leaves every other record to the Python
//! decoder by its index (`python/dshkit/session/dsh/native_read.py`). Uses `log/`'s scanner;
//! nothing uses this folder.

pub(crate) mod chunk_row;
pub(crate) mod columns;
pub(crate) mod data_rules;
pub(crate) mod message_text;
pub(crate) mod record_top;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    columns::register(m)
}
