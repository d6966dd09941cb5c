//! What each of the original's records is, read without the GIL: on a large log by the thread
//! ahead of `decode_original_records`' loop (`log/sort_ahead.rs`, `AheadWork`), else (and for a
//! chunk the thread has not reached) by the loop, the same way, untaped.
//!
//! A record's reading (`read`) is its top level scanned and sorted: one event whose data is
//! presented (`data_rules.rs`), a packed row, a message event, or a record for Python. A message
//! append is also rewritten as dshkit's record (`message_text.rs`): the top scan writes its data
//! into the chunk's buffer, where the record is finished (no allocation a record), and, ahead
//! when the two threads run side by side, tokenized into a tape (`json/read/tape.rs`), so the
//! GIL thread only builds its objects, as `log/`'s own message records are read. Nothing here
//! depends on the records before: a record's `seq` is the one it claims, which the loop compares
//! with the next seq (a rewrite with another seq would be refused, as the loop's own would).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::json::read::tape::TapeBuffers;
use crate::log::record_scanner::Kind;
use crate::log::sort_ahead::AheadWork;
use crate::original::chunk_row::read_row;
use crate::original::data_rules::{presented_data, Presented};
use crate::original::message_text::dshkit_message_record;
use crate::original::record_top::{scan_top, Top};

const MESSAGE_TYPES: [&str; 3] = ["user/message", "assistant/message", "tool/result"];
/// The types read natively without being in a table: their data's renames are `data_rules.rs`'.
const RULED_TYPES: [&str; 2] = ["tool/call", "turn/end"];
const CALL_ROW: &[u8] = b"tool-call-chunks";

/// FNV-1a: the keys looked up per record are a few short type names, for which the default
/// SipHash showed in the profile.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut hash = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for byte in bytes {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = hash;
    }
}

pub(crate) type ByName<V> = HashMap<Vec<u8>, V, BuildHasherDefault<Fnv>>;

/// What the native pass reads of a type name, and the name's index in `Vocabulary::names`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeName {
    pub(crate) id: u16,
    row: bool,
    message: bool,
    verbatim: bool,
    ignorable: bool,
}

/// The type names a reader sorts by, from the Python tables (`vocabulary.py`, `chunk_rows.py`):
/// one lookup a record says what it is (a lookup per table showed in the profile), and the GIL
/// thread finds its `str` by index.
pub(crate) struct Vocabulary {
    types: ByName<TypeName>,
    /// Each name by its `TypeName::id`.
    pub(crate) names: Vec<String>,
    /// A packed row's type -> the delta type of its chunks.
    pub(crate) rows: ByName<String>,
}

impl Vocabulary {
    /// The names whose data is presented as stored (`verbatim`) or marked ignorable, and the
    /// packed rows' types with their chunks' delta types.
    pub(crate) fn new(verbatim: Vec<String>, ignorable: Vec<String>, rows: Vec<(String, String)>) -> Self {
        let mut vocabulary = Vocabulary { types: ByName::default(), names: Vec::new(), rows: ByName::default() };
        let mut mark = |name: &str, set: fn(&mut TypeName)| {
            let next = vocabulary.names.len() as u16;
            let entry = vocabulary.types.entry(name.as_bytes().to_vec()).or_insert_with(|| {
                vocabulary.names.push(name.to_string());
                TypeName { id: next, row: false, message: false, verbatim: false, ignorable: false }
            });
            set(entry);
        };
        verbatim.iter().for_each(|name| mark(name, |entry| entry.verbatim = true));
        ignorable.iter().for_each(|name| mark(name, |entry| entry.ignorable = true));
        MESSAGE_TYPES.iter().for_each(|name| mark(name, |entry| entry.message = true));
        RULED_TYPES.iter().for_each(|name| mark(name, |_| ()));
        rows.iter().for_each(|(tag, _)| mark(tag, |entry| entry.row = true));
        vocabulary.rows = rows.into_iter().map(|(tag, delta)| (tag.into_bytes(), delta)).collect();
        vocabulary
    }
}

/// What one record is.
pub(crate) enum Read<'a> {
    /// One event: its type (`TypeName::id`), the seq it claims, its time and its data's JSON (in parts).
    Event(u16, i64, i64, Presented<'a>),
    /// A packed row not read natively: the whole log takes the Python path.
    Row,
    /// A packed row: the seq of its first event (as it claims it), and its events' range in the
    /// chunk's `row_events`.
    RowRead { seq0: i64, events: Range<usize> },
    /// A message append rewritten as dshkit's record of event `seq` (the seq it claims): its
    /// type (`TypeName::id`), the record's span in the chunk's `rewritten`, and its tape's
    /// tokens there (empty: not taped).
    Rewritten { type_id: u16, seq: usize, text: Range<usize>, tape: Range<usize> },
    /// One event the Python decoder reads.
    Python,
    /// A record whose type the scan cannot tell.
    TypeUnknown,
}

/// A record's top level scanned and sorted: a reading, or a packed row or message event to read
/// further from its top level.
enum Scanned<'a> {
    Read(Read<'a>),
    Row(&'a [u8]),
    Message(TypeName),
}

/// What record `text` is, as far as it can be told without the records before it (a message
/// event's data rewritten into `record` by the scan, `Top::record_start`).
fn read<'a>(text: &'a [u8], vocabulary: &Vocabulary, record: &mut Vec<u8>, top: &mut Top) -> Scanned<'a> {
    let Ok(()) = scan_top(text, record, top) else { return Scanned::Read(Read::TypeUnknown) };
    if top.escaped_key || top.event_type.count > 1 || top.event_type.escaped {
        return Scanned::Read(Read::TypeUnknown);
    }
    let Some(event_type) = top.event_type.plain_str(text) else { return Scanned::Read(Read::Python) };
    // A type in no table is no event read here.
    let Some(&name) = vocabulary.types.get(event_type) else { return Scanned::Read(Read::Python) };
    if name.row {
        return Scanned::Row(event_type);
    }
    if name.message {
        return Scanned::Message(name);
    }
    Scanned::Read(match one_event(text, top, event_type, name) {
        Some((seq, time, data)) => Read::Event(name.id, seq, time, data),
        None => Read::Python,
    })
}

/// The claimed seq, time and data JSON of a record of one event whose data `presented_data` reads.
fn one_event<'a>(text: &'a [u8], top: &Top, event_type: &[u8], name: TypeName) -> Option<(i64, i64, Presented<'a>)> {
    if !top.is_exactly(&top.seq, &top.time) {
        return None;
    }
    let (seq, time) = (top.seq.int()?, top.time.int()?);
    Some((seq, time, presented_data(text, &top.data, event_type, name.verbatim, name.ignorable)?))
}

/// A packed row `text` (its top level `top`) of type `tag` read (`None`: not read natively):
/// the seq of its first event, as it claims it, each event's time and its data's JSON written
/// to `data`, its span there pushed onto `events`.
pub(crate) fn row_events(text: &[u8], top: &Top, tag: &[u8], vocabulary: &Vocabulary, data: &mut Vec<u8>, events: &mut Vec<(i64, Range<usize>)>) -> Option<i64> {
    if !top.is_exactly(&top.seq0, &top.time0) || top.data.kind != Kind::Object {
        return None;
    }
    let seq0 = top.seq0.int()?;
    let row = read_row(text, top.data.span, tag == CALL_ROW).ok()?;
    let times = row.times(top.time0.int()?)?;
    let delta = &vocabulary.rows[tag];
    for (k, time) in times.into_iter().enumerate().take(row.len()) {
        let start = data.len();
        row.write_member(k, delta, data);
        events.push((time, start..data.len()));
    }
    Some(seq0)
}

/// The records' texts and the vocabulary, for the thread ahead.
pub(crate) struct OriginalWork<'t> {
    pub(crate) texts: &'t [&'t [u8]],
    pub(crate) vocabulary: &'t Vocabulary,
}

/// The readings of a chunk of records, with the dshkit records of its message appends and their
/// tapes; reused chunk after chunk.
#[derive(Default)]
pub(crate) struct ReadChunk<'t> {
    pub(crate) reads: Vec<Read<'t>>,
    /// The message appends' dshkit records, one after the other (`Read::Rewritten`'s spans).
    rewritten: Vec<u8>,
    pub(crate) tapes: TapeBuffers,
    /// The packed rows' events: time and data's span in `row_data`.
    pub(crate) row_events: Vec<(i64, Range<usize>)>,
    pub(crate) row_data: Vec<u8>,
}

impl ReadChunk<'_> {
    /// The dshkit record of a `Read::Rewritten` at `span`.
    pub(crate) fn rewritten(&self, span: Range<usize>) -> &str {
        // SAFETY: a record is written only for a text `scan_top` vouched for as UTF-8, from
        // ASCII and whole members of that text (spans starting and ending at ASCII bytes).
        unsafe { std::str::from_utf8_unchecked(&self.rewritten[span]) }
    }
}

impl<'t> AheadWork for OriginalWork<'t> {
    type Chunk = ReadChunk<'t>;

    fn clear(chunk: &mut ReadChunk<'t>) {
        chunk.reads.clear();
        chunk.rewritten.clear();
        chunk.tapes.clear();
        chunk.row_events.clear();
        chunk.row_data.clear();
    }

    fn work(&self, chunk: &mut ReadChunk<'t>, index: usize, taping: bool) {
        let text = self.texts[index];
        let mark = chunk.rewritten.len();
        let mut top = Top::EMPTY;
        let read = match read(text, self.vocabulary, &mut chunk.rewritten, &mut top) {
            Scanned::Read(read) => read,
            Scanned::Message(name) => rewritten(chunk, text, &top, name, &self.vocabulary.names, taping),
            Scanned::Row(tag) => {
                let (first, data) = (chunk.row_events.len(), chunk.row_data.len());
                match row_events(text, &top, tag, self.vocabulary, &mut chunk.row_data, &mut chunk.row_events) {
                    Some(seq0) => Read::RowRead { seq0, events: first..chunk.row_events.len() },
                    None => {
                        chunk.row_events.truncate(first);
                        chunk.row_data.truncate(data);
                        Read::Row
                    }
                }
            }
        };
        if !matches!(read, Read::Rewritten { .. }) {
            chunk.rewritten.truncate(mark); // a record the scan began, for a record not read so
        }
        chunk.reads.push(read);
    }
}

/// Message record `text` (its top level `top`) rewritten as dshkit's record of the event it
/// claims to be, into `chunk`, after the data the scan wrote there; `Read::Python` where the
/// rewrite refuses (as it would for any seq).
fn rewritten<'t>(chunk: &mut ReadChunk<'t>, text: &[u8], top: &Top, name: TypeName, names: &[String], taping: bool) -> Read<'t> {
    let Some(seq) = top.seq.int().and_then(|seq| usize::try_from(seq).ok()) else { return Read::Python };
    let event_type = names[usize::from(name.id)].as_bytes();
    let Some(span) = dshkit_message_record(text, top, event_type, seq, &mut chunk.rewritten) else { return Read::Python };
    let tape = match taping {
        true => {
            let ReadChunk { rewritten, tapes, .. } = chunk;
            // SAFETY: as `ReadChunk::rewritten`.
            tapes.tokenize(unsafe { std::str::from_utf8_unchecked(&rewritten[span.clone()]) }).unwrap_or(0..0)
        }
        false => 0..0,
    };
    Read::Rewritten { type_id: name.id, seq, text: span, tape }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = r#"{"type":"user/message","seq":7,"time":9,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#;

    fn vocabulary() -> Vocabulary {
        let rows = vec![("text-chunks".to_string(), "text-delta".to_string())];
        Vocabulary::new(vec!["turn/start".to_string()], vec!["hook/invoked".to_string()], rows)
    }

    fn type_name(vocabulary: &Vocabulary, id: u16) -> &str {
        &vocabulary.names[usize::from(id)]
    }

    fn read_ahead<'t>(texts: &'t [&'t [u8]], vocabulary: &'t Vocabulary, taping: bool) -> ReadChunk<'t> {
        let work = OriginalWork { texts, vocabulary };
        let mut chunk = ReadChunk::default();
        (0..texts.len()).for_each(|index| work.work(&mut chunk, index, taping));
        chunk
    }

    #[test]
    fn a_message_append_is_rewritten_for_the_seq_it_claims_and_taped_when_asked() {
        let vocabulary = vocabulary();
        let off_surface = PROMPT.replace(r#","surfaceOp":"append""#, "");
        let negative = PROMPT.replace(r#""seq":7"#, r#""seq":-7"#);
        let texts: Vec<&[u8]> = vec![PROMPT.as_bytes(), off_surface.as_bytes(), negative.as_bytes(), PROMPT.as_bytes()];
        for taping in [true, false] {
            let chunk = read_ahead(&texts, &vocabulary, taping);
            let mut want = Vec::new();
            let mut top = Top::EMPTY;
            scan_top(PROMPT.as_bytes(), &mut want, &mut top).unwrap();
            dshkit_message_record(PROMPT.as_bytes(), &top, b"user/message", 7, &mut want).unwrap();
            let mut spans = Vec::new();
            for read in [&chunk.reads[0], &chunk.reads[3]] {
                let Read::Rewritten { type_id, seq, text, tape } = read else { panic!("not rewritten") };
                assert_eq!((type_name(&vocabulary, *type_id), *seq, chunk.rewritten(text.clone()).as_bytes()), ("user/message", 7, &want[..]));
                assert_eq!(tape.is_empty(), !taping);
                spans.push(text.clone());
            }
            assert!(spans[0].end <= spans[1].start, "one after the other in the chunk");
            assert!(matches!(chunk.reads[1], Read::Python) && matches!(chunk.reads[2], Read::Python));
            assert_eq!(chunk.rewritten.len(), 2 * want.len(), "nothing left of the records not rewritten");
        }
    }

    #[test]
    fn other_records_read_as_on_the_gil_thread_with_the_seq_they_claim() {
        let vocabulary = vocabulary();
        let texts: Vec<&[u8]> = vec![
            br#"{"type":"turn/start","seq":12,"time":5,"data":{"turn":1}}"#,
            br#"{"type":"text-chunks","seq0":1,"time0":5,"data":{}}"#,
            br#"{"t\u0079pe":"turn/start","seq":1,"time":5,"data":{}}"#,
            br#"{"type":"future/kind","seq":1,"time":5,"data":{}}"#,
        ];
        let chunk = read_ahead(&texts, &vocabulary, true);
        let Read::Event(id, seq, time, data) = &chunk.reads[0] else { panic!("not one event") };
        assert_eq!((type_name(&vocabulary, *id), *seq, *time, data.parts().concat()), ("turn/start", 12, 5, br#"{"turn":1}"#.to_vec()));
        assert!(matches!(chunk.reads[1], Read::Row)); // no members: not read here
        assert!(matches!(chunk.reads[2], Read::TypeUnknown) && matches!(chunk.reads[3], Read::Python));
        assert!(chunk.rewritten.is_empty());
    }

    #[test]
    fn a_record_begun_by_the_scan_but_not_read_leaves_nothing_behind() {
        let vocabulary = vocabulary();
        // The data is rewritten as it is met, after `type`; a second `type` then makes the type unknown.
        let twice = PROMPT.replace(r#","surfaceOp""#, r#","type":"user/message","surfaceOp""#);
        let replace = PROMPT.replace(r#""surfaceOp":"append""#, r#""surfaceOp":"replace""#);
        let texts: Vec<&[u8]> = vec![twice.as_bytes(), replace.as_bytes(), PROMPT.as_bytes()];
        let chunk = read_ahead(&texts, &vocabulary, true);
        assert!(matches!(chunk.reads[0], Read::TypeUnknown) && matches!(chunk.reads[1], Read::Python));
        let Read::Rewritten { text, .. } = &chunk.reads[2] else { panic!("not rewritten") };
        assert_eq!((text.start, text.end), (0, chunk.rewritten.len()));
    }

    #[test]
    fn a_packed_row_is_read_ahead_into_its_events_for_the_seq_it_claims() {
        let vocabulary = vocabulary();
        let row = br#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[2],"texts":["a","b"]}}"#;
        let texts: Vec<&[u8]> = vec![row, row];
        let chunk = read_ahead(&texts, &vocabulary, false);
        let (mut data, mut events) = (Vec::new(), Vec::new());
        let mut top = Top::EMPTY;
        scan_top(row, &mut Vec::new(), &mut top).unwrap();
        assert_eq!(row_events(row, &top, b"text-chunks", &vocabulary, &mut data, &mut events), Some(4));
        for (k, read) in chunk.reads.iter().enumerate() {
            let Read::RowRead { seq0, events: range } = read else { panic!("not read ahead") };
            assert_eq!((*seq0, range.clone()), (4, 2 * k..2 * k + 2));
            let got: Vec<(i64, &[u8])> = chunk.row_events[range.clone()].iter().map(|(time, span)| (*time, &chunk.row_data[span.clone()])).collect();
            let want: Vec<(i64, &[u8])> = events.iter().map(|(time, span)| (*time, &data[span.clone()])).collect();
            assert_eq!(got, want);
        }
        assert_eq!(events.iter().map(|(time, _)| *time).collect::<Vec<_>>(), [10, 12]);
    }
}
