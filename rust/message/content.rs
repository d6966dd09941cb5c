//! The content blocks, sources and roles dshkit knows: each checked once, on frozen values.
//!
//! Unknown block types and source kinds pass through frozen and unchanged; the known ones must
//! have the fields they are read by. Used by creation and import (`creation.rs`) alike.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBool, PyDict, PyList, PyString, PyTuple};

use crate::value::errors::PathError;
use crate::value::freeze::freeze_below;
use crate::value::frozendict::FrozenDict;
use crate::value::ids;
use crate::value::message::Content;
use crate::value::strs::text_of;
use crate::value::walk::{is_mapping, type_name, untrack};

const PLUGIN_FORMS: [&str; 6] = ["instructions", "catalog", "snapshot", "notice", "relay", "recall"];

// ---------------------------------------------------------------------------------------------
// Validation of frozen parts

/// The value under `key` when it is a `str`; a clear error when missing or of another type.
#[inline(always)]
fn required_str<'py>(block: &Bound<'py, FrozenDict>, key: &str, what: &str) -> Result<Bound<'py, PyAny>, PathError> {
    let py = block.py();
    match block.get().get_str(py, key) {
        None => Err(PathError::value_error(format!("{what} is missing the str field '{key}'"))),
        Some(value) if value.is_instance_of::<PyString>() => Ok(value),
        Some(value) => Err(PathError::type_error(format!("must be str, not {}", type_name(&value))).at_key(key)),
    }
}

#[inline(always)]
fn optional_str(block: &Bound<'_, FrozenDict>, key: &str) -> Result<bool, PathError> {
    let py = block.py();
    match block.get().get_str(py, key) {
        None => Ok(false),
        Some(value) if value.is_instance_of::<PyString>() => Ok(true),
        Some(value) => Err(PathError::type_error(format!("must be str, not {}", type_name(&value))).at_key(key)),
    }
}

/// Whether the block refers to stored bytes: an `attachment` mapping with a content address
/// `id` ("sha256:" and 64 lowercase hex digits) and a str `media_type`.
fn optional_attachment(block: &Bound<'_, FrozenDict>) -> Result<bool, PathError> {
    let py = block.py();
    let Some(attachment) = block.get().get_str(py, "attachment") else { return Ok(false) };
    let attachment = attachment.cast::<FrozenDict>().map_err(|_| {
        PathError::type_error(format!("must be a mapping, not {}", type_name(&attachment))).at_key("attachment")
    })?;
    let id = required_str(attachment, "id", "an attachment").map_err(|e| e.at_key("attachment"))?;
    let id = id.cast::<PyString>().map_err(|_| PathError::type_error("id must be str"))?;
    let text = text_of(&id).unwrap_or("");
    let hex = text.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(PathError::value_error(format!(
            "must be 'sha256:' and 64 lowercase hex digits, not {text:?}"
        ))
        .at_key("id")
        .at_key("attachment"));
    }
    required_str(attachment, "media_type", "an attachment").map_err(|e| e.at_key("attachment"))?;
    Ok(true)
}

pub(crate) fn validate_block(block: &Bound<'_, PyAny>) -> Result<(), PathError> {
    let py = block.py();
    let block = block.cast::<FrozenDict>().map_err(|_| {
        PathError::type_error(format!("a content block must be a mapping, not {}", type_name(block)))
    })?;
    let kind = required_str(block, "type", "a content block")?;
    let kind = kind.cast::<PyString>().map_err(|_| PathError::type_error("type must be str"))?;
    match text_of(&kind).unwrap_or("") {
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
            let has_attachment = optional_attachment(block)?;
            if !(has_url || (has_data && has_media_type) || has_attachment) {
                return Err(PathError::value_error(
                    "an 'image' block needs 'url', both 'media_type' and 'data' (base64), or an 'attachment'",
                ));
            }
        }
        "file" => {
            let has_data = optional_str(block, "data")?;
            let has_media_type = optional_str(block, "media_type")?;
            if !((has_data && has_media_type) || optional_attachment(block)?) {
                return Err(PathError::value_error(
                    "a 'file' block needs both 'media_type' and 'data' (base64), or an 'attachment'",
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

pub(crate) fn validate_blocks(blocks: &Bound<'_, PyTuple>) -> Result<(), PathError> {
    for (i, block) in blocks.iter().enumerate() {
        validate_block(&block).map_err(|e| e.at_index(i))?;
    }
    Ok(())
}

pub(crate) fn text_block<'py>(py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    // A str subclass keeps its characters only (its __str__ may say something else).
    let text = crate::value::freeze::freeze_at(text, "content")?;
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "type"), intern!(py, "text"))?;
    dict.set_item(intern!(py, "text"), text)?;
    Ok(FrozenDict::wrap(py, dict, 1).into_any())
}

/// Content given as a `str` (one text block) or a sequence of block mappings, frozen
/// `outer_levels` below the top of the message's JSON object.
pub(crate) fn freeze_content<'py>(
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

pub(crate) fn validate_source(source: &Bound<'_, FrozenDict>) -> Result<(), PathError> {
    let kind = required_str(source, "kind", "a message source")?;
    let kind = kind.cast::<PyString>().map_err(|_| PathError::type_error("kind must be str"))?;
    match text_of(&kind).unwrap_or("") {
        "plugin" => {
            required_str(source, "plugin", "a 'plugin' source")?;
            let py = source.py();
            if let Some(form) = source.get().get_str(py, "form") {
                let known = form.cast::<PyString>().ok().and_then(|f| text_of(f).map(|f| PLUGIN_FORMS.contains(&f)));
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

pub(crate) fn freeze_source<'py>(source: &Bound<'py, PyAny>) -> PyResult<Bound<'py, FrozenDict>> {
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

pub(crate) fn check_role<'py>(py: Python<'py>, role: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let text = role
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("role: must be str, not {}", type_name(role))))?;
    let role_text = match text_of(&text) {
        Some(role_text) => role_text,
        None => text.to_str()?, // no UTF-8 form: the error says why
    };
    Ok(match role_text {
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

pub(crate) fn minted_id(py: Python<'_>) -> PyResult<Bound<'_, PyString>> {
    ids::new_message_id(py)
}

