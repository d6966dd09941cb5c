//! The validating scan behind `decode_records` (`log/records.rs`): does a record's text parse,
//! and does a plain event (a known type without a message) pass the append rules of its type?
//!
//! It answers only when sure: `Sorted::Plain` means the frozen-value parser accepts the text and
//! `dshkit.session.events.check_plain_data` accepts its data; any doubt (an escape in a key, a
//! repeated key where a rule looks, a float with an exponent, deep nesting, an unknown type ...)
//! is `Sorted::Other`, and the record takes the full Python path, which decides it as before.
//!
//! One pass over the text (`record_scanner.rs`, strings a 16-byte block at a time): the keys a
//! rule looks at are matched as they are read and only what the rules need is kept (how often
//! each such key occurs and what its value is), integers are read as they are scanned, and UTF-8
//! is checked over the whole text only when a string held a byte that is not ASCII (any such
//! byte outside a string fails the scan anyway). Its verdicts are exactly those of the first
//! scan, which collected members and looked keys up (`record_scan_reference.rs`, kept for the
//! tests that compare the two).

use crate::json::scan::{digit_run_len, find_byte};
use crate::log::plain_rules::{plain_rule, PlainData, PlainField};
use crate::log::record_scanner::{Kind, Scan, Scanner, MAX_SCAN_DEPTH};

/// The top object, `data` and `data.reason` with more members than this take the full path.
const MAX_MEMBERS: usize = 32;

/// A key a rule looks at: how often it occurred, and its last value.
#[derive(Clone, Copy, Debug)]
struct Field {
    count: u8,
    value: Kind,
}

impl Field {
    const NONE: Field = Field { count: 0, value: Kind::Other };

    fn set(&mut self, value: Kind) {
        self.count = self.count.saturating_add(1);
        self.value = value;
    }

    /// Present once (a repeated key is decided by the parser, which keeps the last: full path).
    fn once(&self) -> Option<Kind> {
        (self.count == 1).then_some(self.value)
    }

}

/// What a rule asks of a value: its kind without an integer's value.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Class {
    Int,
    Str,
    Object,
    Other,
}

/// A key of `data` a rule looks at: how often it occurred, and the class of its last value
/// (two bytes: the slots of `data` are set up and read without a copy).
#[derive(Clone, Copy, Debug)]
struct Slot {
    count: u8,
    class: Class,
}

impl Slot {
    const NONE: Slot = Slot { count: 0, class: Class::Other };

    #[inline(always)]
    fn set(&mut self, value: Kind) {
        self.count = self.count.saturating_add(1);
        self.class = match value {
            Kind::Int(_) => Class::Int,
            Kind::Str => Class::Str,
            Kind::Object => Class::Object,
            Kind::Other => Class::Other,
        };
    }

    /// Present once, of class `class` (a repeated key is decided by the parser, which keeps the
    /// last: full path).
    fn once_is(&self, class: Class) -> bool {
        self.count == 1 && self.class == class
    }

    fn is_int(&self) -> bool {
        self.once_is(Class::Int)
    }

    fn is_str(&self) -> bool {
        self.once_is(Class::Str)
    }
}

/// The keys of `data` the rules of plain types look at, and whether its `reason` (when an
/// object) has exactly one string `kind` among at most `MAX_MEMBERS` keys without escapes.
#[derive(Debug)]
struct Data {
    turn: Slot,
    step: Slot,
    call_id: Slot,
    name: Slot,
    arguments: Slot,
    reason: Slot,
    reason_kind: bool,
}

impl Data {
    const NONE: Data = Data {
        turn: Slot::NONE,
        step: Slot::NONE,
        call_id: Slot::NONE,
        name: Slot::NONE,
        arguments: Slot::NONE,
        reason: Slot::NONE,
        reason_kind: false,
    };
}

/// The top-level keys, and what `data` holds.
#[derive(Debug)]
struct Top {
    members: usize,
    seq: Field,
    time: Field,
    event_type: Field,
    /// The last `type` string's text, and whether it holds an escape.
    type_span: (usize, usize, bool),
    data: Field,
    /// The text of the last `data` object, from its `{` to past its `}`.
    data_span: (usize, usize),
    facts: Data,
}

impl Scanner<'_> {
    /// The top object (at its `{`), keeping what the rules look at.
    fn top(&mut self, top: &mut Top) -> Scan<()> {
        let mut data_members = 0;
        top.members = self.object(0, |scanner, key, depth| {
            let key = key.ok_or(())?;
            let value = if key == b"data" {
                if data_members > 0 {
                    return Err(()); // "data" twice
                }
                scanner.skip_whitespace();
                if scanner.peek() == Some(b'{') {
                    let start = scanner.pos;
                    data_members = scanner.data(depth, &mut top.facts)?;
                    top.data_span = (start, scanner.pos);
                    Kind::Object
                } else {
                    scanner.value(depth)?
                }
            } else if key == b"type" {
                scanner.skip_whitespace();
                if scanner.peek() == Some(b'"') {
                    let start = scanner.pos + 1;
                    let escaped = scanner.string()?;
                    top.type_span = (start, scanner.pos - 1, escaped);
                    Kind::Str
                } else {
                    scanner.value(depth)?
                }
            } else {
                scanner.value(depth)?
            };
            match key {
                b"seq" => top.seq.set(value),
                b"time" => top.time.set(value),
                b"type" => top.event_type.set(value),
                b"data" => top.data.set(value),
                _ => {}
            }
            Ok(())
        })?;
        if top.members > MAX_MEMBERS {
            return Err(());
        }
        Ok(())
    }

    /// The object `data` (at its `{`), keeping in `facts` what the rules look at; its number of
    /// members.
    fn data(&mut self, depth: usize, facts: &mut Data) -> Scan<usize> {
        let (count, more) = self.turn_and_step(depth, facts)?;
        let members = match (count, more) {
            (count, false) => count,
            (0, true) => self.object(depth, |scanner, key, depth| scanner.data_member(key, depth, facts))?,
            (count, true) => self.members(depth, count, |scanner, key, depth| scanner.data_member(key, depth, facts))?,
        };
        if members > MAX_MEMBERS {
            return Err(());
        }
        Ok(members)
    }

    /// The leading members of `data` (at its `{`) as dshkit writes them, `{"turn":N` and then
    /// `,"step":M`, read as `data_member` reads them but without the scan of their keys: how many
    /// it read (0 when `data` starts otherwise, the scanner still at the `{`), and whether more
    /// follow (after a `,`; else the closing `}` is passed).
    #[inline(always)]
    fn turn_and_step(&mut self, depth: usize, facts: &mut Data) -> Scan<(usize, bool)> {
        if depth >= MAX_SCAN_DEPTH || !self.bytes[self.pos..].starts_with(b"{\"turn\":") {
            return Ok((0, true));
        }
        self.pos += 8;
        facts.turn.set(self.member_value(depth + 1)?);
        if !self.member_end()? {
            return Ok((1, false));
        }
        if !self.bytes[self.pos..].starts_with(b"\"step\":") {
            return Ok((1, true));
        }
        self.pos += 7;
        facts.step.set(self.member_value(depth + 1)?);
        Ok((2, self.member_end()?))
    }

    /// A member of `data` (after its key's `:`), kept in `facts` when a rule looks at it.
    #[inline(always)]
    fn data_member(&mut self, key: Option<&[u8]>, depth: usize, facts: &mut Data) -> Scan<()> {
        let key = key.ok_or(())?;
        if key == b"reason" {
            self.skip_whitespace();
            if self.peek() == Some(b'{') {
                facts.reason_kind = self.reason(depth)?;
                facts.reason.set(Kind::Object);
            } else {
                facts.reason.set(self.member_value(depth)?);
            }
            return Ok(());
        }
        let value = self.member_value(depth)?;
        match key {
            b"turn" => facts.turn.set(value),
            b"step" => facts.step.set(value),
            b"call_id" => facts.call_id.set(value),
            b"name" => facts.name.set(value),
            b"arguments" => facts.arguments.set(value),
            _ => {}
        }
        Ok(())
    }

    /// The object `data.reason` (at its `{`): whether it has one string `kind`, at most
    /// `MAX_MEMBERS` members and no escape in a key (all a `turn/end` rule accepts).
    fn reason(&mut self, depth: usize) -> Scan<bool> {
        let mut plain_keys = true;
        let mut kind = Slot::NONE;
        let members = self.object(depth, |scanner, key, depth| {
            let value = scanner.member_value(depth)?;
            match key {
                Some(b"kind") => kind.set(value),
                Some(_) => {}
                None => plain_keys = false,
            }
            Ok(())
        })?;
        Ok(plain_keys && members <= MAX_MEMBERS && kind.is_str())
    }
}

impl PlainData for Data {
    fn int(&self, field: PlainField) -> bool {
        self.slot(field).is_int()
    }

    fn text(&self, field: PlainField) -> bool {
        self.slot(field).is_str()
    }

    fn reason_with_kind(&self) -> bool {
        self.reason.once_is(Class::Object) && self.reason_kind
    }
}

impl Data {
    fn slot(&self, field: PlainField) -> &Slot {
        match field {
            PlainField::Turn => &self.turn,
            PlainField::Step => &self.step,
            PlainField::CallId => &self.call_id,
            PlainField::Name => &self.name,
            PlainField::Arguments => &self.arguments,
        }
    }
}

/// Whether the data of a plain event of type `event_type` passes the append rules of its type
/// (`plain_rules.rs`); `Err` for a type this scan does not vouch for.
fn plain_data_passes(event_type: &[u8], data: &Data) -> Scan<bool> {
    Ok(plain_rule(event_type).ok_or(())?.holds(data))
}

/// What a record written the way dshkit writes it (`{"seq":N,"time":T,"type":"`) holds: `N` and
/// `T` when they are integers as the scan reads them (`Scanner::number`), read as the digits are
/// passed over, and where the type lies (up to the next `"`).
struct Written {
    seq_value: Option<i64>,
    time_value: Option<i64>,
    event_type: (usize, usize),
}

fn written(text: &[u8]) -> Option<Written> {
    let rest = text.strip_prefix(b"{\"seq\":")?;
    let (seq_end, seq_value) = digit_run(text, text.len() - rest.len());
    let mut at = seq_end;
    at += text[at..].starts_with(b",\"time\":").then_some(8)?;
    let (time_end, time_value) = digit_run(text, at);
    at = time_end;
    at += text[at..].starts_with(b",\"type\":\"").then_some(9)?;
    let end = at + find_byte(&text[at..], b'"')?;
    Some(Written { seq_value, time_value, event_type: (at, end) })
}

/// The end of the run of digits at `at`, and its value when the run is exactly an integer as the
/// scan reads one (`Scanner::number`, which then stops at the run's end: it reads every digit of
/// an integer and fails on a digit after a leading zero or past the eighteenth).
#[inline(always)]
fn digit_run(text: &[u8], at: usize) -> (usize, Option<i64>) {
    if let Some(b'0'..=b'9') = text.get(at) {
        let mut scanner = Scanner { bytes: text, pos: at, non_ascii: false };
        if let Ok(Kind::Int(value)) = scanner.number() {
            return (scanner.pos, Some(value));
        }
    }
    (at + digit_run_len(&text[at..]), None)
}

/// The type of a record written the way dshkit writes it, if it is that of a message event and
/// `N` is `seq` as the scan reads integers: such a record goes straight to the parser. Digits
/// the scan does not read as an integer (a leading zero, a nineteenth digit) are never `seq`
/// (the parser refuses a leading zero, and no index has nineteen digits): the full scan, which
/// refuses them too, leaves such a record to the Python decoder, as the parser would have.
fn message_type(text: &[u8], written: &Written, seq: usize) -> Option<(usize, usize)> {
    let (start, end) = written.event_type;
    // The type first: most records are not message events.
    if !MESSAGE_TYPES.contains(&&text[start..end]) {
        return None;
    }
    (written.seq_value? == seq as i64).then_some((start, end))
}

/// A plain record written the way dshkit writes it (`{"seq":N,"time":T,"type":"...","data":{...}}`
/// with `N`, `T` and the type as the scan reads them): the scan of its top object reduces to
/// that of `data`. `None` when it is written otherwise or anything fails: the full scan decides.
fn written_plain(text: &[u8], written: &Written, seq: usize) -> Option<Sorted> {
    let (start, end) = written.event_type;
    let event_type = &text[start..end];
    // `N` and `T` are followed by `,` (`written`): integers there as they are in the text alone.
    let rule = plain_rule(event_type)?;
    if written.seq_value? != seq as i64 || !text[end..].starts_with(DATA_KEY) {
        return None;
    }
    let time = written.time_value?;
    let mut scanner = Scanner { bytes: text, pos: end + DATA_KEY.len(), non_ascii: false };
    scanner.skip_whitespace();
    if scanner.peek() != Some(b'{') {
        return None;
    }
    let mut facts = Data::NONE;
    let data_start = scanner.pos;
    scanner.data(1, &mut facts).ok()?;
    let data_span = (data_start, scanner.pos);
    scanner.expect(b'}').ok()?;
    scanner.skip_whitespace();
    if scanner.pos != text.len() || scanner.non_ascii && std::str::from_utf8(text).is_err() {
        return None;
    }
    rule.holds(&facts).then_some(Sorted::Plain((start, end), time, data_span))
}

/// What follows the type of a record written the way dshkit writes it.
const DATA_KEY: &[u8] = b"\",\"data\":";

const MESSAGE_TYPES: [&[u8]; 3] = [b"user/message", b"assistant/message", b"tool/result"];

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sorted {
    /// A plain event: its type (a span of the text), time, and its `data` object's span.
    Plain((usize, usize), i64, (usize, usize)),
    /// A message event: its type's span. The text is UTF-8.
    Message((usize, usize)),
    Other,
}

/// What `text`, the record of event `seq`, is; `Plain` and `Message` only for UTF-8 text.
pub(crate) fn sort(text: &[u8], seq: usize) -> Sorted {
    if let Some(written) = written(text) {
        if let Some(span) = message_type(text, &written, seq) {
            return match std::str::from_utf8(text) {
                Ok(_) => Sorted::Message(span),
                Err(_) => Sorted::Other,
            };
        }
        if let Some(sorted) = written_plain(text, &written, seq) {
            return sorted;
        }
    }
    scanned(text, seq).unwrap_or(Sorted::Other)
}

fn scanned(text: &[u8], seq: usize) -> Scan<Sorted> {
    let mut scanner = Scanner { bytes: text, pos: 0, non_ascii: false };
    if scanner.expect(b'{').is_err() {
        return Err(());
    }
    scanner.pos -= 1;
    let mut top = Top {
        members: 0,
        seq: Field::NONE,
        time: Field::NONE,
        event_type: Field::NONE,
        type_span: (0, 0, true),
        data: Field::NONE,
        data_span: (0, 0),
        facts: Data::NONE,
    };
    scanner.top(&mut top)?;
    scanner.skip_whitespace();
    if scanner.pos != text.len() || scanner.non_ascii && std::str::from_utf8(text).is_err() {
        return Err(());
    }
    let (start, end, escaped) = top.type_span;
    if top.event_type.once() != Some(Kind::Str) || escaped {
        return Err(());
    }
    let type_text = &text[start..end];
    if MESSAGE_TYPES.contains(&type_text) {
        return Ok(Sorted::Message((start, end)));
    }
    if top.members != 4 || top.seq.once() != Some(Kind::Int(seq as i64)) || top.data.once() != Some(Kind::Object) {
        return Err(());
    }
    let Some(Kind::Int(time)) = top.time.once() else { return Err(()) };
    if !plain_data_passes(type_text, &top.facts)? {
        return Err(());
    }
    Ok(Sorted::Plain((start, end), time, top.data_span))
}

#[cfg(test)]
#[path = "record_scan_tests.rs"]
mod tests;
