//! The only ways to get a `Message`: `create_*` mint an id, `freeze_message` and
//! `Message.from_json` keep an existing one. Each detaches and deep-freezes its input, then
//! checks content, source and role with the rules of `content.rs`.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyBool, PyDict, PyString, PyTuple};

use crate::json::read::fields::{parse_fields, Fields, TopLevel};
use crate::json::read::recent::RECENT_SOURCES;
use crate::message::content::{check_role, freeze_content, freeze_source, minted_id, validate_blocks, validate_source};
use crate::message::model_source;
use crate::value::freeze::{freeze_at, freeze_below};
use crate::value::frozendict::FrozenDict;
use crate::value::message::Content;
use crate::value::message::Message;
use crate::value::strs::text_of;
use crate::value::walk::{is_mapping, type_name, untrack};

/// The keys of a message's JSON object, in the order of `Fields::values` for `message_from_fields`.
pub(crate) const FIELDS: [&str; 4] = ["id", "role", "content", "source"];
/// `FIELDS`' slot of `source`, whose objects repeat from message to message: the readers of
/// messages take them from `RECENT_SOURCES` (`json/read/recent.rs`).
pub(crate) const SOURCE: usize = 3;

/// Refuse keyword arguments a creation helper does not take, pointing identity imports to
/// `freeze_message`.
fn reject_extra(function: &str, kwargs: Option<&Bound<'_, PyDict>>, fixed: &[(&str, &str)]) -> PyResult<()> {
    let Some(kwargs) = kwargs else { return Ok(()) };
    for key in kwargs.keys() {
        let key = key.to_string();
        if key == "id" {
            return Err(PyTypeError::new_err(format!(
                "{function}() does not accept an id: creating a message mints a new one. \
                 To import a message whose identity already exists, use freeze_message()."
            )));
        }
        if let Some((_, fixed_to)) = fixed.iter().find(|(name, _)| *name == key) {
            return Err(PyTypeError::new_err(format!(
                "{function}() fixes {fixed_to} and does not accept {key}=; use create_message() for a \
                 new message of another kind, or freeze_message() to import an existing message"
            )));
        }
        return Err(PyTypeError::new_err(format!("{function}() got an unexpected keyword argument '{key}'")));
    }
    Ok(())
}

fn required<'a, 'py>(function: &str, name: &str, value: Option<&'a Bound<'py, PyAny>>) -> PyResult<&'a Bound<'py, PyAny>> {
    value.ok_or_else(|| PyTypeError::new_err(format!("{function}() missing required keyword argument: '{name}'")))
}

/// Mint an id, detach and deep-freeze: a new message of any role.
#[pyfunction]
#[pyo3(signature = (*, role=None, content=None, source=None, **kwargs), text_signature = "(*, role, content, source)")]
pub(crate) fn create_message<'py>(
    py: Python<'py>,
    role: Option<&Bound<'py, PyAny>>,
    content: Option<&Bound<'py, PyAny>>,
    source: Option<&Bound<'py, PyAny>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, Message>> {
    reject_extra("create_message", kwargs, &[])?;
    let role = check_role(py, required("create_message", "role", role)?)?;
    let content = freeze_content(py, required("create_message", "content", content)?, "content", 1)?;
    let source = freeze_source(required("create_message", "source", source)?)?;
    Message::build(py, minted_id(py)?, role, content, source)
}

/// A new user-role message (a prompt, or context a plugin produced: see `source`).
#[pyfunction]
#[pyo3(signature = (content, *, source=None, **kwargs), text_signature = "(content, *, source)")]
pub(crate) fn create_user_message<'py>(
    py: Python<'py>,
    content: &Bound<'py, PyAny>,
    source: Option<&Bound<'py, PyAny>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, Message>> {
    reject_extra("create_user_message", kwargs, &[("role", "the role to 'user'")])?;
    let source = freeze_source(required("create_user_message", "source", source)?)?;
    let content = freeze_content(py, content, "content", 1)?;
    Message::build(py, minted_id(py)?, intern!(py, "user").clone(), content, source)
}

/// A new assistant message; its source is `{"kind": "model", "provider", "model", "replay_state"?}`.
#[pyfunction]
#[pyo3(signature = (content, *, provider=None, model=None, replay_state=None, **kwargs), text_signature = "(content, *, provider, model, replay_state=None)")]
pub(crate) fn create_assistant_message<'py>(
    py: Python<'py>,
    content: &Bound<'py, PyAny>,
    provider: Option<&Bound<'py, PyAny>>,
    model: Option<&Bound<'py, PyAny>>,
    replay_state: Option<&Bound<'py, PyAny>>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, Message>> {
    reject_extra(
        "create_assistant_message",
        kwargs,
        &[
            ("role", "the role to 'assistant'"),
            ("source", "the source kind to 'model' (built from provider, model and replay_state)"),
            ("kind", "the source kind to 'model'"),
        ],
    )?;
    let provider = required("create_assistant_message", "provider", provider)?;
    let model = required("create_assistant_message", "model", model)?;
    let content = freeze_content(py, content, "content", 1)?;
    let replay_state = replay_state.filter(|state| !state.is_none());
    let shared = if replay_state.is_none() { model_source::reuse(provider, model) } else { None };
    let source = match shared {
        Some(source) => source,
        None => {
            let source = PyDict::new(py);
            source.set_item(intern!(py, "kind"), intern!(py, "model"))?;
            source.set_item(intern!(py, "provider"), provider)?;
            source.set_item(intern!(py, "model"), model)?;
            if let Some(state) = replay_state {
                source.set_item(intern!(py, "replay_state"), freeze_below(state, "replay_state", 2)?.value)?;
            }
            let source = freeze_source(source.as_any())?;
            if replay_state.is_none() {
                model_source::remember(provider, model, &source);
            }
            source
        }
    };
    Message::build(py, minted_id(py)?, intern!(py, "assistant").clone(), content, source)
}

/// A new user-role message holding exactly one `tool_result` block for `call_id`.
#[pyfunction]
#[pyo3(signature = (call_id, content, **kwargs), text_signature = "(call_id, content, *, is_error=False)")]
pub(crate) fn create_tool_result_message<'py>(
    py: Python<'py>,
    call_id: &Bound<'py, PyAny>,
    content: &Bound<'py, PyAny>,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, Message>> {
    // `is_error` is read from the keywords so that an explicit None is refused, not defaulted.
    let kwargs = kwargs.map(|k| k.copy()).transpose()?;
    let is_error = match &kwargs {
        Some(k) => {
            let flag = k.get_item(intern!(py, "is_error"))?;
            k.del_item(intern!(py, "is_error")).ok();
            flag
        }
        None => None,
    }
    .unwrap_or_else(|| PyBool::new(py, false).to_owned().into_any());
    let is_error = &is_error;
    reject_extra(
        "create_tool_result_message",
        kwargs.as_ref(),
        &[
            ("role", "the role to 'user'"),
            ("source", "the source to {'kind': 'tool', 'call_id': call_id}"),
        ],
    )?;
    let call_id = call_id
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("call_id: must be str, not {}", type_name(call_id))))?;
    if call_id.to_str()?.is_empty() {
        return Err(PyValueError::new_err("call_id: must not be empty"));
    }
    let call_id = freeze_at(call_id.as_any(), "call_id")?;
    if !is_error.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("is_error: must be bool, not {}", type_name(is_error))));
    }
    // message > content tuple > tool_result block > its content tuple
    let inner = freeze_content(py, content, "content", 3)?;
    let content_depth = inner.depth + 2;
    let block = PyDict::new(py);
    block.set_item(intern!(py, "type"), intern!(py, "tool_result"))?;
    block.set_item(intern!(py, "tool_call_id"), &call_id)?;
    block.set_item(intern!(py, "content"), inner.blocks)?;
    block.set_item(intern!(py, "is_error"), is_error)?;
    let source = PyDict::new(py);
    source.set_item(intern!(py, "kind"), intern!(py, "tool"))?;
    source.set_item(intern!(py, "call_id"), &call_id)?;
    let blocks = PyTuple::new(py, [FrozenDict::wrap(py, block, content_depth - 1)])?;
    untrack(blocks.as_any());
    let content = Content { blocks, depth: content_depth };
    let source = FrozenDict::wrap(py, source, 1);
    Message::build(py, minted_id(py)?, intern!(py, "user").clone(), content, source)
}

fn imported_id<'py>(id: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyString>> {
    let id = id.ok_or_else(|| {
        PyValueError::new_err("id: the message has no id (freeze_message imports an existing identity; use create_message() to create a new message)")
    })?;
    let text = id
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("id: must be a non-empty str, not {}", type_name(&id))))?;
    if text_of(&text).is_some_and(str::is_empty) || text.len()? == 0 {
        return Err(PyValueError::new_err("id: must be a non-empty str"));
    }
    Ok(freeze_at(text.as_any(), "id")?.cast_into::<PyString>()?)
}

/// Import a mapping with exactly `id`, `role`, `content`, `source`.
fn import_mapping<'py>(py: Python<'py>, mapping: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
    let pairs: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)> = match mapping.cast::<FrozenDict>() {
        Ok(frozen) => frozen.get().iter(py).map(|(key, value)| (key.to_owned(), value.to_owned())).collect(),
        Err(_) => match mapping.cast::<PyDict>() {
            Ok(dict) => dict.iter().collect(),
            Err(_) => {
                let dict = PyDict::new(py);
                dict.call_method1("update", (mapping,))?;
                dict.iter().collect()
            }
        },
    };
    // id, role, content, source: in the order of FIELDS.
    let mut fields: [Option<Bound<'py, PyAny>>; 4] = [None, None, None, None];
    for (key, value) in pairs {
        let slot = key.cast::<PyString>().ok().and_then(|k| k.to_str().ok().and_then(|k| FIELDS.iter().position(|f| *f == k)));
        match slot {
            Some(slot) => fields[slot] = Some(value),
            None => {
                return Err(PyTypeError::new_err(format!(
                    "freeze_message(): unknown key {} (a message has exactly id, role, content and source)",
                    key.repr()?
                )))
            }
        }
    }
    let [id, role, content, source] = fields;
    let missing = |name: &str| PyValueError::new_err(format!("{name}: the message has no {name}"));
    let id = imported_id(id)?;
    let role = check_role(py, &role.ok_or_else(|| missing("role"))?)?;
    let content = freeze_content(py, &content.ok_or_else(|| missing("content"))?, "content", 1)?;
    let source = freeze_source(&source.ok_or_else(|| missing("source"))?)?;
    Message::build(py, id, role, content, source)
}

/// Import a message from JSON text in one pass: the parser hands over the values of the four
/// fields, already frozen, and only the checks `import_mapping` makes remain (with the same
/// errors, in the same order); no top-level mapping is built and nothing is walked again.
pub(crate) fn import_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, Message>> {
    let mut recent = RECENT_SOURCES.try_lock().ok();
    match parse_fields(py, text, &FIELDS, recent.as_deref_mut().map(|objects| (SOURCE, objects)))? {
        TopLevel::Object(fields) => message_from_fields(py, fields),
        TopLevel::Other(value) => Err(PyValueError::new_err(format!(
            "Message.from_json() needs a JSON object, got {}",
            type_name(&value)
        ))),
    }
}

/// The `Message` of a JSON object read with `FIELDS` (`Parser::object_fields`): the
/// checks of `import_mapping` on values the parser already froze, with the same errors.
pub(crate) fn message_from_fields<'py>(py: Python<'py>, fields: Fields<'py, 4>) -> PyResult<Bound<'py, Message>> {
    if let Some(key) = fields.unknown {
        return Err(PyTypeError::new_err(format!(
            "freeze_message(): unknown key {} (a message has exactly id, role, content and source)",
            key.repr()?
        )));
    }
    let [id, role, content, source] = fields.values;
    let missing = |name: &str| PyValueError::new_err(format!("{name}: the message has no {name}"));
    let id = imported_id(id.map(|(value, _)| value))?;
    let role = check_role(py, &role.ok_or_else(|| missing("role"))?.0)?;
    let (content, content_depth) = content.ok_or_else(|| missing("content"))?;
    let content = match content.cast_into::<PyTuple>() {
        Ok(blocks) => {
            validate_blocks(&blocks).map_err(|e| e.into_pyerr("content"))?;
            Content { blocks, depth: content_depth }
        }
        // A str, or a value of the wrong type that `freeze_content` names.
        Err(other) => freeze_content(py, &other.into_inner(), "content", 1)?,
    };
    let (source, _) = source.ok_or_else(|| missing("source"))?;
    let source = match source.cast_into::<FrozenDict>() {
        Ok(source) => {
            validate_source(&source).map_err(|e| e.into_pyerr("source"))?;
            source
        }
        Err(other) => freeze_source(&other.into_inner())?,
    };
    Message::build(py, id, role, content, source)
}

/// Import boundary: a `Message` is returned as it is (already frozen); a mapping with `id`,
/// `role`, `content` and `source` becomes a frozen, detached `Message` with exactly that id.
#[pyfunction]
#[pyo3(signature = (message, /))]
pub(crate) fn freeze_message<'py>(message: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Message>> {
    let py = message.py();
    if let Ok(existing) = message.cast::<Message>() {
        return Ok(existing.clone());
    }
    if message.is_instance_of::<FrozenDict>() || message.is_instance_of::<PyDict>() || is_mapping(message) {
        return import_mapping(py, message);
    }
    Err(PyTypeError::new_err(format!(
        "freeze_message() takes a Message or a mapping with id, role, content and source, not {}",
        type_name(message)
    )))
}

pub(crate) fn freeze_message_function(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static FUNCTION: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    FUNCTION
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("dshkit._core")?.getattr("freeze_message")?.unbind()))
        .map(|f| f.bind(py))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(create_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_user_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_assistant_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_tool_result_message, m)?)?;
    m.add_function(wrap_pyfunction!(freeze_message, m)?)?;
    Ok(())
}
