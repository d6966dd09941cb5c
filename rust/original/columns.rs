//! `decode_original_records`: the original's records as `EventLog` columns, in one native pass.
//!
//! A record is read here only when its dshkit event is sure: exactly `type`, `seq`, `time`, `data`
//! (`seq` the next one, ints where the Python decoder asks for them) of a type whose data is
//! presented as stored (`verbatim`) or marked ignorable (`ignorable`, an object whose keys hold
//! no escape and no `ignorable`), or a packed chunk row (`chunk_row.rs`). Its event's data goes
//! to the blob as JSON (kind `D`, what `EventLog._decode` reads back). Any other record is one
//! event left to the Python decoder by its index (kind `E`: the Python side keeps the event it
//! decodes). A record whose type the scan cannot tell (it does not vouch for the text, an escape
//! in a key or the type) is parsed to learn it. A packed row not read here (malformed, or with
//! such a type) stands for an unknown number of events: the whole log is then left to Python
//! (`None`). What a record is (`read_ahead.rs`) is read on a second thread ahead of this loop on
//! a large log, for the seq the record claims; this loop, holding the GIL, checks that seq and
//! builds the objects.

use std::ops::Range;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::json::read::from_json;
use crate::json::read::tape::Tape;
use crate::log::message_record::{read_message_record, KeptAppend};
use crate::log::message_tape::read_message_tape;
use crate::log::message_vouch::vouch_message_append;
use crate::log::event_columns::{decoded_columns, Blob, KIND_DATA, KIND_KEPT};
use crate::log::sort_ahead::{with_work_ahead, AheadWork};
use crate::original::lines::OriginalLines;
use crate::original::read_ahead::{OriginalWork, Read, ReadChunk, Vocabulary};
use crate::value::walk::GcPause;

const CHUNK_TYPE: &str = "assistant/chunk";

/// A run of message appends read and vouched for here, until the next record left to Python: each
/// one's seq, tag (`Surface.fold_appends`) and record index, and the seqs of those without
/// model-visible content (tag `False`, rare: the Python side notes them without a pass over every tag).
#[derive(Default)]
struct Run<'py> {
    seqs: Vec<usize>,
    tags: Vec<Bound<'py, PyAny>>,
    indexes: Vec<usize>,
    hidden: Vec<usize>,
}

/// The columns as they are built (`EventLog.adopt` takes them), and the records left to Python.
struct Columns<'py> {
    types: Vec<Bound<'py, PyAny>>,
    times: Vec<i64>,
    /// Each event's `Message` (`None` but for a message append read here).
    messages: Vec<Bound<'py, PyAny>>,
    blob: Blob<'py>,
    ends: Vec<u64>,
    /// In seq order: `(record index, seq)` of each record left to the Python decoder, and
    /// `(seqs, tags, record indexes, hidden seqs)` of each run of appends read and vouched for here.
    pending: Bound<'py, PyList>,
    run: Run<'py>,
    /// Each type name of the vocabulary as a `str`, by `TypeName::id`, and `assistant/chunk`.
    type_names: Vec<Bound<'py, PyAny>>,
    chunk_type: Bound<'py, PyAny>,
}

impl<'py> Columns<'py> {
    fn new(py: Python<'py>, texts: &[&[u8]], vocabulary: &Vocabulary) -> PyResult<Self> {
        let size: usize = texts.iter().map(|text| text.len()).sum();
        Ok(Columns {
            types: Vec::with_capacity(texts.len()),
            times: Vec::with_capacity(texts.len()),
            blob: Blob::new(py, size + texts.len())?,
            ends: Vec::with_capacity(texts.len()),
            messages: Vec::with_capacity(texts.len()),
            pending: PyList::empty(py),
            run: Run::default(),
            type_names: vocabulary.names.iter().map(|name| PyString::intern(py, name).into_any()).collect(),
            chunk_type: PyString::intern(py, CHUNK_TYPE).into_any(),
        })
    }

    /// `(types, times, messages, blob, ends, pending)`, the runs flushed.
    fn into_tuple(mut self) -> PyResult<Bound<'py, PyTuple>> {
        self.flush()?;
        decoded_columns(self.types, &self.times, self.messages, self.blob, &self.ends, self.pending)
    }

    fn type_name(&self, id: u16) -> Bound<'py, PyAny> {
        self.type_names[usize::from(id)].clone()
    }

    fn event(&mut self, event_type: Bound<'py, PyAny>, time: i64, kind: u8, data: &[&[u8]]) -> PyResult<()> {
        self.messages.push(self.pending.py().None().into_bound(self.pending.py()));
        self.types.push(event_type);
        self.times.push(time);
        self.blob.extend(kind, data)?;
        self.ends.push(self.blob.len() as u64);
        Ok(())
    }

    fn left_to_python(&mut self, py: Python<'py>, index: usize) -> PyResult<()> {
        self.flush()?;
        self.pending.append((index, self.types.len()))?;
        self.event(py.None().into_bound(py), 0, KIND_KEPT, &[])
    }

    /// A message append read and vouched for here (`record` index `index`).
    fn vouched(&mut self, index: usize, type_id: u16, append: MessageAppend<'py, '_>) -> PyResult<()> {
        let seq = self.types.len();
        self.event(self.type_name(type_id), append.time, append.kind, &append.kept)?;
        self.messages[seq] = append.message;
        if append.tag.is(&*PyBool::new(self.pending.py(), false)) {
            self.run.hidden.push(seq);
        }
        self.run.seqs.push(seq);
        self.run.tags.push(append.tag);
        self.run.indexes.push(index);
        Ok(())
    }

    /// The events of a packed row whose first claims seq `seq0` (`None`: not the next seq).
    fn row(&mut self, seq0: i64, events: &[(i64, Range<usize>)], data: &[u8]) -> PyResult<Option<()>> {
        if seq0 != self.types.len() as i64 {
            return Ok(None);
        }
        let chunk_type = self.chunk_type.clone();
        for (time, span) in events {
            self.event(chunk_type.clone(), *time, KIND_DATA, &[&data[span.clone()]])?;
        }
        Ok(Some(()))
    }

    fn flush(&mut self) -> PyResult<()> {
        if !self.run.seqs.is_empty() {
            let py = self.pending.py();
            let Run { seqs, tags, indexes, hidden } = std::mem::take(&mut self.run);
            let run = (PyList::new(py, seqs)?, PyList::new(py, tags)?, PyList::new(py, indexes)?, PyList::new(py, hidden)?);
            self.pending.append(run)?;
        }
        Ok(())
    }
}

/// Whether `text`, a record whose type the scan could not tell, parses as a packed row's record
/// (then it is not one event: the whole log takes the Python path).
fn parses_as_row(py: Python<'_>, text: &[u8], vocabulary: &Vocabulary) -> bool {
    let Ok(record) = from_json(PyBytes::new(py, text).as_any()) else { return false };
    let Ok(event_type) = record.get_item("type") else { return false };
    event_type.extract::<String>().is_ok_and(|name| vocabulary.rows.contains_key(name.as_bytes()))
}

/// A message append read here: what the columns keep of it, and its tag for `Surface.fold_appends`.
struct MessageAppend<'py, 'r> {
    time: i64,
    message: Bound<'py, PyAny>,
    kind: u8,
    /// `[data with null for its message, source seqs]` (kind `M`) in parts, or nothing (`U`: a
    /// user message citing nothing): `KeptAppend::parts`, as `log/records.rs` keeps a vouched append.
    kept: [&'r [u8]; 7],
    tag: Bound<'py, PyAny>,
}

/// The `rewritten` record of message event `seq` (`message_text.rs`) read by `log/`'s reader,
/// from its `tape` when it has one (and from the text where the tape's reading answers `None`),
/// when it is an append that passes every rule not depending on the log before it
/// (`vouch_message_append`); else `None`.
fn rewritten_append<'py, 'r>(py: Python<'py>, rewritten: &'r str, tape: Option<Tape<'_>>, type_name: &str, seq: usize) -> Option<MessageAppend<'py, 'r>> {
    let from_tape = tape.and_then(|tape| read_message_tape(py, rewritten, tape, seq, type_name));
    let record = from_tape.or_else(|| read_message_record(py, rewritten, seq, type_name))?;
    if !record.envelope_passes(rewritten) {
        return None;
    }
    let append = vouch_message_append(type_name, seq, &record.message, &record.surface_op, record.source_seqs.as_any())?;
    let tag = append.into_tag(py).ok()?;
    let (kind, kept) = KeptAppend::of(&record, type_name).parts(rewritten.as_bytes());
    Some(MessageAppend { time: record.time, message: record.message.into_any(), kind, kept, tag })
}

/// Record `index` (whose text is `text`) added to `columns` as `read` says (`chunk`: where
/// its reading keeps its rewritten record); `None`: the whole log takes the Python path.
fn add_record<'py>(
    py: Python<'py>,
    columns: &mut Columns<'py>,
    (index, text): (usize, &[u8]),
    read: &Read<'_>,
    chunk: &ReadChunk<'_>,
    vocabulary: &Vocabulary,
) -> PyResult<Option<()>> {
    let seq = columns.types.len();
    match *read {
        Read::Event(type_id, claimed, time, ref data) if claimed == seq as i64 => {
            columns.event(columns.type_name(type_id), time, KIND_DATA, &data.parts())?;
        }
        // Not read by `row_events`, which is all the reading of a row there is.
        Read::Row => return Ok(None),
        Read::RowRead { seq0, ref events } => return columns.row(seq0, &chunk.row_events[events.clone()], &chunk.row_data),
        Read::Rewritten { type_id, seq: claimed, ref text, ref tape } if claimed == seq => {
            let tape = (!tape.is_empty()).then(|| chunk.tapes.tape(tape.clone()));
            let type_name = &vocabulary.names[usize::from(type_id)];
            match rewritten_append(py, chunk.rewritten(text.clone()), tape, type_name, seq) {
                Some(append) => columns.vouched(index, type_id, append)?,
                None => columns.left_to_python(py, index)?,
            }
        }
        Read::TypeUnknown if parses_as_row(py, text, vocabulary) => return Ok(None),
        // Events claiming another seq than the next are refused as the one-thread reading would.
        Read::Event(..) | Read::Rewritten { .. } | Read::Python | Read::TypeUnknown => columns.left_to_python(py, index)?,
    }
    Ok(Some(()))
}

fn text_of<'a>(item: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    match item.cast::<PyBytes>() {
        Ok(bytes) => Ok(bytes.as_bytes()),
        Err(_) => Ok(item.cast::<PyString>()?.to_str()?.as_bytes()),
    }
}

/// The records' texts: borrowed from `OriginalLines` as they are (no `bytes` made), or from each
/// item of any other sequence (kept in `items`, which the texts borrow from).
fn record_texts<'a, 'py>(py: Python<'py>, records: &'a Bound<'py, PyAny>, items: &'a mut Vec<Bound<'py, PyAny>>) -> PyResult<Vec<&'a [u8]>> {
    if let Ok(lines) = records.cast::<OriginalLines>() {
        return Ok(lines.get().texts(py));
    }
    *items = records.try_iter()?.collect::<PyResult<_>>()?;
    items.iter().map(text_of).collect()
}

fn vocabulary(verbatim: &Bound<'_, PyAny>, ignorable: &Bound<'_, PyAny>, rows: &Bound<'_, PyDict>) -> PyResult<Vocabulary> {
    let names = |set: &Bound<'_, PyAny>| -> PyResult<Vec<String>> { set.try_iter()?.map(|name| name?.extract::<String>()).collect() };
    let rows = rows.iter().map(|(tag, delta)| Ok((tag.extract::<String>()?, delta.extract::<String>()?))).collect::<PyResult<_>>()?;
    Ok(Vocabulary::new(names(verbatim)?, names(ignorable)?, rows))
}

/// The original's event records (`bytes` or `str`, the header excluded) as `EventLog` columns:
/// `(types, times, blob, ends, pending)`, or `None` when the whole log must take the Python path.
///
/// `verbatim`/`ignorable`: the type names whose data is presented as stored / marked ignorable;
/// `rows`: packed row type -> delta type. `types` is a list (`None` where the Python decoder
/// decides), `times` and `ends` native `int64`/`uint64` bytes, `blob` a bytearray of a kind byte
/// and the data's JSON per event (`D`), or the kind byte alone (`E`) for an event left to Python;
/// `pending` the `(record index, seq)` of each of those, in order.
#[pyfunction]
#[pyo3(signature = (records, verbatim, ignorable, rows, /))]
fn decode_original_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    verbatim: &Bound<'py, PyAny>,
    ignorable: &Bound<'py, PyAny>,
    rows: &Bound<'py, PyDict>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let vocabulary = vocabulary(verbatim, ignorable, rows)?;
    let mut items = Vec::new();
    let texts = record_texts(py, records, &mut items)?;
    // No collection while the log's objects are built (`GcPause`, as `decode_records` does).
    let _no_collections = GcPause::new(py);
    let mut columns = Columns::new(py, &texts, &vocabulary)?;
    // The records are read (and message appends rewritten and taped) ahead on a second thread
    // (`read_ahead.rs`) while this one builds; one not read yet is read here the same way.
    let work = OriginalWork { texts: &texts, vocabulary: &vocabulary };
    let mut here = ReadChunk::default();
    let whole = with_work_ahead(&work, texts.len(), |ahead| -> PyResult<bool> {
        for (index, &text) in texts.iter().enumerate() {
            let added = match ahead.worked(index) {
                Some((chunk, at)) => add_record(py, &mut columns, (index, text), &chunk.reads[at], chunk, &vocabulary)?,
                None => {
                    OriginalWork::clear(&mut here);
                    work.work(&mut here, index, false);
                    add_record(py, &mut columns, (index, text), &here.reads[0], &here, &vocabulary)?
                }
            };
            if added.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if !whole {
        return Ok(None);
    }
    columns.into_tuple().map(Some)
}

/// For the tests: `decode_original_records` with every record read as the thread ahead reads it
/// when the threads run side by side (rewritten and taped), here and whatever the log's size;
/// and how many message records were read from their tapes.
#[pyfunction]
#[pyo3(signature = (records, verbatim, ignorable, rows, /))]
fn _decode_original_records_taped<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    verbatim: &Bound<'py, PyAny>,
    ignorable: &Bound<'py, PyAny>,
    rows: &Bound<'py, PyDict>,
) -> PyResult<(Option<Bound<'py, PyTuple>>, usize)> {
    let vocabulary = vocabulary(verbatim, ignorable, rows)?;
    let mut items = Vec::new();
    let texts = record_texts(py, records, &mut items)?;
    let work = OriginalWork { texts: &texts, vocabulary: &vocabulary };
    let mut chunk = ReadChunk::default();
    (0..texts.len()).for_each(|index| work.work(&mut chunk, index, true));
    let mut taped = 0;
    for read in &chunk.reads {
        if let Read::Rewritten { type_id, seq, text, tape } = read {
            let type_name = &vocabulary.names[usize::from(*type_id)];
            let tape = (!tape.is_empty()).then(|| chunk.tapes.tape(tape.clone()));
            taped += usize::from(tape.is_some_and(|tape| read_message_tape(py, chunk.rewritten(text.clone()), tape, *seq, type_name).is_some()));
        }
    }
    let mut columns = Columns::new(py, &texts, &vocabulary)?;
    for (index, &text) in texts.iter().enumerate() {
        if add_record(py, &mut columns, (index, text), &chunk.reads[index], &chunk, &vocabulary)?.is_none() {
            return Ok((None, taped));
        }
    }
    Ok((Some(columns.into_tuple()?), taped))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_original_records, m)?)?;
    m.add_function(wrap_pyfunction!(_decode_original_records_taped, m)?)
}
