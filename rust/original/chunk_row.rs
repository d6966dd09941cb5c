//! The original's packed chunk rows (`python/dshkit/session/dsh/chunk_rows.py`, `expand_row`)
//! read natively: the row's `data` scanned strictly, then each member written as the JSON of the
//! `assistant/chunk` data it stands for. `Err(())` for anything `expand_row` might read
//! differently or refuse (the whole log then takes the Python path, which names what is wrong).

use crate::json::write::leaves::write_i64;
use crate::log::record_scanner::{Kind, Scan, Scanner};

/// A packed row's data: its ints, and its strings as their JSON tokens (quotes and escapes kept,
/// so each is written out exactly as it was read).
pub(crate) struct Row<'a> {
    turn: i64,
    step: i64,
    index: i64,
    id: Option<&'a [u8]>,
    name: Option<&'a [u8]>,
    gaps: Vec<i64>,
    members: Vec<&'a [u8]>,
}

impl Row<'_> {
    /// How many events the row stands for.
    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// The time of each member, from the row's `time0` (`None` past an `i64`).
    pub(crate) fn times(&self, time0: i64) -> Option<Vec<i64>> {
        let mut times = Vec::with_capacity(self.members.len());
        let mut time = time0;
        times.push(time);
        for gap in &self.gaps {
            time = time.checked_add(*gap)?;
            times.push(time);
        }
        Some(times)
    }

    /// The JSON of member `k`'s data, `{"turn","step","chunk":{"type": delta, "index", ...}}`.
    pub(crate) fn write_member(&self, k: usize, delta: &str, out: &mut Vec<u8>) {
        // Written in place: no `format!` string made and freed per chunk.
        out.extend_from_slice(b"{\"turn\":");
        write_i64(out, self.turn);
        out.extend_from_slice(b",\"step\":");
        write_i64(out, self.step);
        out.extend_from_slice(b",\"chunk\":{\"type\":\"");
        out.extend_from_slice(delta.as_bytes());
        out.extend_from_slice(b"\",\"index\":");
        write_i64(out, self.index);
        match self.id {
            Some(id) => {
                out.extend_from_slice(b",\"id\":");
                out.extend_from_slice(id);
                if let Some(name) = self.name {
                    out.extend_from_slice(b",\"name\":");
                    out.extend_from_slice(name);
                }
                out.extend_from_slice(b",\"argumentsDelta\":");
            }
            None => out.extend_from_slice(b",\"text\":"),
        }
        out.extend_from_slice(self.members[k]);
        out.extend_from_slice(b"}}");
    }
}

/// The string at the scanner (its token), else `Err`.
fn string_token<'a>(scanner: &mut Scanner<'a>) -> Scan<&'a [u8]> {
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'"') {
        return Err(());
    }
    let start = scanner.pos;
    scanner.string()?;
    Ok(&scanner.bytes[start..scanner.pos])
}

/// The array at the scanner, each item read by `item`.
fn items<'a, T>(scanner: &mut Scanner<'a>, mut item: impl FnMut(&mut Scanner<'a>) -> Scan<T>) -> Scan<Vec<T>> {
    scanner.expect(b'[')?;
    let mut out = Vec::new();
    scanner.skip_whitespace();
    if scanner.peek() == Some(b']') {
        scanner.pos += 1;
        return Ok(out);
    }
    loop {
        out.push(item(scanner)?);
        scanner.skip_whitespace();
        match scanner.peek() {
            Some(b',') => scanner.pos += 1,
            Some(b']') => {
                scanner.pos += 1;
                return Ok(out);
            }
            _ => return Err(()),
        }
    }
}

fn int(scanner: &mut Scanner<'_>) -> Scan<i64> {
    match scanner.member_value(2)? {
        Kind::Int(value) => Ok(value),
        _ => Err(()),
    }
}

/// The row data at `span` of `text` (an object), `calls` for a `tool-call-chunks` row: exactly
/// `turn, step, index, dt, texts` (or `turn, step, index, id, name?, dt, args`), each once, ints
/// and strings where `expand_row` asks for them, at least one member and one gap fewer.
pub(crate) fn read_row(text: &[u8], span: (usize, usize), calls: bool) -> Scan<Row<'_>> {
    let mut scanner = Scanner { bytes: &text[..span.1], pos: span.0, non_ascii: false };
    let (mut turn, mut step, mut index, mut gaps, mut members) = (None, None, None, None, None);
    let (mut id, mut name) = (None, None);
    let members_key: &[u8] = if calls { b"args" } else { b"texts" };
    scanner.object(1, |scanner, key, _| {
        let key = key.ok_or(())?;
        let fresh = match key {
            b"turn" => turn.replace(int(scanner)?).is_none(),
            b"step" => step.replace(int(scanner)?).is_none(),
            b"index" => index.replace(int(scanner)?).is_none(),
            b"dt" => gaps.replace(items(scanner, int)?).is_none(),
            b"id" if calls => id.replace(string_token(scanner)?).is_none(),
            b"name" if calls => name.replace(string_token(scanner)?).is_none(),
            _ if key == members_key => members.replace(items(scanner, string_token)?).is_none(),
            _ => false,
        };
        if fresh { Ok(()) } else { Err(()) }
    })?;
    let (Some(turn), Some(step), Some(index), Some(gaps), Some(members)) = (turn, step, index, gaps, members) else {
        return Err(());
    };
    if members.is_empty() || gaps.len() != members.len() - 1 || calls != id.is_some() {
        return Err(());
    }
    Ok(Row { turn, step, index, id, name, gaps, members })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(text: &[u8], calls: bool) -> Option<Vec<String>> {
        let row = read_row(text, (0, text.len()), calls).ok()?;
        let delta = if calls { "tool-call-delta" } else { "text-delta" };
        Some(
            (0..row.len())
                .map(|k| {
                    let mut out = Vec::new();
                    row.write_member(k, delta, &mut out);
                    String::from_utf8(out).unwrap()
                })
                .collect(),
        )
    }

    #[test]
    fn a_text_row_is_written_member_by_member_with_its_strings_as_read() {
        let text = br#"{"turn":2,"step":1,"index":-0,"dt":[5,-3],"texts":["a","\n\"",  "\u00e9"]}"#;
        let written = members(text, false).unwrap();
        assert_eq!(written[0], r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}"#);
        assert_eq!(written[1], r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\n\""}}"#);
        assert_eq!(written[2], r#"{"turn":2,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\u00e9"}}"#);
        let row = read_row(text, (0, text.len()), false).unwrap();
        assert_eq!(row.times(10), Some(vec![10, 15, 12]));
        assert_eq!(row.times(i64::MAX), None);
    }

    #[test]
    fn a_call_row_names_its_call_and_its_name_when_it_has_one() {
        let named = br#"{"turn":1,"step":1,"index":1,"id":"c","name":"bash","dt":[0],"args":["{","}"]}"#;
        assert_eq!(
            members(named, true).unwrap()[1],
            r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c","name":"bash","argumentsDelta":"}"}}"#
        );
        let unnamed = br#"{"turn":1,"step":1,"index":1,"id":"c","dt":[],"args":["{}"]}"#;
        assert_eq!(members(unnamed, true).unwrap(), [r#"{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c","argumentsDelta":"{}"}}"#]);
    }

    #[test]
    fn any_doubt_is_refused() {
        for text in [
            &br#"{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}"#[..],
            br#"{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}"#,
            br#"{"turn":1.0,"step":1,"index":0,"dt":[],"texts":["a"]}"#,
            br#"{"turn":1,"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}"#,
            br#"{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"],"x":1}"#,
            br#"{"turn":1,"step":1,"index":0,"dt":[],"texts":[1]}"#,
            br#"{"turn":1,"step":1,"ind\u0065x":0,"dt":[],"texts":["a"]}"#,
            br#"{"turn":1,"step":1,"index":0,"id":"c","dt":[],"texts":["a"]}"#,
        ] {
            assert!(members(text, false).is_none(), "{}", String::from_utf8_lossy(text));
        }
        assert!(members(br#"{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}"#, true).is_none()); // no id
        assert!(members(br#"{"turn":1,"step":1,"index":0,"id":"c","name":1,"dt":[],"args":["a"]}"#, true).is_none());
    }
}
