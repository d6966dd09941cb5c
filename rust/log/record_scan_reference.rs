//! The first validating scan of `decode_records` (vouching through `Vec`s of members and
//! lookups), kept for the tests only: the single-pass scan of `record_scan.rs` must give exactly
//! its verdicts (`record_scan::tests` compare the two on many generated records). One rule was
//! changed since, in both: a written seq sends a message record to the parser only when it is an
//! integer as the scan reads one (`message_type`).

use crate::json::scan::plain_run_len;
use crate::log::plain_rules::{plain_rule, PlainData, PlainField};
use crate::log::record_scan::Sorted;

/// Deeper records take the full path (the parser's own limit is higher).
const MAX_SCAN_DEPTH: usize = 64;
/// Objects with more members than this take the full path (keeps duplicate detection cheap).
const MAX_MEMBERS: usize = 32;


/// What a scanned value is (spans are byte ranges of the scanned text).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Int(i64),
    /// A string's text between its quotes (escapes left as written).
    Str,
    Object(usize, usize),
    Other,
}

#[derive(Clone, Copy, Debug)]
struct Member {
    key: (usize, usize),
    value: Kind,
}

/// `Err(())`: not vouched for, take the full path.
type Scan<T> = Result<T, ()>;

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Scan<()> {
        self.skip_whitespace();
        if self.peek() != Some(byte) {
            return Err(());
        }
        self.pos += 1;
        Ok(())
    }

    fn value(&mut self, depth: usize, members: Option<&mut Vec<Member>>) -> Scan<Kind> {
        self.skip_whitespace();
        match self.peek().ok_or(())? {
            b'{' => self.object(depth, members),
            b'[' => self.array(depth),
            b'"' => {
                self.string()?;
                Ok(Kind::Str)
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(()),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Scan<Kind> {
        if !self.bytes[self.pos..].starts_with(word) {
            return Err(());
        }
        self.pos += word.len();
        Ok(Kind::Other)
    }

    /// An object; with `members`, its members are collected (keys must hold no escape), and with
    /// `data` too, the members of its member `"data"` if that is an object.
    fn object(&mut self, depth: usize, members: Option<&mut Vec<Member>>) -> Scan<Kind> {
        self.object_with_data(depth, members, None)
    }

    fn object_with_data(
        &mut self,
        depth: usize,
        mut members: Option<&mut Vec<Member>>,
        mut data: Option<&mut Vec<Member>>,
    ) -> Scan<Kind> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        let start = self.pos;
        self.pos += 1; // '{'
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Kind::Object(start, self.pos));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                return Err(());
            }
            let (key_start, key_end, escaped) = self.string()?;
            self.expect(b':')?;
            let inner = match data.as_deref_mut() {
                Some(inner) if &self.bytes[key_start..key_end] == b"data" => {
                    if !inner.is_empty() {
                        return Err(()); // "data" twice
                    }
                    Some(inner)
                }
                _ => None,
            };
            let value = self.value(depth + 1, inner)?;
            if let Some(members) = members.as_deref_mut() {
                if escaped || members.len() >= MAX_MEMBERS {
                    return Err(());
                }
                members.push(Member { key: (key_start, key_end), value });
            }
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Kind::Object(start, self.pos));
                }
                _ => return Err(()),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Scan<Kind> {
        if depth >= MAX_SCAN_DEPTH {
            return Err(());
        }
        self.pos += 1; // '['
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Kind::Other);
        }
        loop {
            self.value(depth + 1, None)?;
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Kind::Other);
                }
                _ => return Err(()),
            }
        }
    }

    /// A string at its opening quote: (text start, text end, whether it holds an escape).
    fn string(&mut self) -> Scan<(usize, usize, bool)> {
        self.pos += 1; // '"'
        let start = self.pos;
        let mut escaped = false;
        loop {
            // Most strings of a record are short keys and names: a byte loop, the long run by words.
            while let Some(&byte) = self.bytes.get(self.pos) {
                if byte == b'"' || byte == b'\\' || byte < 0x20 {
                    break;
                }
                self.pos += 1;
                if self.pos - start == 16 {
                    self.pos += plain_run_len(&self.bytes[self.pos..]);
                    break;
                }
            }
            match self.peek().ok_or(())? {
                b'"' => {
                    self.pos += 1;
                    return Ok((start, self.pos - 1, escaped));
                }
                b'\\' => {
                    escaped = true;
                    match self.bytes.get(self.pos + 1).ok_or(())? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 2,
                        b'u' => {
                            let hex = self.bytes.get(self.pos + 2..self.pos + 6).ok_or(())?;
                            let text = std::str::from_utf8(hex).map_err(|_| ())?;
                            let code = u32::from_str_radix(text, 16).map_err(|_| ())?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) || (0xD800..=0xDFFF).contains(&code) {
                                return Err(()); // surrogates (pairs included) take the full path
                            }
                            self.pos += 6;
                        }
                        _ => return Err(()),
                    }
                }
                _ => return Err(()), // a control character
            }
        }
    }

    /// An integer of at most 18 digits, or a fraction without exponent: always in range.
    fn number(&mut self) -> Scan<Kind> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let start = self.pos;
        match self.peek().ok_or(())? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => return Err(()),
        }
        let digits = &self.bytes[start..self.pos];
        if digits.len() > 18 || matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(());
        }
        let mut kind = Kind::Int(0);
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let fraction = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if self.pos == fraction || self.pos - fraction > 20 {
                return Err(());
            }
            kind = Kind::Other;
        }
        if let Some(b'e' | b'E') = self.peek() {
            return Err(());
        }
        if kind == Kind::Other {
            return Ok(kind);
        }
        let magnitude = digits.iter().fold(0i64, |value, &digit| value * 10 + (digit - b'0') as i64);
        Ok(Kind::Int(if negative { -magnitude } else { magnitude }))
    }
}

/// The members of the object `text` if the scan vouches for it (a whole value, nothing after).
fn scan_object(text: &[u8]) -> Scan<Vec<Member>> {
    Ok(scan_record(text, false)?.0)
}

/// The members of the object `text` and (with `with_data`) of its member `"data"`, if the scan
/// vouches for it.
fn scan_record(text: &[u8], with_data: bool) -> Scan<(Vec<Member>, Vec<Member>)> {
    let mut scanner = Scanner { bytes: text, pos: 0 };
    let mut members = Vec::with_capacity(8);
    let mut data = Vec::new();
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return Err(());
    }
    scanner.object_with_data(0, Some(&mut members), if with_data { Some(&mut data) } else { None })?;
    scanner.skip_whitespace();
    if scanner.pos != text.len() {
        return Err(());
    }
    Ok((members, data))
}

/// The type of a record written the way dshkit writes it (`{"seq":N,"time":T,"type":"...",`),
/// if it is that of a message event and `N` is `seq`: such a record goes straight to the parser.
/// `N` must be a plain JSON integer as this scan reads one (no leading zero, at most 18 digits):
/// a record whose written seq is anything else is never sent to the parser by its prefix.
fn message_type(text: &[u8], seq: usize) -> Option<(usize, usize)> {
    let digits = |at: usize| at + text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let rest = text.strip_prefix(b"{\"seq\":")?;
    let mut at = text.len() - rest.len();
    let seq_end = digits(at);
    let written_seq = &text[at..seq_end];
    if written_seq.len() > 18 || written_seq.len() > 1 && written_seq[0] == b'0' {
        return None;
    }
    if std::str::from_utf8(written_seq).ok()?.parse::<usize>().ok()? != seq {
        return None;
    }
    at = seq_end;
    at += text[at..].starts_with(b",\"time\":").then_some(8)?;
    at = digits(at);
    at += text[at..].starts_with(b",\"type\":\"").then_some(9)?;
    let end = at + text[at..].iter().position(|&b| b == b'"')?;
    MESSAGE_TYPES.contains(&&text[at..end]).then_some((at, end))
}

/// The members of an object already scanned (at `start..end` of `text`), collected.
fn members_of(text: &[u8], start: usize, end: usize) -> Scan<Vec<Member>> {
    let members = scan_object(&text[start..end])?;
    Ok(members
        .into_iter()
        .map(|m| Member { key: (m.key.0 + start, m.key.1 + start), value: shift(m.value, start) })
        .collect())
}

fn shift(kind: Kind, by: usize) -> Kind {
    match kind {
        Kind::Object(start, end) => Kind::Object(start + by, end + by),
        other => other,
    }
}

/// The value under `key`; `Err` when the key repeats (the parser keeps the last: take the full path).
fn lookup(text: &[u8], members: &[Member], key: &[u8]) -> Scan<Option<Kind>> {
    let mut found = None;
    for member in members {
        if &text[member.key.0..member.key.1] == key {
            if found.is_some() {
                return Err(());
            }
            found = Some(member.value);
        }
    }
    Ok(found)
}

fn has_int(text: &[u8], members: &[Member], key: &[u8]) -> Scan<bool> {
    Ok(matches!(lookup(text, members, key)?, Some(Kind::Int(_))))
}

fn has_str(text: &[u8], members: &[Member], key: &[u8]) -> Scan<bool> {
    Ok(lookup(text, members, key)? == Some(Kind::Str))
}

/// Whether the data of a plain event of type `event_type` passes the append rules of its type
/// (`dshkit.session.events.check_plain_data`); `Err` for a type this scan does not vouch for.
fn plain_data_passes(event_type: &[u8], text: &[u8], data: &[Member]) -> Scan<bool> {
    Ok(plain_rule(event_type).ok_or(())?.holds(&Members { text, members: data }))
}

/// The members of a plain event's data, looked up as a rule asks (a repeated key, or a scan that
/// fails, is a field not proven: the record takes the full path either way).
struct Members<'a> {
    text: &'a [u8],
    members: &'a [Member],
}

impl PlainData for Members<'_> {
    fn int(&self, field: PlainField) -> bool {
        has_int(self.text, self.members, field.key().as_bytes()).unwrap_or(false)
    }

    fn text(&self, field: PlainField) -> bool {
        has_str(self.text, self.members, field.key().as_bytes()).unwrap_or(false)
    }

    fn reason_with_kind(&self) -> bool {
        let Ok(Some(Kind::Object(start, end))) = lookup(self.text, self.members, b"reason") else { return false };
        members_of(self.text, start, end).is_ok_and(|reason| has_str(self.text, &reason, b"kind").unwrap_or(false))
    }
}

const MESSAGE_TYPES: [&[u8]; 3] = [b"user/message", b"assistant/message", b"tool/result"];

pub(crate) fn sort(text: &[u8], seq: usize) -> Sorted {
    let sorted = || -> Scan<Sorted> {
        std::str::from_utf8(text).map_err(|_| ())?;
        if let Some(span) = message_type(text, seq) {
            return Ok(Sorted::Message(span));
        }
        let (top, data) = scan_record(text, true)?;
        let event_type = match lookup(text, &top, b"type")? {
            Some(Kind::Str) => {
                let member = top.iter().find(|m| &text[m.key.0..m.key.1] == b"type").expect("found above");
                // The value's span: after the key's closing quote, the colon, the opening quote.
                let (start, end) = value_span(text, member.key.1)?;
                (start, end)
            }
            _ => return Err(()),
        };
        let type_text = &text[event_type.0..event_type.1];
        if type_text.contains(&b'\\') {
            return Err(());
        }
        if MESSAGE_TYPES.contains(&type_text) {
            return Ok(Sorted::Message(event_type));
        }
        if top.len() != 4 || lookup(text, &top, b"seq")? != Some(Kind::Int(seq as i64)) {
            return Err(());
        }
        let Some(Kind::Int(time)) = lookup(text, &top, b"time")? else { return Err(()) };
        let Some(Kind::Object(data_start, data_end)) = lookup(text, &top, b"data")? else { return Err(()) };
        if !plain_data_passes(type_text, text, &data)? {
            return Err(());
        }
        Ok(Sorted::Plain(event_type, time, (data_start, data_end)))
    };
    sorted().unwrap_or(Sorted::Other)
}

/// The span of the string value following a key whose closing quote ends at `key_end`.
fn value_span(text: &[u8], key_end: usize) -> Scan<(usize, usize)> {
    let mut scanner = Scanner { bytes: text, pos: key_end + 1 };
    scanner.expect(b':')?;
    scanner.skip_whitespace();
    let (start, end, _) = scanner.string()?;
    Ok((start, end))
}
