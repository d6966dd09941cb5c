//! The fold of a run of natively vouched message appends into a surface's Python state, for
//! `Surface.fold_appends` (`python/dshkit/session/surface.py`), which holds the rule and
//! delegates here.
//!
//! `decode_records` (`records.rs`) and `vouch_new_append` (`message_vouch.rs`) proved every
//! append rule that does not depend on the log; what is left is stateful: the message id not
//! logged before, and tool calls answered before the conversation moves on. Each append of the
//! run is checked against those and folded in turn, on the very dicts and lists `Surface` holds,
//! reusing the objects given (the seq ints, the call id strings, the `Message`s): per append only
//! the position int and, for a call, its pair are new. At the first append breaking a rule
//! nothing of that append has been touched; its index is returned for the caller to take it the
//! full way, which names the rule.

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

use crate::value::message::Message;

/// `seqs` or `tags`: a list or a tuple, read by index.
enum Items<'py> {
    List(Bound<'py, PyList>),
    Tuple(Bound<'py, PyTuple>),
}

impl<'py> Items<'py> {
    fn new(name: &str, value: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = value.cast::<PyList>() {
            Ok(Items::List(list.clone()))
        } else if let Ok(tuple) = value.cast::<PyTuple>() {
            Ok(Items::Tuple(tuple.clone()))
        } else {
            Err(PyTypeError::new_err(format!("{name} must be a list or a tuple, not {}", type_name(value))))
        }
    }

    fn len(&self) -> usize {
        match self {
            Items::List(list) => list.len(),
            Items::Tuple(tuple) => tuple.len(),
        }
    }

    fn get(&self, index: usize) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Items::List(list) => list.get_item(index),
            Items::Tuple(tuple) => tuple.get_item(index),
        }
    }
}

/// `messages`: a list indexed by seq (`decode_records`) or a dict keyed by seq (`fold_new`).
enum BySeq<'py> {
    List(Bound<'py, PyList>),
    Dict(Bound<'py, PyDict>),
}

impl<'py> BySeq<'py> {
    fn new(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(list) = value.cast::<PyList>() {
            Ok(BySeq::List(list.clone()))
        } else if let Ok(dict) = value.cast::<PyDict>() {
            Ok(BySeq::Dict(dict.clone()))
        } else {
            Err(PyTypeError::new_err(format!("messages must be a list indexed by seq or a dict keyed by seq, not {}", type_name(value))))
        }
    }

    fn message(&self, seq_value: &Bound<'py, PyAny>, seq: usize) -> PyResult<Bound<'py, Message>> {
        let message = match self {
            BySeq::List(list) => {
                list.get_item(seq).map_err(|_| PyIndexError::new_err(format!("messages has no item {seq} (seq {seq})")))?
            }
            BySeq::Dict(dict) => dict.get_item(seq_value)?.ok_or_else(|| PyKeyError::new_err(seq))?,
        };
        match message.cast_into::<Message>() {
            Ok(message) => Ok(message),
            Err(error) => Err(PyTypeError::new_err(format!(
                "messages[{seq}] must be a Message, not {}",
                type_name(&error.into_inner())
            ))),
        }
    }
}

fn dict<'a, 'py>(name: &str, value: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyDict>> {
    value.cast::<PyDict>().map_err(|_| PyTypeError::new_err(format!("{name} must be a dict, not {}", type_name(value))))
}

fn list<'a, 'py>(name: &str, value: &'a Bound<'py, PyAny>) -> PyResult<&'a Bound<'py, PyList>> {
    value.cast::<PyList>().map_err(|_| PyTypeError::new_err(format!("{name} must be a list, not {}", type_name(value))))
}

fn type_name(value: &Bound<'_, PyAny>) -> String {
    value.get_type().name().map(|name| name.to_string()).unwrap_or_else(|_| "?".to_owned())
}

/// What an append's tag says it does to the surface (see `Append::into_tag`, `message_vouch.rs`).
enum Tag<'py> {
    Node,
    Calls(Bound<'py, PyTuple>),
    Answer(Bound<'py, PyString>),
    Invisible,
}

impl<'py> Tag<'py> {
    fn read(tag: Bound<'py, PyAny>, index: usize) -> PyResult<Self> {
        if tag.is_none() {
            return Ok(Tag::Node);
        }
        if tag.is_exact_instance_of::<PyString>() {
            // SAFETY: checked just above.
            return Ok(Tag::Answer(unsafe { tag.cast_into_unchecked::<PyString>() }));
        }
        if tag.is(&PyBool::new(tag.py(), false)) {
            return Ok(Tag::Invisible);
        }
        if let Ok(calls) = tag.cast::<PyTuple>() {
            if calls.iter().all(|call_id| call_id.is_exact_instance_of::<PyString>()) {
                return Ok(Tag::Calls(calls.clone()));
            }
        }
        Err(PyTypeError::new_err(format!(
            "tags[{index}] must be None, a tuple of call ids (str), a call id (str) or False, not {}",
            tag.repr().map(|repr| repr.to_string()).unwrap_or_else(|_| type_name(&tag))
        )))
    }
}

/// A seq from `seqs`: the int object itself (it becomes the value of `seen`, `node_seqs`) and its value.
fn read_seq<'py>(seqs: &Items<'py>, index: usize) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let value = seqs.get(index)?;
    // SAFETY: `value` is a live object.
    if unsafe { ffi::PyLong_CheckExact(value.as_ptr()) } == 0 {
        return Err(PyTypeError::new_err(format!("seqs[{index}] must be an int, not {}", type_name(&value))));
    }
    let seq = value.extract::<usize>().map_err(|_| PyValueError::new_err(format!("seqs[{index}] is no seq: {value}")))?;
    Ok((value, seq))
}

/// Check and fold `seqs[start:]` (see `Surface.fold_appends`); the index of the first append that
/// breaks a rule, `len(seqs)` if none.
#[pyfunction]
#[pyo3(signature = (seen, nodes, node_seqs, positions, pending, pairs, seqs, tags, messages, start, /))]
#[allow(clippy::too_many_arguments)]
fn fold_vouched_appends<'py>(
    seen: &Bound<'py, PyAny>,
    nodes: &Bound<'py, PyAny>,
    node_seqs: &Bound<'py, PyAny>,
    positions: &Bound<'py, PyAny>,
    pending: &Bound<'py, PyAny>,
    pairs: &Bound<'py, PyAny>,
    seqs: &Bound<'py, PyAny>,
    tags: &Bound<'py, PyAny>,
    messages: &Bound<'py, PyAny>,
    start: &Bound<'py, PyAny>,
) -> PyResult<usize> {
    let py = seen.py();
    let (seen, positions, pending) = (dict("seen", seen)?, dict("positions", positions)?, dict("pending", pending)?);
    let (nodes, node_seqs, pairs) = (list("nodes", nodes)?, list("node_seqs", node_seqs)?, list("pairs", pairs)?);
    let seqs = Items::new("seqs", seqs)?;
    let tags = Items::new("tags", tags)?;
    let messages = BySeq::new(messages)?;
    let start: usize = start
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("start must be an int >= 0, not {}", start.repr().map(|r| r.to_string()).unwrap_or_default())))?;
    let count = seqs.len();
    if tags.len() != count {
        return Err(PyValueError::new_err(format!("seqs and tags differ in length ({count} and {})", tags.len())));
    }
    let none = py.None().into_bound(py);
    for index in start..count {
        let (seq_value, seq) = read_seq(&seqs, index)?;
        let tag = Tag::read(tags.get(index)?, index)?;
        let message = messages.message(&seq_value, seq)?;
        let message_id = message.get().id_ref(py);
        if seen.contains(message_id)? {
            return Ok(index);
        }
        let position = nodes.len().into_pyobject(py)?;
        match tag {
            Tag::Answer(call_id) => {
                let Some(pair_index) = pending.get_item(&call_id)? else { return Ok(index) };
                let pair = pairs.get_item(pair_index.extract::<usize>()?)?;
                let pair = pair.cast::<PyList>().map_err(|_| PyTypeError::new_err(format!("pairs[{pair_index}] must be a list")))?;
                pair.set_item(1, &position)?;
                pending.del_item(&call_id)?;
            }
            _ if !pending.is_empty() => return Ok(index),
            Tag::Invisible => {
                seen.set_item(message_id, &seq_value)?;
                continue;
            }
            Tag::Calls(call_ids) => {
                for call_id in call_ids.iter() {
                    pending.set_item(&call_id, pairs.len())?;
                    pairs.append(PyList::new(py, [position.as_any(), &none, &call_id])?)?;
                }
            }
            Tag::Node => {}
        }
        seen.set_item(message_id, &seq_value)?;
        positions.set_item(message_id, &position)?;
        nodes.append(&message)?;
        node_seqs.append(&seq_value)?;
    }
    Ok(count)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fold_vouched_appends, m)?)?;
    Ok(())
}
