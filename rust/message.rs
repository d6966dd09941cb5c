//! `Message`: the identified, immutable message value: its fields, JSON form, equality, hashing
//! and pickling. The ways to get one are in `creation.rs`; the content rules in `content.rs`.

use std::sync::OnceLock;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyAny, PyBool, PyDict, PyString, PyTuple};

use crate::content::{freeze_content, Content};
use crate::creation::{freeze_message_function, import_json};
use crate::errors::PathError;
use crate::frozendict::FrozenDict;
use crate::json::{json_bytes, json_str, json_text, with_buffer, write_frozen_dict, write_frozen_tuple, write_value};
use crate::json_leaves::write_str_ptr;
use crate::walk::{untrack, Walk};

#[pyclass(frozen, freelist = 1024, module = "dshkit._core", name = "Message")]
pub(crate) struct Message {
    id: Py<PyString>,
    role: Py<PyString>,
    content: Py<PyTuple>,
    source: Py<FrozenDict>,
    hash: OnceLock<isize>,
    /// Nesting depth of the message's JSON object (see `FrozenDict::depth`).
    depth: u16,
}

// ---------------------------------------------------------------------------------------------
// Construction

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
                hash: OnceLock::new(),
                depth: depth as u16,
            },
        )?;
        untrack(message.as_any());
        Ok(message)
    }

    pub(crate) fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The id (for the native fold of vouched appends, `surface_fold.rs`).
    pub(crate) fn id_ref<'a, 'py>(&'a self, py: Python<'py>) -> &'a Bound<'py, PyString> {
        self.id.bind(py)
    }

    /// The role, content blocks and source (for the native append checks, `message_vouch.rs`).
    pub(crate) fn parts<'a, 'py>(
        &'a self,
        py: Python<'py>,
    ) -> (&'a Bound<'py, PyString>, &'a Bound<'py, PyTuple>, &'a Bound<'py, FrozenDict>) {
        (self.role.bind(py), self.content.bind(py), self.source.bind(py))
    }

    /// The content blocks whose `type` is `kind`, in order.
    fn blocks_of_type<'py>(&self, py: Python<'py>, kind: &Bound<'py, PyString>) -> Vec<Bound<'py, PyAny>> {
        self.content
            .bind(py)
            .iter()
            .filter(|block| {
                block
                    .cast::<FrozenDict>()
                    .ok()
                    .and_then(|b| b.get().get_str(py, "type"))
                    .is_some_and(|t| t.eq(kind).unwrap_or(false))
            })
            .collect()
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

    /// The message's JSON object through the general writer (when its depth does not fit where
    /// it sits, so that the error names the deepest place, as for any tree).
    pub(crate) fn write_json(&self, out: &mut Vec<u8>, py: Python<'_>, walk: &mut Walk) -> Result<(), PathError> {
        out.extend_from_slice(b"{\"id\":");
        write_value(out, self.id.bind(py).as_any(), walk).map_err(|e| e.at_key("id"))?;
        out.extend_from_slice(b",\"role\":");
        write_value(out, self.role.bind(py).as_any(), walk).map_err(|e| e.at_key("role"))?;
        out.extend_from_slice(b",\"content\":");
        write_value(out, self.content.bind(py).as_any(), walk).map_err(|e| e.at_key("content"))?;
        out.extend_from_slice(b",\"source\":");
        write_value(out, self.source.bind(py).as_any(), walk).map_err(|e| e.at_key("source"))?;
        out.push(b'}');
        Ok(())
    }

    /// The message's JSON object, `level` containers below the root of the text being written;
    /// the caller checked that the message's depth fits there. Its parts are frozen by
    /// construction, so they go through the writer's frozen fast path.
    pub(crate) fn write_frozen_json(&self, out: &mut Vec<u8>, py: Python<'_>, level: usize) -> Result<(), PathError> {
        unsafe {
            out.extend_from_slice(b"{\"id\":");
            write_str_ptr(out, self.id.as_ptr()).map_err(|e| e.at_key("id"))?;
            out.extend_from_slice(b",\"role\":");
            write_str_ptr(out, self.role.as_ptr()).map_err(|e| e.at_key("role"))?;
            out.extend_from_slice(b",\"content\":");
            write_frozen_tuple(out, py, self.content.as_ptr(), level + 1).map_err(|e| e.at_key("content"))?;
            out.extend_from_slice(b",\"source\":");
            write_frozen_dict(out, py, self.source.as_ptr(), level + 1).map_err(|e| e.at_key("source"))?;
        }
        out.push(b'}');
        Ok(())
    }

    fn write_root(&self, out: &mut Vec<u8>, py: Python<'_>) -> PyResult<()> {
        self.write_frozen_json(out, py, 0).map_err(|e| e.into_pyerr("message"))
    }
}

#[pymethods]
impl Message {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "Message cannot be constructed directly: use create_message() (or create_user_message(), \
             create_assistant_message(), create_tool_result_message()) to create a new message, \
             or freeze_message() to import one whose id already exists",
        ))
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("id", "role", "content", "source")
    }

    #[getter]
    fn id<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.id.bind(py).clone()
    }

    #[getter]
    fn role<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        self.role.bind(py).clone()
    }

    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.content.bind(py).clone()
    }

    #[getter]
    fn source<'py>(&self, py: Python<'py>) -> Bound<'py, FrozenDict> {
        self.source.bind(py).clone()
    }

    /// The text of the top-level `text` blocks, concatenated without separators.
    #[getter]
    fn text(&self, py: Python<'_>) -> PyResult<String> {
        let mut out = String::new();
        for block in self.blocks_of_type(py, intern!(py, "text")) {
            if let Some(text) = block.cast::<FrozenDict>()?.get().get_str(py, "text") {
                out.push_str(&text.cast::<PyString>()?.to_cow()?);
            }
        }
        Ok(out)
    }

    /// The `tool_call` blocks, in order.
    #[getter]
    fn tool_calls<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.blocks_of_type(py, intern!(py, "tool_call")))
    }

    /// Same id, role and source with new content: a representation change keeps identity.
    fn with_content<'py>(&self, py: Python<'py>, content: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
        let content = freeze_content(py, content, "content", 1)?;
        Message::build(py, self.id.bind(py).clone(), self.role.bind(py).clone(), content, self.source.bind(py).clone())
    }

    /// A plain, mutable, detached dict of the four fields.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::freeze::thaw(self.as_dict(py).as_any())
    }

    /// Compact JSON text with the four fields.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_buffer(|out| self.write_root(out, py), |bytes| json_str(py, bytes))
    }

    /// `to_json` as UTF-8 `bytes`.
    fn to_json_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_buffer(|out| self.write_root(out, py), |bytes| json_bytes(py, bytes))
    }

    /// pydantic v2 support: the schema lives in Python (`dshkit.interop.pydantic`), imported lazily.
    #[classmethod]
    fn __get_pydantic_core_schema__<'py>(
        cls: &Bound<'py, pyo3::types::PyType>,
        source: &Bound<'py, PyAny>,
        handler: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let module = cls.py().import("dshkit.interop.pydantic")?;
        module.getattr("message_core_schema")?.call1((cls, source, handler))
    }

    /// Import a message from its JSON text, keeping its id.
    #[classmethod]
    #[pyo3(signature = (text, /))]
    fn from_json<'py>(cls: &Bound<'py, pyo3::types::PyType>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
        import_json(cls.py(), json_text(text)?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Message(id={}, role={}, content={}, source={})",
            self.id.bind(py).repr()?,
            self.role.bind(py).repr()?,
            self.content.bind(py).repr()?,
            self.source.bind(py).repr()?
        ))
    }

    fn __richcmp__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>, op: CompareOp) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let Ok(other) = other.cast::<Message>() else {
            return Ok(py.NotImplemented().into_bound(py));
        };
        let equal = match op {
            CompareOp::Eq | CompareOp::Ne => {
                let (a, b) = (slf.get(), other.get());
                slf.is(other)
                    || (a.id.bind(py).as_any().eq(b.id.bind(py))?
                        && a.role.bind(py).as_any().eq(b.role.bind(py))?
                        && a.source.bind(py).as_any().eq(b.source.bind(py))?
                        && a.content.bind(py).as_any().eq(b.content.bind(py))?)
            }
            _ => return Ok(py.NotImplemented().into_bound(py)),
        };
        let result = if matches!(op, CompareOp::Eq) { equal } else { !equal };
        Ok(PyBool::new(py, result).to_owned().into_any())
    }

    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        if let Some(hash) = self.hash.get() {
            return Ok(*hash);
        }
        let fields = PyTuple::new(
            py,
            [
                self.id.bind(py).as_any(),
                self.role.bind(py).as_any(),
                self.content.bind(py).as_any(),
                self.source.bind(py).as_any(),
            ],
        )?;
        let hash = fields.hash()?;
        Ok(*self.hash.get_or_init(|| hash))
    }

    fn __copy__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __deepcopy__<'py>(slf: Bound<'py, Self>, _memo: &Bound<'py, PyAny>) -> Bound<'py, Self> {
        slf
    }

    /// Pickles as an import of the same identity.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let function = freeze_message_function(py)?;
        PyTuple::new(py, [function.clone(), PyTuple::new(py, [self.as_dict(py)])?.into_any()])
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Message>()?;
    Ok(())
}
