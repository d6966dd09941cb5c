//! The original TypeScript harness's session logs read natively (the `session` layer, beside
//! `log/`): one call per log (`columns`) turns the records whose translation into dshkit's
//! vocabulary is a matter of bytes (boundaries, chunks, packed rows (`chunk_row`), the original's
//! own types that dshkit presents marked ignorable, `tool/call`, most `turn/end`s (`data_rules`))
//! into `EventLog` columns, and the message appends it is sure of into dshkit's records of them
//! (`message_text`), which `log/`'s reader builds and vouches for. Every other record is left to
//! the Python decoder by its index (`python/dshkit/session/dsh/codec.py`). A plain log's lines
//! reach it as spans of the bytes read (`lines`). Uses `log/`'s scanner
//! and message reader; nothing uses this folder.

pub(crate) mod chunk_row;
pub(crate) mod columns;
pub(crate) mod data_rules;
pub(crate) mod lines;
pub(crate) mod message_text;
pub(crate) mod read_ahead;
pub(crate) mod record_top;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    columns::register(m)?;
    lines::register(m)
}
