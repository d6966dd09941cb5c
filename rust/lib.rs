//! Native core of dshkit, exposed to Python as `dshkit._core`.
//!
//! A folder per concern, each using only the folders before it: `value/` (ids, freeze,
//! `FrozenDict`, the `Message` type) <- `json/` (`read/`, `write/`) <- `message/` (the `llm`
//! layer's messages: methods, content rules, creation) <- `log/` (the `session` layer's log) <-
//! `original/` (the original harness's log records read natively).
//! This file only wires them into the Python module. Nothing is public to other Rust crates:
//! the Python module is the only interface.

mod json;
mod log;
mod message;
mod original;
mod value;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    value::register(m)?;
    json::register(m)?;
    message::register(m)?;
    log::register(m)?;
    original::register(m)
}
