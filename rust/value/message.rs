//! The `Message` value: its four fields and how one is built. Its Python methods are in
//! `message/methods.rs`, the ways to get one in `message/creation.rs`, its JSON form in
//! `json/write/message.rs`; the type lives here, below all of them, so that freezing and the JSON
//! writer can keep a `Message` inside a tree without depending on the layers above.

use std::sync::atomic::AtomicIsize;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::value::frozendict::FrozenDict;
use crate::value::walk::untrack;

/// `Message::hash` before the first `__hash__`.
pub(crate) const UNHASHED: isize = -1;

/// Frozen content blocks and the nesting depth of their tuple.
pub(crate) struct Content<'py> {
    pub(crate) blocks: Bound<'py, PyTuple>,
    pub(crate) depth: usize,
}

/// An identified, immutable message: `id`, `role`, `content` blocks and `source`.
#[pyclass(frozen, module = "dshkit._core", name = "Message")]
pub(crate) struct Message {
    pub(crate) id: Py<PyString>,
    pub(crate) role: Py<PyString>,
    pub(crate) content: Py<PyTuple>,
    pub(crate) source: Py<FrozenDict>,
    /// The hash once asked for, else `UNHASHED` (no Python hash is -1): 8 bytes, not a `OnceLock`'s 16.
    pub(crate) hash: AtomicIsize,
    /// Nesting depth of the message's JSON object (see `FrozenDict::depth`).
    pub(crate) depth: u16,
}

impl Message {
    pub(crate) fn build<'py>(
        py: Python<'py>,
        id: Bound<'py, PyString>,
        role: Bound<'py, PyString>,
        content: Content<'py>,
        source: Bound<'py, FrozenDict>,
    ) -> PyResult<Bound<'py, Message>> {
        let depth = 1 + content.depth.max(source.get().depth());
        let message = Bound::new(
            py,
            Message {
                id: id.unbind(),
                role: role.unbind(),
                content: content.blocks.unbind(),
                source: source.unbind(),
                hash: AtomicIsize::new(UNHASHED),
                depth: depth as u16,
            },
        )?;
        untrack(message.as_any());
        Ok(message)
    }

    pub(crate) fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The id (for the native fold of vouched appends, `log/surface_fold.rs`).
    pub(crate) fn id_ref<'a, 'py>(&'a self, py: Python<'py>) -> &'a Bound<'py, PyString> {
        self.id.bind(py)
    }

    /// The role, content blocks and source (for the native append checks, `log/message_vouch.rs`).
    pub(crate) fn parts<'a, 'py>(
        &'a self,
        py: Python<'py>,
    ) -> (&'a Bound<'py, PyString>, &'a Bound<'py, PyTuple>, &'a Bound<'py, FrozenDict>) {
        (self.role.bind(py), self.content.bind(py), self.source.bind(py))
    }
    /// The four fields in a `dict` of frozen values (shallow).
    pub(crate) fn as_dict<'py>(&self, py: Python<'py>) -> Bound<'py, PyDict> {
        let dict = PyDict::new(py);
        let _ = dict.set_item(intern!(py, "id"), self.id.bind(py));
        let _ = dict.set_item(intern!(py, "role"), self.role.bind(py));
        let _ = dict.set_item(intern!(py, "content"), self.content.bind(py));
        let _ = dict.set_item(intern!(py, "source"), self.source.bind(py));
        dict
    }

}
