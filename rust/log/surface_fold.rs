//! A surface's state (`SurfaceState`), which `Surface` (`python/dshkit/session/surface.py`)
//! holds, and the fold of a run of natively vouched message appends into it, for
//! `Surface.fold_appends`, which holds the rule and delegates here.
//!
//! `decode_records` (`records.rs`) and `vouch_new_append` (`message_vouch.rs`) proved every
//! append rule that does not depend on the log; what is left is stateful: the message id not
//! logged before, and tool calls answered before the conversation moves on. Each append of the
//! run is checked against those and folded in turn, on the state's own dicts and lists,
//! reusing the objects given (the seq ints, the call id strings, the `Message`s): per append only
//! the position int and, for a call, its pair are new. At the first append breaking a rule
//! nothing of that append has been touched; its index is returned for the caller to take it the
//! full way, which names the rule.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyString, PyTuple};

use crate::value::message::Message;
use crate::value::walk::untrack;

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

/// Logs `id` as first seen at `seq` unless it was logged before: whether it is new (one lookup,
/// where `contains` and then a set would take two).
fn newly_seen(seen: &Bound<'_, PyDict>, id: &Bound<'_, PyString>, seq: &Bound<'_, PyAny>) -> PyResult<bool> {
    let before = seen.len();
    // SAFETY: three live objects; the result is borrowed and not kept.
    if unsafe { ffi::PyDict_SetDefault(seen.as_ptr(), id.as_ptr(), seq.as_ptr()) }.is_null() {
        return Err(PyErr::fetch(seen.py()));
    }
    Ok(seen.len() > before)
}

/// The state a surface folds into, owned here and held by `Surface` (`surface.py`): every message
/// id ever logged (`seen`: id -> seq of its first event), the nodes and the seqs of the events
/// that put them there, each node's position by id, and the pairing of tool calls with their
/// results (`pairs`: `(call position, result position or None, call id)`; `pending`: call id ->
/// index into `pairs`, for calls without a result). The pairing is rebuilt lazily after a
/// replace: `paired` says whether it is current. The positions by id are built when first
/// looked up (`positions_current`): opening a log folds every message, and most opens never
/// look one up by id. `Surface` reads and edits these containers in Python; the native fold of
/// vouched appends edits them through `fold_appends`.
// Frozen: the containers are read as struct members, as fast as a Python class's slots (the
// append path reads them on every append); the things that change are behind a lock and atomics.
#[pyclass(frozen, module = "dshkit._core", name = "SurfaceState")]
pub(crate) struct SurfaceState {
    /// Every message id ever logged -> the seq of its first event.
    #[pyo3(get)]
    seen: Py<PyDict>,
    /// The nodes on the surface, in order (a replace sets a new list: histories share the old one).
    nodes: Mutex<Py<PyList>>,
    /// The seq of the event that put each node on the surface.
    #[pyo3(get)]
    node_seqs: Py<PyList>,
    /// Message id -> position, for the nodes on the surface, while `positions_current`.
    #[pyo3(get)]
    positions: Py<PyDict>,
    positions_current: AtomicBool,
    /// Call id -> index into `pairs`, for the calls without a result.
    #[pyo3(get)]
    pending: Py<PyDict>,
    /// `(call position, result position or None, call id)` per tool call on the surface: tuples of
    /// atoms, replaced when the call is answered, which the cyclic GC stops tracking (issue 37).
    #[pyo3(get)]
    pairs: Py<PyList>,
    paired: AtomicBool,
}

/// A list the cyclic GC does not walk, for the surface's sequences: `nodes` only ever holds
/// `Message`s, `node_seqs` ints and `pairs` tuples of ints, `None` and a call id, none of which
/// can lead back to a list, so no cycle runs through them; tracked, every collection reaching
/// them (each full one, for the session's life) would visit one item per message.
fn untracked_list(py: Python<'_>) -> Bound<'_, PyList> {
    let list = PyList::empty(py);
    untrack(list.as_any());
    list
}

impl SurfaceState {
    fn nodes_list<'py>(&self, py: Python<'py>) -> Bound<'py, PyList> {
        self.nodes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).bind(py).clone()
    }
}

#[pymethods]
impl SurfaceState {
    /// An empty surface's state (its pairing current: there is nothing to pair).
    #[new]
    fn new(py: Python<'_>) -> Self {
        SurfaceState {
            seen: PyDict::new(py).unbind(),
            nodes: Mutex::new(untracked_list(py).unbind()),
            node_seqs: untracked_list(py).unbind(),
            positions: PyDict::new(py).unbind(),
            pending: PyDict::new(py).unbind(),
            pairs: untracked_list(py).unbind(),
            paired: AtomicBool::new(true),
            positions_current: AtomicBool::new(true),
        }
    }

    /// The nodes on the surface, in order (a replace sets a new list: histories share the old one).
    #[getter]
    fn nodes<'py>(&self, py: Python<'py>) -> Bound<'py, PyList> {
        self.nodes_list(py)
    }

    /// Set by `Surface` only, to a copy of the nodes it then edits: untracked as `untracked_list`'s.
    #[setter]
    fn set_nodes(&self, nodes: Bound<'_, PyList>) {
        untrack(nodes.as_any());
        *self.nodes.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = nodes.unbind();
    }

    /// Whether `pending` and `pairs` are current (a replace makes them stale until rebuilt).
    #[getter]
    fn paired(&self) -> bool {
        self.paired.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_paired(&self, paired: bool) {
        self.paired.store(paired, Ordering::Relaxed);
    }

    /// Whether `positions` holds every node's position (else the folds leave it as it is until
    /// `Surface` rebuilds it).
    #[getter]
    fn positions_current(&self) -> bool {
        self.positions_current.load(Ordering::Relaxed)
    }

    #[setter]
    fn set_positions_current(&self, current: bool) {
        self.positions_current.store(current, Ordering::Relaxed);
    }

    /// Check and fold the vouched appends `seqs[start:]` (see `Surface.fold_appends`); the index of
    /// the first append that breaks a rule, nothing of it folded, or `len(seqs)` if none. The
    /// pairing must be current (`paired`).
    #[pyo3(signature = (seqs, tags, messages, start, /))]
    fn fold_appends<'py>(
        &self,
        seqs: &Bound<'py, PyAny>,
        tags: &Bound<'py, PyAny>,
        messages: &Bound<'py, PyAny>,
        start: &Bound<'py, PyAny>,
    ) -> PyResult<usize> {
        if !self.paired() {
            return Err(PyValueError::new_err("the pairing of tool calls is not current: rebuild it before folding appends"));
        }
        let py = seqs.py();
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
        let (seen, nodes, node_seqs) = (self.seen.bind(py), &self.nodes_list(py), self.node_seqs.bind(py));
        let (positions, pending, pairs) = (self.positions.bind(py), self.pending.bind(py), self.pairs.bind(py));
        let none = py.None().into_bound(py);
        let positioning = self.positions_current();
        for index in start..count {
            let (seq_value, seq) = read_seq(&seqs, index)?;
            let tag = Tag::read(tags.get(index)?, index)?;
            let message = messages.message(&seq_value, seq)?;
            let position = nodes.len().into_pyobject(py)?;
            // The pending tool calls first: this answers one, or none is pending. Nothing is
            // changed until every rule holds.
            let answer = match &tag {
                Tag::Answer(call_id) => {
                    let Some(pair_index) = pending.get_item(call_id)? else { return Ok(index) };
                    // A pair is replaced, never changed: a tuple of atoms, which the cyclic GC stops
                    // tracking at its first look, where a list stays tracked for the session's life.
                    let pair_index: usize = pair_index.extract()?;
                    let pair = pairs.get_item(pair_index)?;
                    let pair = pair.cast::<PyTuple>().map_err(|_| PyTypeError::new_err(format!("pairs[{pair_index}] must be a tuple")))?;
                    Some((call_id.clone(), pair_index, PyTuple::new(py, [pair.get_item(0)?, position.as_any().clone(), pair.get_item(2)?])?))
                }
                _ if !pending.is_empty() => return Ok(index),
                _ => None,
            };
            let message_id = message.get().id_ref(py);
            if !newly_seen(seen, message_id, &seq_value)? {
                return Ok(index);
            }
            match (tag, answer) {
                (_, Some((call_id, pair_index, answered))) => {
                    pairs.set_item(pair_index, answered)?;
                    pending.del_item(call_id)?;
                }
                (Tag::Invisible, _) => continue,
                (Tag::Calls(call_ids), _) => {
                    for call_id in call_ids.iter() {
                        pending.set_item(&call_id, pairs.len())?;
                        pairs.append(PyTuple::new(py, [position.as_any(), &none, &call_id])?)?;
                    }
                }
                _ => {}
            }
            if positioning {
                positions.set_item(message_id, &position)?;
            }
            nodes.append(&message)?;
            node_seqs.append(&seq_value)?;
        }
        Ok(count)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SurfaceState>()?;
    Ok(())
}
