//! The data of a record the native pass reads, as dshkit presents it: the rules of
//! `python/dshkit/session/dsh/vocabulary.py` `data_to_dshkit` for the types whose translation is a
//! matter of bytes, answering only when sure (`None`: the Python decoder translates the record).
//!
//! - a verbatim type (`turn/start`, `assistant/chunk`, ...), or data that is no object: as stored;
//! - one of the original's own types: `ignorable: true` added as the last member (when the data
//!   has no `ignorable` of its own);
//! - `tool/call`: the key `callId` renamed `call_id` in place;
//! - `turn/end`: as stored unless its `reason.kind` is one dshkit names otherwise (`max-tokens`,
//!   `aborted`).

use crate::log::record_scanner::Kind;
use crate::original::record_top::{entries, only, Entries, Entry, Member};

const IGNORABLE_MEMBER: &[u8] = b",\"ignorable\":true}";
const IGNORABLE_ONLY: &[u8] = b"{\"ignorable\":true}";

/// The JSON of an event's data: its parts, written one after the other.
pub(crate) struct Presented<'a>([&'a [u8]; 3]);

impl<'a> Presented<'a> {
    pub(crate) fn parts(&self) -> [&'a [u8]; 3] {
        self.0
    }

    fn as_stored(data: &'a [u8]) -> Self {
        Presented([data, b"", b""])
    }
}

/// The presented data of a record of `event_type` whose `data` member is `data`.
pub(crate) fn presented_data<'a>(text: &'a [u8], data: &Member, event_type: &[u8], verbatim: bool, ignorable: bool) -> Option<Presented<'a>> {
    let stored = &text[data.span.0..data.span.1];
    if verbatim {
        return Some(Presented::as_stored(stored));
    }
    if !ignorable && event_type != b"tool/call" && event_type != b"turn/end" {
        return None;
    }
    if data.kind != Kind::Object {
        return Some(Presented::as_stored(stored)); // not a mapping: as stored
    }
    let mut members = Entries::new();
    entries(text, data.span, &mut members).ok()?;
    if ignorable {
        if only(text, &members, b"ignorable").ok()?.is_some() {
            return None;
        }
        return Some(match members.len() {
            0 => Presented::as_stored(IGNORABLE_ONLY),
            _ => Presented([&stored[..stored.len() - 1], IGNORABLE_MEMBER, b""]),
        });
    }
    if event_type == b"tool/call" {
        return tool_call(text, data.span, &members);
    }
    turn_end(text, stored, &members)
}

fn tool_call<'a>(text: &'a [u8], span: (usize, usize), members: &[Entry]) -> Option<Presented<'a>> {
    if only(text, members, b"call_id").ok()?.is_some() {
        return None; // two keys would become one
    }
    match only(text, members, b"callId").ok()? {
        None => Some(Presented::as_stored(&text[span.0..span.1])),
        Some(call) => Some(Presented([&text[span.0..call.key.0], b"call_id", &text[call.key.1..span.1]])),
    }
}

fn turn_end<'a>(text: &'a [u8], stored: &'a [u8], members: &[Entry]) -> Option<Presented<'a>> {
    let Some(reason) = only(text, members, b"reason").ok()? else { return Some(Presented::as_stored(stored)) };
    if reason.value.kind != Kind::Object {
        return Some(Presented::as_stored(stored));
    }
    let mut reason_members = Entries::new();
    entries(text, reason.value.span, &mut reason_members).ok()?;
    let Some(kind) = only(text, &reason_members, b"kind").ok()? else { return Some(Presented::as_stored(stored)) };
    if kind.value.kind != Kind::Str {
        return Some(Presented::as_stored(stored));
    }
    match kind.value.plain_str(text)? {
        b"max-tokens" | b"aborted" => None,
        _ => Some(Presented::as_stored(stored)),
    }
}
