//! `Message`'s Python methods: its fields, JSON form, equality, hashing and pickling. The type
//! itself is `value/message.rs`; the ways to get one are in `creation.rs`; the content rules in
//! `content.rs`.

use std::sync::atomic::Ordering;

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::types::{PyAny, PyBool, PyDict, PyString, PyTuple};

use crate::json::text::json_text;
use crate::json::write::tree::{json_bytes, json_str, with_buffer};
use crate::message::content::freeze_content;
use crate::message::creation::{freeze_message_function, import_json};
use crate::value::frozendict::FrozenDict;
use crate::value::message::{Message, UNHASHED};

impl Message {
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
        crate::value::freeze::thaw(self.as_dict(py).as_any())
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
        let known = self.hash.load(Ordering::Relaxed);
        if known != UNHASHED {
            return Ok(known);
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
        self.hash.store(hash, Ordering::Relaxed); // any thread computes the same value
        Ok(hash)
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
