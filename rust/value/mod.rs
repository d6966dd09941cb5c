//! The immutable values everything else is made of: message ids (`ids`), deep freeze and thaw
//! (`freeze`), `FrozenDict` (`frozendict`), the `Message` type (`message`), the free lists
//! their objects are reused from (`recycle`), the mechanics every recursive walk shares (`walk`)
//! and errors that name a path (`errors`). Uses no other folder.

pub(crate) mod errors;
pub(crate) mod freeze;
pub(crate) mod frozendict;
pub(crate) mod ids;
pub(crate) mod message;
pub(crate) mod recycle;
pub(crate) mod strs;
pub(crate) mod walk;

use pyo3::prelude::*;

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    ids::register(m)?;
    frozendict::register(m)?;
    recycle::install_free_lists(m.py());
    freeze::register(m)
}
