//! The top level of one of the original's records, scanned strictly (`log/record_scanner.rs`):
//! the members a reader looks at (`type`, `seq`, `time`, `data`, a packed row's `seq0`, `time0`,
//! a message event's `surfaceOp`, `sourceEventSeqs`), each with how often it occurs, what it is and where it is. `Err(())` when the text
//! is not a JSON object the scanner vouches for (the Python decoder then decides).

use std::mem::MaybeUninit;
use std::ops::Deref;

use crate::log::record_scanner::{Kind, Scan, Scanner};
use crate::original::message_text::begin_dshkit_record;

/// One member of the record a reader looks at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member {
    pub(crate) count: u8,
    pub(crate) kind: Kind,
    /// The value's span in the text (a string's with its quotes).
    pub(crate) span: (usize, usize),
    /// A string value holding an escape.
    pub(crate) escaped: bool,
}

impl Member {
    const NONE: Member = Member { count: 0, kind: Kind::Other, span: (0, 0), escaped: false };

    /// The member value at `scanner` (`depth` deep), seen once; leaves the scanner past it.
    #[inline]
    fn read(scanner: &mut Scanner, depth: usize) -> Scan<Member> {
        scanner.skip_whitespace();
        let start = scanner.pos;
        let (kind, escaped) = if scanner.peek() == Some(b'"') {
            (Kind::Str, scanner.string()?)
        } else {
            (scanner.member_value(depth)?, false)
        };
        Ok(Member { count: 1, kind, span: (start, scanner.pos), escaped })
    }

    /// Its value when it occurs exactly once (a repeated key: the parser keeps the last).
    pub(crate) fn once(&self) -> Option<Kind> {
        (self.count == 1).then_some(self.kind)
    }

    /// The integer it holds, when it occurs once and is one.
    pub(crate) fn int(&self) -> Option<i64> {
        match self.once() {
            Some(Kind::Int(value)) => Some(value),
            _ => None,
        }
    }

    /// The text of a string without escapes occurring once (between its quotes).
    pub(crate) fn plain_str<'a>(&self, text: &'a [u8]) -> Option<&'a [u8]> {
        (self.once() == Some(Kind::Str) && !self.escaped).then(|| &text[self.span.0 + 1..self.span.1 - 1])
    }
}

/// The members of a record's top object a reader looks at.
#[derive(Debug)]
pub(crate) struct Top {
    pub(crate) event_type: Member,
    pub(crate) seq: Member,
    pub(crate) time: Member,
    pub(crate) data: Member,
    pub(crate) seq0: Member,
    pub(crate) time0: Member,
    /// A message event's `surfaceOp` and `sourceEventSeqs`.
    pub(crate) surface_op: Member,
    pub(crate) source_seqs: Member,
    /// How many members in all.
    pub(crate) members: usize,
    /// A key held an escape (it could spell any of the above).
    pub(crate) escaped_key: bool,
    /// Where dshkit's record of a message event begins in the buffer given to `scan_top`, which
    /// it ends: `{"data":` and the data as dshkit's, written while scanning it
    /// (`message_text::begin_dshkit_record`) when `type` came first; `None` otherwise.
    pub(crate) record_start: Option<usize>,
}

impl Top {
    /// No member seen yet.
    pub(crate) const EMPTY: Top = Top {
        event_type: Member::NONE,
        seq: Member::NONE,
        time: Member::NONE,
        data: Member::NONE,
        seq0: Member::NONE,
        time0: Member::NONE,
        surface_op: Member::NONE,
        source_seqs: Member::NONE,
        members: 0,
        escaped_key: false,
        record_start: None,
    };

    /// Exactly the members `type`, `seq`/`seq0`, `time`/`time0` and `data`, each once.
    pub(crate) fn is_exactly(&self, first: &Member, second: &Member) -> bool {
        !self.escaped_key
            && self.members == 4
            && self.event_type.count == 1
            && first.count == 1
            && second.count == 1
            && self.data.count == 1
    }
}

/// The top object of `text` (nothing but whitespace around it; UTF-8 checked where a string
/// held a byte that is not ASCII), read into `top`, where its caller keeps it (a `Top` returned
/// and moved on was copied several times a record). A message event's data met after its
/// `type` is rewritten into `record`, at its end (`Top::record_start`); nothing is left there on `Err`.
pub(crate) fn scan_top(text: &[u8], record: &mut Vec<u8>, top: &mut Top) -> Scan<()> {
    let mark = record.len();
    *top = Top::EMPTY;
    let scanned = scan_members(text, record, top);
    if scanned.is_err() {
        record.truncate(mark);
    }
    scanned
}

fn scan_members(text: &[u8], record: &mut Vec<u8>, top: &mut Top) -> Scan<()> {
    let mut scanner = Scanner { bytes: text, pos: 0, non_ascii: false };
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    top.members = scanner.object(0, |scanner, key, depth| {
        if key == Some(b"data") && top.data.count == 0 {
            // A message event's data is rewritten as it is scanned: one walk instead of two.
            if let Some(event_type) = top.event_type.plain_str(text) {
                scanner.skip_whitespace();
                let (start, record_start) = (scanner.pos, record.len());
                match begin_dshkit_record(scanner, event_type, depth, record) {
                    Ok(()) => {
                        top.record_start = Some(record_start);
                        top.data = Member { count: 1, kind: Kind::Object, span: (start, scanner.pos), escaped: false };
                        return Ok(());
                    }
                    Err(()) => scanner.pos = start, // scanned again below, as any member
                }
            }
        }
        let slot = match key {
            Some(b"type") => &mut top.event_type,
            Some(b"seq") => &mut top.seq,
            Some(b"time") => &mut top.time,
            Some(b"data") => &mut top.data,
            Some(b"seq0") => &mut top.seq0,
            Some(b"time0") => &mut top.time0,
            Some(b"surfaceOp") => &mut top.surface_op,
            Some(b"sourceEventSeqs") => &mut top.source_seqs,
            Some(_) => return scanner.member_value(depth).map(drop),
            None => {
                top.escaped_key = true;
                return scanner.member_value(depth).map(drop);
            }
        };
        let value = Member::read(scanner, depth)?;
        *slot = Member { count: slot.count.saturating_add(1), ..value };
        Ok(())
    })?;
    scanner.skip_whitespace();
    if scanner.pos != text.len() || scanner.non_ascii && std::str::from_utf8(text).is_err() {
        return Err(());
    }
    Ok(())
}

/// One member of an object: its key's span (between the quotes) and its value's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) key: (usize, usize),
    pub(crate) value: Member,
}

/// Objects of up to this many members (blocks, sources, usage: all but odd ones) are read
/// without a heap allocation.
const INLINE_ENTRIES: usize = 8;

/// The members of an object: on the stack up to `INLINE_ENTRIES`, then in a `Vec` (a `Vec` per
/// object showed in the profile as `malloc`/`free`, several per message record). The inline
/// entries are not initialised before they are pushed: zeroing 8 of them (~0.5 KB) for every
/// object read showed as `memset` on both threads of an open.
pub(crate) struct Entries {
    len: usize,
    inline: [MaybeUninit<Entry>; INLINE_ENTRIES],
    spilled: Vec<Entry>,
}

impl Entries {
    pub(crate) fn new() -> Self {
        Entries { len: 0, inline: [MaybeUninit::uninit(); INLINE_ENTRIES], spilled: Vec::new() }
    }

    #[inline]
    pub(crate) fn push(&mut self, entry: Entry) {
        if self.len < INLINE_ENTRIES {
            self.inline[self.len] = MaybeUninit::new(entry);
        } else {
            if self.len == INLINE_ENTRIES {
                self.spilled = self.to_vec();
            }
            self.spilled.push(entry);
        }
        self.len += 1;
    }
}

impl Deref for Entries {
    type Target = [Entry];

    fn deref(&self) -> &[Entry] {
        if self.len <= INLINE_ENTRIES {
            // SAFETY: the first `len` inline entries were written by `push` (`Entry` is `Copy`:
            // nothing to drop, and `MaybeUninit<Entry>` has `Entry`'s layout).
            unsafe { std::slice::from_raw_parts(self.inline.as_ptr().cast::<Entry>(), self.len) }
        } else {
            &self.spilled
        }
    }
}

/// The members of the object at `span` of `text`, in order, pushed onto `out` (new); `Err` if a
/// key holds an escape (it could spell any key) or the object has more than `MAX_ENTRIES` members.
pub(crate) fn entries(text: &[u8], span: (usize, usize), out: &mut Entries) -> Scan<()> {
    let end = entries_from(&text[..span.1], span.0, out)?;
    if end != span.1 {
        return Err(());
    }
    Ok(())
}

/// As `entries`, for the object starting at `start` of `text` (ending where it ends): its
/// members, and the position past its `}` returned, so that a reader that meets an object walks it once.
pub(crate) fn entries_from(text: &[u8], start: usize, out: &mut Entries) -> Scan<usize> {
    let mut scanner = Scanner { bytes: text, pos: start, non_ascii: false };
    entries_in(&mut scanner, 1, out)?;
    Ok(scanner.pos)
}

/// As `entries_from`, with `scanner` at the object (`depth` deep), which it leaves past it, the
/// members pushed onto `out` (new), where its caller keeps it: an `Entries` (~0.5 KB) returned
/// through a `Result` was copied at every object read.
pub(crate) fn entries_in(scanner: &mut Scanner, depth: usize, out: &mut Entries) -> Scan<()> {
    const MAX_ENTRIES: usize = 64;
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    let text = scanner.bytes;
    scanner.object(depth, |scanner, key, depth| {
        let key = key.ok_or(())?;
        if out.len() == MAX_ENTRIES {
            return Err(());
        }
        let key_start = key.as_ptr() as usize - text.as_ptr() as usize;
        let value = Member::read(scanner, depth)?;
        out.push(Entry { key: (key_start, key_start + key.len()), value });
        Ok(())
    })?;
    Ok(())
}

/// The one member of `entries` named `name` (`Err` if it occurs more than once).
pub(crate) fn only<'e>(text: &[u8], entries: &'e [Entry], name: &[u8]) -> Scan<Option<&'e Entry>> {
    let mut found = entries.iter().filter(|entry| &text[entry.key.0..entry.key.1] == name);
    let first = found.next();
    if found.next().is_some() {
        return Err(());
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_members_of_an_object_read_in_order_inline_or_spilled() {
        for count in [0, 1, INLINE_ENTRIES - 1, INLINE_ENTRIES, INLINE_ENTRIES + 1, 3 * INLINE_ENTRIES] {
            let members: Vec<String> = (0..count).map(|k| format!(r#""k{k}":{k}"#)).collect();
            let text = format!("{{{}}}", members.join(","));
            let mut entries = Entries::new();
            let end = entries_from(text.as_bytes(), 0, &mut entries).expect("an object of plain members");
            assert_eq!(end, text.len());
            let read: Vec<(&[u8], Option<i64>)> = entries.iter().map(|entry| (&text.as_bytes()[entry.key.0..entry.key.1], entry.value.int())).collect();
            let want: Vec<(Vec<u8>, Option<i64>)> = (0..count).map(|k| (format!("k{k}").into_bytes(), Some(k as i64))).collect();
            assert_eq!(read.len(), want.len(), "{count} members");
            assert!(read.iter().zip(&want).all(|((key, value), (want_key, want_value))| *key == &want_key[..] && value == want_value), "{count} members");
        }
    }
}
