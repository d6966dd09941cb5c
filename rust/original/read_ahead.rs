//! What each of the original's records is, read without the GIL: on a large log by the thread
//! ahead of `decode_original_records`' loop (`log/sort_ahead.rs`, `AheadWork`), else by the loop.
//!
//! A record's reading (`read`) is its top level scanned and sorted: one event whose data is
//! presented (`data_rules.rs`), a packed row, a message event, or a record for Python. Ahead, a
//! message append is also rewritten as dshkit's record (`message_text.rs`) and, when the two
//! threads run side by side, tokenized into a tape (`json/read/tape.rs`), so the GIL thread only
//! builds its objects, as `log/`'s own message records are read. Nothing here depends on the
//! records before: a record's `seq` is the one it claims, which the loop compares with the next
//! seq (a rewrite with another seq would be refused, as the loop's own would).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::json::read::tape::TapeBuffers;
use crate::log::record_scanner::Kind;
use crate::log::sort_ahead::AheadWork;
use crate::original::chunk_row::read_row;
use crate::original::data_rules::{presented_data, Presented};
use crate::original::message_text::dshkit_message_record;
use crate::original::record_top::{scan_top, Top};

const MESSAGE_TYPES: [&[u8]; 3] = [b"user/message", b"assistant/message", b"tool/result"];
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
pub(crate) type NameSet = HashSet<Vec<u8>, BuildHasherDefault<Fnv>>;

/// The type names a reader sorts by, from the Python tables (`vocabulary.py`, `chunk_rows.py`).
pub(crate) struct Vocabulary {
    pub(crate) verbatim: NameSet,
    pub(crate) ignorable: NameSet,
    /// A packed row's type -> the delta type of its chunks.
    pub(crate) rows: ByName<String>,
}

/// What one record is.
pub(crate) enum Read<'a> {
    /// One event: its type, the seq it claims, its time and its data's JSON (in parts).
    Event(&'a [u8], i64, i64, Presented<'a>),
    /// A packed row, read by `columns.rs`' `add_row`.
    Row(&'a [u8]),
    /// A packed row read ahead: the seq of its first event (as it claims it), and its events'
    /// range in the chunk's `row_events`.
    RowRead { seq0: i64, events: Range<usize> },
    /// A message event, perhaps an append (its top level scanned).
    Message(&'a [u8], Box<Top>),
    /// A message append rewritten ahead as dshkit's record of event `seq` (the seq it claims):
    /// its type, the record's span in the chunk's `rewritten`, and its tape's tokens there (empty:
    /// not taped).
    Rewritten { event_type: &'a [u8], seq: usize, text: Range<usize>, tape: Range<usize> },
    /// One event the Python decoder reads.
    Python,
    /// A record whose type the scan cannot tell.
    TypeUnknown,
}

/// What record `text` is, as far as it can be told without the records before it.
pub(crate) fn read<'a>(text: &'a [u8], vocabulary: &Vocabulary) -> Read<'a> {
    let Ok(top) = scan_top(text) else { return Read::TypeUnknown };
    if top.escaped_key || top.event_type.count > 1 || top.event_type.escaped {
        return Read::TypeUnknown;
    }
    let Some(event_type) = top.event_type.plain_str(text) else { return Read::Python };
    if vocabulary.rows.contains_key(event_type) {
        return Read::Row(event_type);
    }
    if MESSAGE_TYPES.contains(&event_type) {
        return Read::Message(event_type, Box::new(top));
    }
    match one_event(text, &top, event_type, vocabulary) {
        Some((seq, time, data)) => Read::Event(event_type, seq, time, data),
        None => Read::Python,
    }
}

/// The claimed seq, time and data JSON of a record of one event whose data `presented_data` reads.
fn one_event<'a>(text: &'a [u8], top: &Top, event_type: &[u8], vocabulary: &Vocabulary) -> Option<(i64, i64, Presented<'a>)> {
    if !top.is_exactly(&top.seq, &top.time) {
        return None;
    }
    let (seq, time) = (top.seq.int()?, top.time.int()?);
    let verbatim = vocabulary.verbatim.contains(event_type);
    let ignorable = vocabulary.ignorable.contains(event_type);
    Some((seq, time, presented_data(text, &top.data, event_type, verbatim, ignorable)?))
}

/// A packed row `text` of type `tag` read (`None`: not read natively): the seq of its first
/// event, as it claims it, each event's time and its data's JSON written to `data`, its span there
/// pushed onto `events`.
pub(crate) fn row_events(text: &[u8], tag: &[u8], vocabulary: &Vocabulary, data: &mut Vec<u8>, events: &mut Vec<(i64, Range<usize>)>) -> Option<i64> {
    let top = scan_top(text).ok()?;
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
    pub(crate) rewritten: String,
    pub(crate) tapes: TapeBuffers,
    /// The packed rows' events: time and data's span in `row_data`.
    pub(crate) row_events: Vec<(i64, Range<usize>)>,
    pub(crate) row_data: Vec<u8>,
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
        let read = match read(text, self.vocabulary) {
            Read::Message(event_type, top) => rewritten_ahead(chunk, text, &top, event_type, taping),
            Read::Row(tag) => {
                let (first, data) = (chunk.row_events.len(), chunk.row_data.len());
                match row_events(text, tag, self.vocabulary, &mut chunk.row_data, &mut chunk.row_events) {
                    Some(seq0) => Read::RowRead { seq0, events: first..chunk.row_events.len() },
                    None => {
                        // Not read here: the GIL thread tries again, and gives the log to Python.
                        chunk.row_events.truncate(first);
                        chunk.row_data.truncate(data);
                        Read::Row(tag)
                    }
                }
            }
            read => read,
        };
        chunk.reads.push(read);
    }
}

/// Message record `text` rewritten as dshkit's record of the event it claims to be, into
/// `chunk`; `Read::Python` where the rewrite refuses (as it would for any seq).
fn rewritten_ahead<'t>(chunk: &mut ReadChunk<'t>, text: &[u8], top: &Top, event_type: &'t [u8], taping: bool) -> Read<'t> {
    let Some(seq) = top.seq.int().and_then(|seq| usize::try_from(seq).ok()) else { return Read::Python };
    let Some(record) = dshkit_message_record(text, top, event_type, seq) else { return Read::Python };
    let Ok(record) = std::str::from_utf8(&record) else { return Read::Python };
    let start = chunk.rewritten.len();
    chunk.rewritten.push_str(record);
    let text = start..chunk.rewritten.len();
    let tape = match taping {
        true => chunk.tapes.tokenize(&chunk.rewritten[text.clone()]).unwrap_or(0..0),
        false => 0..0,
    };
    Read::Rewritten { event_type, seq, text, tape }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = r#"{"type":"user/message","seq":7,"time":9,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#;

    fn vocabulary() -> Vocabulary {
        let names = |list: &[&str]| list.iter().map(|name| name.as_bytes().to_vec()).collect();
        let rows = [(b"text-chunks".to_vec(), "text-delta".to_string())].into_iter().collect();
        Vocabulary { verbatim: names(&["turn/start"]), ignorable: names(&["hook/invoked"]), rows }
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
            let top = scan_top(PROMPT.as_bytes()).unwrap();
            let want = dshkit_message_record(PROMPT.as_bytes(), &top, b"user/message", 7).unwrap();
            let mut spans = Vec::new();
            for read in [&chunk.reads[0], &chunk.reads[3]] {
                let Read::Rewritten { event_type, seq, text, tape } = read else { panic!("not rewritten") };
                assert_eq!((*event_type, *seq, chunk.rewritten[text.clone()].as_bytes()), (&b"user/message"[..], 7, &want[..]));
                assert_eq!(tape.is_empty(), !taping);
                spans.push(text.clone());
            }
            assert!(spans[0].end <= spans[1].start, "one after the other in the chunk");
            assert!(matches!(chunk.reads[1], Read::Python) && matches!(chunk.reads[2], Read::Python));
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
        let Read::Event(name, seq, time, data) = &chunk.reads[0] else { panic!("not one event") };
        assert_eq!((*name, *seq, *time, data.parts().concat()), (&b"turn/start"[..], 12, 5, br#"{"turn":1}"#.to_vec()));
        assert!(matches!(chunk.reads[1], Read::Row(b"text-chunks"))); // no members: not read here
        assert!(matches!(chunk.reads[2], Read::TypeUnknown) && matches!(chunk.reads[3], Read::Python));
        assert!(chunk.rewritten.is_empty());
    }

    #[test]
    fn a_packed_row_is_read_ahead_into_its_events_for_the_seq_it_claims() {
        let vocabulary = vocabulary();
        let row = br#"{"type":"text-chunks","seq0":4,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[2],"texts":["a","b"]}}"#;
        let texts: Vec<&[u8]> = vec![row, row];
        let chunk = read_ahead(&texts, &vocabulary, false);
        let (mut data, mut events) = (Vec::new(), Vec::new());
        assert_eq!(row_events(row, b"text-chunks", &vocabulary, &mut data, &mut events), Some(4));
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
