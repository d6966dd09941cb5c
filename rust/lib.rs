//! Native core of dshkit, exposed to Python as `dshkit._core`.
//!
//! One module per concept; this file only wires them into the Python module. Nothing is public
//! to other Rust crates: the Python module is the only interface.

mod checksum;
mod content;
mod creation;
mod errors;
mod event_columns;
mod freeze;
mod frozendict;
mod ids;
mod json;
mod json_fields;
mod json_leaves;
mod json_keys;
mod json_parse;
mod json_scan;
mod json_strings;
mod message;
mod message_record;
mod message_vouch;
mod plain_rules;
mod plain_vouch;
mod record_scan;
mod record_scanner;
#[cfg(test)]
mod record_scan_reference;
mod records;
mod surface_fold;
mod walk;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    ids::register(m)?;
    frozendict::register(m)?;
    freeze::register(m)?;
    json::register(m)?;
    message::register(m)?;
    creation::register(m)?;
    checksum::register(m)?;
    records::register(m)?;
    event_columns::register(m)?;
    message_vouch::register(m)?;
    plain_vouch::register(m)?;
    surface_fold::register(m)?;
    Ok(())
}
