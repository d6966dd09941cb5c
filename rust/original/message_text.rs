//! An original message event's record rewritten as dshkit's record of the same event, so that
//! `log/`'s one-pass reader (`read_message_record`) builds its `Message` and the append rules
//! vouch for it (`vouch_message_append`). The rewrite is the rules of
//! `python/dshkit/session/dsh/vocabulary.py` (`message_to_dshkit`, `_block_to_dshkit`,
//! `_source_to_dshkit`, `_message_event_to_dshkit`) and of `codec._message_event` for an append,
//! done on the bytes, for the shapes it is sure of; anything else is `None` and the Python
//! decoder translates the record:
//!
//! - the record is exactly `type`, `seq`, `time`, `data`, `surfaceOp: "append"` and optionally
//!   `sourceEventSeqs` (a replace, or a message off the original's surface, takes Python);
//! - the message is exactly `content`, `source`, `role`, `id`; its blocks are objects; a
//!   `tool-call` block becomes `tool_call`; a `tool-result` block becomes `tool_result` with
//!   `tool_call_id`, its content (blocks named alike in both vocabularies), and `is_error`
//!   (`false` plus `is_error_omitted` when the original had none); an image or file block
//!   referring to an attachment, a model source with `replayState`, a compaction checkpoint's
//!   source take Python; a tool source's `callId` becomes `call_id`;
//! - beside the message, `finishReason` becomes `finish_reason` and `usage`'s token counts are
//!   named in snake case.
//!
//! Keys that would meet a renamed one (`call_id` beside `callId` ...) take Python too.
//!
//! The rewrite walks the record's `data` once: the data, message and content levels are read by
//! the scanner as they are written, and only a block, a source or a usage object is first read
//! into its members (`entries_from`), since a rule there looks at a member that may come last
//! (a block's `type`). Before, each level collected its members and the next read them again, so
//! a block's bytes were scanned five times (a tool result's content seven).

use std::ops::Range;

use crate::json::write::leaves::write_i64;
use crate::log::record_scanner::{Kind, Scan, Scanner, MAX_SCAN_DEPTH};
use crate::original::record_top::{entries_in, only, Entries, Entry, Member, Top};

const USAGE: [(&[u8], &[u8]); 5] = [
    (b"inputTokens", b"input_tokens"),
    (b"outputTokens", b"output_tokens"),
    (b"cacheReadTokens", b"cache_read_tokens"),
    (b"cacheWriteTokens", b"cache_write_tokens"),
    (b"reasoningTokens", b"reasoning_tokens"),
];
/// Block types the vocabularies name differently, or whose fields they do.
const RENAMED_BLOCKS: [&[u8]; 4] = [b"tool-call", b"tool-result", b"image", b"file"];
const RESULT_KEYS: [&[u8]; 3] = [b"toolCallId", b"isError", b"content"];
const COMPACT_PLUGIN: &[u8] = b"compact";
const RESULT_OUT_KEYS: [&[u8]; 3] = [b"tool_call_id", b"is_error", b"is_error_omitted"];

fn key<'a>(text: &'a [u8], entry: &Entry) -> &'a [u8] {
    &text[entry.key.0..entry.key.1]
}

fn value<'a>(text: &'a [u8], member: &Member) -> &'a [u8] {
    &text[member.span.0..member.span.1]
}

/// Writes an object of `members`, each key given by `name` and each value by `write`.
fn write_object(out: &mut Vec<u8>, text: &[u8], members: &[Entry], mut write: impl FnMut(&mut Vec<u8>, &Entry) -> Option<()>, name: impl Fn(&[u8]) -> &[u8]) -> Option<()> {
    out.push(b'{');
    for (i, entry) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(name(key(text, entry)));
        out.extend_from_slice(b"\":");
        write(out, entry)?;
    }
    out.push(b'}');
    Some(())
}

/// Walks the array at the scanner (`Err` if it is none, or `depth` is too deep), `item` reading
/// each item from its first byte on (and leaving the scanner past it).
fn walk_array(scanner: &mut Scanner, depth: usize, mut item: impl FnMut(&mut Scanner, usize) -> Scan<()>) -> Scan<()> {
    scanner.skip_whitespace();
    if depth >= MAX_SCAN_DEPTH {
        return Err(());
    }
    scanner.expect(b'[')?;
    scanner.skip_whitespace();
    if scanner.peek() == Some(b']') {
        scanner.pos += 1;
        return Ok(());
    }
    let mut index = 0;
    loop {
        scanner.skip_whitespace();
        item(scanner, index)?;
        index += 1;
        scanner.skip_whitespace();
        match scanner.peek() {
            Some(b',') => scanner.pos += 1,
            Some(b']') => {
                scanner.pos += 1;
                return Ok(());
            }
            _ => return Err(()),
        }
    }
}

/// The object at the scanner (`depth` deep), which is left past it: its members pushed onto
/// `members` (new), its span returned.
fn object_at(scanner: &mut Scanner, depth: usize, members: &mut Entries) -> Scan<Member> {
    scanner.skip_whitespace();
    let start = scanner.pos;
    entries_in(scanner, depth, members)?;
    Ok(Member { count: 1, kind: Kind::Object, span: (start, scanner.pos), escaped: false })
}

/// Copies the value at the scanner to `out`, scanning it once.
fn copy_value(out: &mut Vec<u8>, scanner: &mut Scanner, depth: usize) -> Scan<Kind> {
    scanner.skip_whitespace();
    let start = scanner.pos;
    let kind = scanner.member_value(depth)?;
    out.extend_from_slice(&scanner.bytes[start..scanner.pos]);
    Ok(kind)
}

/// Writes a member's key `name` (after a comma unless it is the object's first, `written` so far).
fn write_key(out: &mut Vec<u8>, written: &mut usize, name: &[u8]) {
    if *written > 0 {
        out.push(b',');
    }
    *written += 1;
    out.push(b'"');
    out.extend_from_slice(name);
    out.extend_from_slice(b"\":");
}

/// The type of a block (an object): `Some(None)` without one, `None` when unsure.
fn block_type<'a>(text: &'a [u8], members: &[Entry]) -> Option<Option<&'a [u8]>> {
    match only(text, members, b"type").ok()? {
        None => Some(None),
        Some(entry) if entry.value.kind == Kind::Str => Some(Some(entry.value.plain_str(text)?)),
        Some(_) => Some(None), // not a str: no block type either vocabulary names
    }
}

/// A `tool-result`'s content: copied when each block reads the same in both vocabularies.
fn write_result_content(out: &mut Vec<u8>, text: &[u8], content: Option<&Entry>) -> Option<()> {
    let Some(content) = content else {
        out.extend_from_slice(b"[]");
        return Some(());
    };
    let mut scanner = Scanner { bytes: &text[..content.value.span.1], pos: content.value.span.0, non_ascii: false };
    let same_in_both = |scanner: &mut Scanner, _| {
        let mut members = Entries::new();
        object_at(scanner, 2, &mut members)?;
        match block_type(text, &members) {
            Some(kind) if !kind.is_some_and(|kind| RENAMED_BLOCKS.contains(&kind)) => Ok(()),
            _ => Err(()),
        }
    };
    walk_array(&mut scanner, 1, same_in_both).ok()?;
    out.extend_from_slice(value(text, &content.value));
    Some(())
}

fn write_tool_result(out: &mut Vec<u8>, text: &[u8], members: &[Entry]) -> Option<()> {
    let (call_id, is_error) = (only(text, members, b"toolCallId").ok()?, only(text, members, b"isError").ok()?);
    let content = only(text, members, b"content").ok()?;
    let mut kept = Entries::new();
    members.iter().filter(|entry| !RESULT_KEYS.contains(&key(text, entry))).for_each(|entry| kept.push(*entry));
    if kept.iter().any(|entry| RESULT_OUT_KEYS.contains(&key(text, entry))) {
        return None;
    }
    let write_kept = |out: &mut Vec<u8>, entry: &Entry| {
        out.extend_from_slice(if key(text, entry) == b"type" { b"\"tool_result\"" } else { value(text, &entry.value) });
        Some(())
    };
    write_object(out, text, &kept, write_kept, |name| name)?;
    out.pop(); // the closing brace: the renamed fields follow
    if !kept.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(b"\"tool_call_id\":");
    out.extend_from_slice(call_id.map_or(b"null", |entry| value(text, &entry.value)));
    out.extend_from_slice(b",\"content\":");
    write_result_content(out, text, content)?;
    match is_error {
        Some(entry) => {
            out.extend_from_slice(b",\"is_error\":");
            out.extend_from_slice(value(text, &entry.value));
        }
        None => out.extend_from_slice(b",\"is_error\":false,\"is_error_omitted\":true"),
    }
    out.push(b'}');
    Some(())
}

fn write_block(out: &mut Vec<u8>, text: &[u8], block: &Member, members: &[Entry]) -> Option<()> {
    match block_type(text, members)? {
        Some(b"tool-call") => write_object(
            out,
            text,
            members,
            |out, entry| {
                out.extend_from_slice(if key(text, entry) == b"type" { b"\"tool_call\"" } else { value(text, &entry.value) });
                Some(())
            },
            |name| name,
        ),
        Some(b"tool-result") => write_tool_result(out, text, members),
        Some(b"image" | b"file") if only(text, members, b"attachment").ok()?.is_some_and(|entry| entry.value.kind == Kind::Object) => None,
        _ => {
            out.extend_from_slice(value(text, block));
            Some(())
        }
    }
}

fn write_source(out: &mut Vec<u8>, text: &[u8], source: &Member, members: &[Entry]) -> Option<()> {
    let kind = only(text, members, b"kind").ok()??.value.plain_str(text)?;
    let present = |name: &[u8]| only(text, members, name).ok().map(|entry| entry.is_some());
    match kind {
        b"model" if present(b"replayState")? => None,
        b"plugin" => {
            // A compaction checkpoint's source names its compaction otherwise (or the name holds an escape).
            let plugin = only(text, members, b"plugin").ok()?;
            if plugin.is_some_and(|entry| entry.value.kind == Kind::Str && entry.value.plain_str(text).is_none_or(|name| name == COMPACT_PLUGIN)) {
                return None;
            }
            out.extend_from_slice(value(text, source));
            Some(())
        }
        b"tool" if present(b"callId")? => {
            if present(b"call_id")? {
                return None;
            }
            write_object(out, text, members, |out, entry| Some(out.extend_from_slice(value(text, &entry.value))), |name| {
                if name == b"callId" { b"call_id" } else { name }
            })
        }
        _ => {
            out.extend_from_slice(value(text, source));
            Some(())
        }
    }
}

/// A message's content at the scanner, each block (an object) read once and rewritten.
fn write_content(out: &mut Vec<u8>, scanner: &mut Scanner, depth: usize) -> Scan<()> {
    let text = scanner.bytes;
    out.push(b'[');
    walk_array(scanner, depth, |scanner, index| {
        if index > 0 {
            out.push(b',');
        }
        let mut members = Entries::new();
        let block = object_at(scanner, depth + 1, &mut members)?;
        write_block(out, text, &block, &members).ok_or(())
    })?;
    out.push(b']');
    Ok(())
}

/// The object member at the scanner read once by `write` (given its members and span).
fn write_object_at(out: &mut Vec<u8>, scanner: &mut Scanner, depth: usize, write: fn(&mut Vec<u8>, &[u8], &Member, &[Entry]) -> Option<()>) -> Scan<()> {
    let mut members = Entries::new();
    let object = object_at(scanner, depth, &mut members)?;
    write(out, scanner.bytes, &object, &members).ok_or(())
}

/// The original's message at the scanner (`depth` deep) as dshkit's message object, walked once.
fn write_message(out: &mut Vec<u8>, scanner: &mut Scanner, depth: usize) -> Scan<()> {
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    let (mut seen, mut written) = ([0u8; 4], 0);
    out.push(b'{');
    let members = scanner.object(depth, |scanner, key, depth| {
        let key = key.ok_or(())?;
        write_key(out, &mut written, key);
        let field = [b"content".as_slice(), b"source", b"role", b"id"].iter().position(|name| *name == key);
        if let Some(field) = field {
            seen[field] = seen[field].saturating_add(1);
        }
        scanner.skip_whitespace();
        match field {
            Some(0) => write_content(out, scanner, depth),
            Some(1) => write_object_at(out, scanner, depth, write_source),
            _ => copy_value(out, scanner, depth).map(drop),
        }
    })?;
    out.push(b'}');
    if members != 4 || seen != [1; 4] {
        return Err(());
    }
    Ok(())
}

/// An assistant/message or tool/result's data at the scanner (`depth` deep): the message
/// rewritten, the names beside it, walked once.
fn write_message_data(out: &mut Vec<u8>, scanner: &mut Scanner, depth: usize) -> Scan<()> {
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    let (mut messages, mut finish, mut finish_snake, mut written) = (0, 0, 0, 0);
    out.push(b'{');
    scanner.object(depth, |scanner, key, depth| {
        let key = key.ok_or(())?;
        let name: &[u8] = if key == b"finishReason" { b"finish_reason" } else { key };
        write_key(out, &mut written, name);
        scanner.skip_whitespace();
        match key {
            b"message" => {
                messages += 1;
                write_message(out, scanner, depth)
            }
            b"usage" if scanner.peek() == Some(b'{') => write_object_at(out, scanner, depth, write_usage),
            _ => {
                finish += usize::from(key == b"finishReason");
                finish_snake += usize::from(key == b"finish_reason");
                copy_value(out, scanner, depth).map(drop)
            }
        }
    })?;
    out.push(b'}');
    // As reading both names would: one `message`; `finishReason` once and never beside `finish_reason`.
    if messages != 1 || finish > 1 || finish == 1 && finish_snake > 0 {
        return Err(());
    }
    Ok(())
}

fn write_usage(out: &mut Vec<u8>, text: &[u8], _usage: &Member, members: &[Entry]) -> Option<()> {
    let renamed = |name: &[u8]| USAGE.iter().find(|(from, _)| *from == name).map(|(_, to)| *to);
    let names: Vec<&[u8]> = members.iter().map(|entry| renamed(key(text, entry)).unwrap_or(key(text, entry))).collect();
    if (1..names.len()).any(|i| names[..i].contains(&names[i])) {
        return None; // two keys would become one
    }
    write_object(out, text, members, |out, entry| Some(out.extend_from_slice(value(text, &entry.value))), |name| renamed(name).unwrap_or(name))
}

/// The data of a message event of `event_type` at the scanner (`depth` deep) as dshkit's, read
/// and written to `out` in one walk that also vouches for its JSON as the record's scan would
/// (`Err`: not JSON the scan vouches for, or a shape left to Python; `out` may then hold part of
/// it, and the caller scans it again).
fn write_dshkit_data(out: &mut Vec<u8>, scanner: &mut Scanner, event_type: &[u8], depth: usize) -> Scan<()> {
    let write = match event_type {
        b"user/message" => write_message,
        b"assistant/message" | b"tool/result" => write_message_data,
        _ => return Err(()),
    };
    out.reserve(scanner.bytes.len() - scanner.pos + RECORD_ENVELOPE);
    write(out, scanner, depth)
}

/// Room for what dshkit's record adds around the data (seq, time, type, surface op).
const RECORD_ENVELOPE: usize = 160;

/// The start of dshkit's record of a message event of `event_type` whose data is at the scanner
/// (`depth` deep), written to the end of `record`: `{"data":` and the data as dshkit's
/// (`write_dshkit_data`); the record is finished by `dshkit_message_record`. On `Err`, `record`
/// is left as it was.
pub(crate) fn begin_dshkit_record(scanner: &mut Scanner, event_type: &[u8], depth: usize, record: &mut Vec<u8>) -> Scan<()> {
    let mark = record.len();
    record.extend_from_slice(b"{\"data\":");
    let written = write_dshkit_data(record, scanner, event_type, depth);
    if written.is_err() {
        record.truncate(mark);
    }
    written
}

/// dshkit's record of the original's message event record `text` (its top level `top`, of
/// `event_type`, event `seq`), an append, finished at the end of `record` (begun there by the
/// scan when `top.record_start` says so, else written whole): its span there; `None` when
/// unsure, `record` then left without it. dshkit's reader takes the members in any order: the
/// data comes first, as the scan writes it.
pub(crate) fn dshkit_message_record(text: &[u8], top: &Top, event_type: &[u8], seq: usize, record: &mut Vec<u8>) -> Option<Range<usize>> {
    let start = top.record_start.unwrap_or(record.len());
    let finished = finish_record(text, top, event_type, seq, record);
    if finished.is_none() {
        record.truncate(start);
    }
    finished.map(|()| start..record.len())
}

fn finish_record(text: &[u8], top: &Top, event_type: &[u8], seq: usize, out: &mut Vec<u8>) -> Option<()> {
    let once = [&top.event_type, &top.seq, &top.time, &top.data, &top.surface_op].iter().all(|member| member.count == 1);
    let sources = (top.source_seqs.count == 1).then_some(&top.source_seqs);
    if !once || top.escaped_key || top.source_seqs.count > 1 || top.members != 5 + usize::from(sources.is_some()) {
        return None;
    }
    if top.seq.int()? != seq as i64 || top.surface_op.plain_str(text)? != b"append" {
        return None;
    }
    let time = top.time.int()?;
    if top.record_start.is_none() {
        // `data` came before `type`, or its walk in the scan failed: walked here.
        let data = &top.data;
        let mut scanner = Scanner { bytes: &text[..data.span.1], pos: data.span.0, non_ascii: false };
        begin_dshkit_record(&mut scanner, event_type, 1, out).ok()?;
        if scanner.pos != data.span.1 {
            return None;
        }
    }
    out.extend_from_slice(b",\"seq\":");
    write_i64(out, seq as i64);
    out.extend_from_slice(b",\"time\":");
    write_i64(out, time);
    out.extend_from_slice(b",\"type\":\"");
    out.extend_from_slice(event_type);
    out.extend_from_slice(b"\",\"surface_op\":\"append\",\"source_event_seqs\":");
    match sources {
        Some(member) if text[member.span.0] == b'[' => out.extend_from_slice(value(text, member)),
        Some(_) => return None,
        None => out.extend_from_slice(b"[]"),
    }
    out.push(b'}');
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(text: &str, event_type: &str, seq: usize) -> Option<String> {
        let mut record = b"before".to_vec();
        let mut top = Top::EMPTY;
        crate::original::record_top::scan_top(text.as_bytes(), &mut record, &mut top).ok()?;
        let Some(span) = dshkit_message_record(text.as_bytes(), &top, event_type.as_bytes(), seq, &mut record) else {
            assert_eq!(record, b"before", "nothing left behind");
            return None;
        };
        assert_eq!((&record[..span.start], span.end), (&b"before"[..], record.len()));
        Some(String::from_utf8(record[span].to_vec()).unwrap())
    }

    #[test]
    fn a_prompt_keeps_its_message_and_gains_dshkit_envelope_names() {
        let text = r#"{"type":"user/message","seq":3,"time":9,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#;
        assert_eq!(
            rewritten(text, "user/message", 3).unwrap(),
            r#"{"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"},"seq":3,"time":9,"type":"user/message","surface_op":"append","source_event_seqs":[]}"#
        );
        assert_eq!(rewritten(text, "user/message", 4), None); // another seq
        assert_eq!(rewritten(&text.replace(r#","surfaceOp":"append""#, ""), "user/message", 3), None); // off the surface
        assert_eq!(rewritten(&text.replace(r#""id":"u1""#, r#""id":"u1","x":1"#), "user/message", 3), None);
    }

    #[test]
    fn data_before_the_type_is_rewritten_after_the_scan_the_same() {
        let text = r#"{"type":"user/message","seq":3,"time":9,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}"#;
        let data_first = r#"{"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u1"},"type":"user/message","seq":3,"time":9,"surfaceOp":"append"}"#;
        let mut record = Vec::new();
        let mut top = Top::EMPTY;
        crate::original::record_top::scan_top(data_first.as_bytes(), &mut record, &mut top).unwrap();
        assert!(top.record_start.is_none() && record.is_empty(), "the type was not known when the data was met");
        assert_eq!(rewritten(data_first, "user/message", 3), rewritten(text, "user/message", 3));
        assert!(rewritten(text, "user/message", 3).is_some());
        // A scan that began the record, then failed: nothing left in the buffer.
        let torn = &text[..text.len() - 1];
        let mut top = Top::EMPTY;
        assert!(crate::original::record_top::scan_top(torn.as_bytes(), &mut record, &mut top).is_err() && record.is_empty());
    }

    #[test]
    fn calls_results_sources_and_usage_are_renamed() {
        let answer = r#"{"type":"assistant/message","seq":4,"time":9,"data":{"turn":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c","name":"n","arguments":"{}"}],"source":{"kind":"model"},"id":"a"},"usage":{"inputTokens":1,"x":2},"finishReason":"stop"},"sourceEventSeqs":[1,2],"surfaceOp":"append"}"#;
        assert_eq!(
            rewritten(answer, "assistant/message", 4).unwrap(),
            r#"{"data":{"turn":1,"message":{"role":"assistant","content":[{"type":"tool_call","id":"c","name":"n","arguments":"{}"}],"source":{"kind":"model"},"id":"a"},"usage":{"input_tokens":1,"x":2},"finish_reason":"stop"},"seq":4,"time":9,"type":"assistant/message","surface_op":"append","source_event_seqs":[1,2]}"#
        );
        let result = r#"{"type":"tool/result","seq":5,"time":9,"data":{"message":{"role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"t"}]}],"id":"r"}},"surfaceOp":"append"}"#;
        assert_eq!(
            rewritten(result, "tool/result", 5).unwrap(),
            r#"{"data":{"message":{"role":"user","source":{"kind":"tool","call_id":"c"},"content":[{"type":"tool_result","tool_call_id":"c","content":[{"type":"text","text":"t"}],"is_error":false,"is_error_omitted":true}],"id":"r"}},"seq":5,"time":9,"type":"tool/result","surface_op":"append","source_event_seqs":[]}"#
        );
        assert_eq!(rewritten(&answer.replace(r#""x":2"#, r#""input_tokens":2"#), "assistant/message", 4), None);
        assert_eq!(rewritten(&answer.replace(r#""kind":"model""#, r#""kind":"model","replayState":{}"#), "assistant/message", 4), None);
        assert_eq!(rewritten(&result.replace(r#""callId":"c""#, r#""callId":"c","call_id":"c""#), "tool/result", 5), None);
    }
}
