//! Messages as the `llm` layer knows them: `Message`'s Python methods (`methods`), the content,
//! source and role rules (`content`), and creation and import (`creation`). Uses `value/` and
//! `json/`.

pub(crate) mod content;
pub(crate) mod creation;
pub(crate) mod methods;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    methods::register(m)?;
    creation::register(m)
}
