//! Messages as the `llm` layer knows them: `Message`'s Python methods (`methods`), the content,
//! source and role rules (`content`), creation and import (`creation`) and the assistant source
//! shared by one model's messages (`model_source`). Uses `value/` and `json/`.

pub(crate) mod content;
pub(crate) mod creation;
pub(crate) mod methods;
pub(crate) mod model_source;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    methods::register(m)?;
    creation::register(m)
}
