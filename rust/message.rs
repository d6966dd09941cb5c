//! `Message`: the identified, immutable message value, and the only ways to get one.
//!
//! Creation (`create_*`) mints an id; import (`freeze_message`) keeps an existing one. Both
//! detach and deep-freeze, then check the content blocks and source that dshkit knows; unknown
//! block types and source kinds pass through frozen and unchanged.

use std::sync::OnceLock;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pyclass::CompareOp;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyAny, PyBool, PyDict, PyList, PyString, PyTuple};

use crate::errors::PathError;
use crate::freeze::{freeze_at, freeze_below};
use crate::walk::{is_mapping, type_name, untrack, Walk};
use crate::frozendict::FrozenDict;
use crate::ids;
use crate::json::{json_bytes, json_str, json_text, with_buffer, write_frozen_dict, write_frozen_tuple, write_value};
use crate::json_leaves::write_str_ptr;
use crate::json_parse::{parse_fields, TopLevel};

const FIELDS: [&str; 4] = ["id", "role", "content", "source"];
const PLUGIN_FORMS: [&str; 6] = ["instructions", "catalog", "snapshot", "notice", "relay", "recall"];

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
// Validation of frozen parts

/// The value under `key` when it is a `str`; a clear error when missing or of another type.
fn required_str<'py>(block: &Bound<'py, FrozenDict>, key: &str, what: &str) -> Result<Bound<'py, PyAny>, PathError> {
    let py = block.py();
    match block.get().get_str(py, key) {
        None => Err(PathError::value_error(format!("{what} is missing the str field '{key}'"))),
        Some(value) if value.is_instance_of::<PyString>() => Ok(value),
        Some(value) => Err(PathError::type_error(format!("must be str, not {}", type_name(&value))).at_key(key)),
    }
}

fn optional_str(block: &Bound<'_, FrozenDict>, key: &str) -> Result<bool, PathError> {
    let py = block.py();
    match block.get().get_str(py, key) {
        None => Ok(false),
        Some(value) if value.is_instance_of::<PyString>() => Ok(true),
        Some(value) => Err(PathError::type_error(format!("must be str, not {}", type_name(&value))).at_key(key)),
    }
}

fn validate_block(block: &Bound<'_, PyAny>) -> Result<(), PathError> {
    let py = block.py();
    let block = block.cast::<FrozenDict>().map_err(|_| {
        PathError::type_error(format!("a content block must be a mapping, not {}", type_name(block)))
    })?;
    let kind = required_str(block, "type", "a content block")?;
    let kind = kind.cast::<PyString>().map_err(|_| PathError::type_error("type must be str"))?;
    match kind.to_str().unwrap_or("") {
        "text" => {
            required_str(block, "text", "a 'text' block")?;
        }
        "reasoning" => {
            required_str(block, "text", "a 'reasoning' block")?;
        }
        "image" => {
            let has_url = optional_str(block, "url")?;
            let has_data = optional_str(block, "data")?;
            let has_media_type = optional_str(block, "media_type")?;
            if !(has_url || (has_data && has_media_type)) {
                return Err(PathError::value_error(
                    "an 'image' block needs either 'url' or both 'media_type' and 'data' (base64)",
                ));
            }
        }
        "tool_call" => {
            required_str(block, "id", "a 'tool_call' block")?;
            required_str(block, "name", "a 'tool_call' block")?;
            required_str(block, "arguments", "a 'tool_call' block (raw JSON text)")?;
        }
        "tool_result" => {
            required_str(block, "tool_call_id", "a 'tool_result' block")?;
            match block.get().get_str(py, "is_error") {
                None => return Err(PathError::value_error("a 'tool_result' block is missing the bool field 'is_error'")),
                Some(flag) if flag.is_instance_of::<PyBool>() => {}
                Some(flag) => {
                    return Err(PathError::type_error(format!("must be bool, not {}", type_name(&flag))).at_key("is_error"))
                }
            }
            match block.get().get_str(py, "content") {
                None => return Err(PathError::value_error("a 'tool_result' block is missing its 'content' blocks")),
                Some(inner) => {
                    let inner = inner.cast::<PyTuple>().map_err(|_| {
                        PathError::type_error(format!("must be a sequence of content blocks, not {}", type_name(&inner)))
                            .at_key("content")
                    })?;
                    validate_blocks(inner).map_err(|e| e.at_key("content"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn validate_blocks(blocks: &Bound<'_, PyTuple>) -> Result<(), PathError> {
    for (i, block) in blocks.iter().enumerate() {
        validate_block(&block).map_err(|e| e.at_index(i))?;
    }
    Ok(())
}

fn text_block<'py>(py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // A str subclass keeps its characters only (its __str__ may say something else).
    let text = crate::freeze::freeze_at(text, "content")?;
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "type"), intern!(py, "text"))?;
    dict.set_item(intern!(py, "text"), text)?;
    Ok(FrozenDict::wrap(py, dict, 1).into_any())
}

/// Frozen content blocks and the nesting depth of their tuple.
pub(crate) struct Content<'py> {
    blocks: Bound<'py, PyTuple>,
    depth: usize,
}

/// Content given as a `str` (one text block) or a sequence of block mappings, frozen
/// `outer_levels` below the top of the message's JSON object.
fn freeze_content<'py>(
    py: Python<'py>,
    content: &Bound<'py, PyAny>,
    root: &str,
    outer_levels: usize,
) -> PyResult<Content<'py>> {
    if content.is_instance_of::<PyString>() {
        let blocks = PyTuple::new(py, [text_block(py, content)?])?;
        untrack(blocks.as_any());
        return Ok(Content { blocks, depth: 2 });
    }
    if !(content.is_instance_of::<PyTuple>() || content.is_instance_of::<PyList>()) {
        return Err(PyTypeError::new_err(format!(
            "{root}: must be a str or a sequence of content blocks, not {}",
            type_name(content)
        )));
    }
    let frozen = freeze_below(content, root, outer_levels)?;
    let blocks = frozen.value.cast_into::<PyTuple>()?;
    validate_blocks(&blocks).map_err(|e| e.into_pyerr(root))?;
    Ok(Content { blocks, depth: frozen.depth })
}

fn validate_source(source: &Bound<'_, FrozenDict>) -> Result<(), PathError> {
    let kind = required_str(source, "kind", "a message source")?;
    let kind = kind.cast::<PyString>().map_err(|_| PathError::type_error("kind must be str"))?;
    match kind.to_str().unwrap_or("") {
        "plugin" => {
            required_str(source, "plugin", "a 'plugin' source")?;
            let py = source.py();
            if let Some(form) = source.get().get_str(py, "form") {
                let known = form.cast::<PyString>().ok().and_then(|f| f.to_str().ok().map(|f| PLUGIN_FORMS.contains(&f)));
                if known != Some(true) {
                    return Err(PathError::value_error(format!(
                        "must be one of {}, not {}",
                        PLUGIN_FORMS.join(", "),
                        form.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                    .at_key("form"));
                }
            }
        }
        "model" => {
            required_str(source, "provider", "a 'model' source")?;
            required_str(source, "model", "a 'model' source")?;
        }
        "tool" => {
            required_str(source, "call_id", "a 'tool' source")?;
        }
        _ => {}
    }
    Ok(())
}

fn freeze_source<'py>(source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, FrozenDict>> {
    if !(source.is_instance_of::<FrozenDict>() || source.is_instance_of::<PyDict>() || is_mapping(source)) {
        return Err(PyTypeError::new_err(format!(
            "source: must be a mapping with a str 'kind', not {}",
            type_name(source)
        )));
    }
    let frozen = freeze_below(source, "source", 1)?.value.cast_into::<FrozenDict>()?;
    validate_source(&frozen).map_err(|e| e.into_pyerr("source"))?;
    Ok(frozen)
}

fn check_role<'py>(py: Python<'py>, role: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let text = role
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("role: must be str, not {}", type_name(role))))?;
    Ok(match text.to_str()? {
        "system" => intern!(py, "system").clone(),
        "user" => intern!(py, "user").clone(),
        "assistant" => intern!(py, "assistant").clone(),
        other => {
            return Err(PyValueError::new_err(format!(
                "role: must be 'system', 'user' or 'assistant', not {other:?}"
            )))
        }
    })
}

fn minted_id(py: Python<'_>) -> PyResult<Bound<'_, PyString>> {
    ids::new_message_id(py)
}

// ---------------------------------------------------------------------------------------------
// Construction

impl Message {
    fn build<'py>(
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
    let source = PyDict::new(py);
    source.set_item(intern!(py, "kind"), intern!(py, "model"))?;
    source.set_item(intern!(py, "provider"), provider)?;
    source.set_item(intern!(py, "model"), model)?;
    if let Some(state) = replay_state {
        if !state.is_none() {
            source.set_item(intern!(py, "replay_state"), freeze_below(state, "replay_state", 2)?.value)?;
        }
    }
    let source = freeze_source(source.as_any())?;
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
    if text.to_str().map(|t| t.is_empty()).unwrap_or(false) || text.len()? == 0 {
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
fn import_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, Message>> {
    let (fields, unknown) = match parse_fields(py, text, &FIELDS)? {
        TopLevel::Object { fields, unknown } => (fields, unknown),
        TopLevel::Other(value) => {
            return Err(PyValueError::new_err(format!(
                "Message.from_json() needs a JSON object, got {}",
                type_name(&value)
            )))
        }
    };
    if let Some(key) = unknown {
        return Err(PyTypeError::new_err(format!(
            "freeze_message(): unknown key {} (a message has exactly id, role, content and source)",
            key.repr()?
        )));
    }
    let [id, role, content, source] = fields;
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

fn freeze_message_function(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static FUNCTION: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    FUNCTION
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("dshkit._core")?.getattr("freeze_message")?.unbind()))
        .map(|f| f.bind(py))
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
    m.add_function(wrap_pyfunction!(create_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_user_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_assistant_message, m)?)?;
    m.add_function(wrap_pyfunction!(create_tool_result_message, m)?)?;
    m.add_function(wrap_pyfunction!(freeze_message, m)?)?;
    Ok(())
}
