//! The field rules of the plain event types, as the native passes prove them.
//!
//! The rules themselves are `dshkit.session.events.PLAIN_DATA_CHECKS`; two native passes prove
//! them to skip the Python call when sure: the log scan (`record_scan.rs`) on a stored record's
//! text, and `vouch_plain_append` (`plain_vouch.rs`) on a new event's frozen data. Both go
//! through this one table, so they cannot drift apart; each supplies what it knows of the fields
//! (`PlainData`). The other plain types (`request/header`, `inbox/spliced`) are left to Python.

/// A field a plain rule reads.
#[derive(Clone, Copy)]
pub(crate) enum PlainField {
    Turn,
    Step,
    CallId,
    Name,
    Arguments,
}

/// What a native pass knows of a plain event's data; each answer is `true` only when sure.
pub(crate) trait PlainData {
    /// `field` is there once, an exact `int`.
    fn int(&self, field: PlainField) -> bool;
    /// `field` is there once, an exact `str`.
    fn text(&self, field: PlainField) -> bool;
    /// `reason` is there once, a mapping with a `str` `kind` (what a `turn/end` needs).
    fn reason_with_kind(&self) -> bool;
}

/// The plain event types the native passes vouch for.
pub(crate) const PLAIN_TYPES: [&[u8]; 10] = [
    b"turn/start",
    b"turn/end",
    b"step/start",
    b"step/end",
    b"assistant/chunk",
    b"tool/call",
    b"compaction/start",
    b"compaction/summary",
    b"compaction/prune",
    b"compaction/end",
];

/// Whether `data` passes the rule of `event_type` for sure; `None` for a type not in `PLAIN_TYPES`.
pub(crate) fn plain_rule_holds(event_type: &[u8], data: &impl PlainData) -> Option<bool> {
    use PlainField::{Arguments, CallId, Name, Step, Turn};
    let turn = || data.int(Turn);
    let step = || turn() && data.int(Step);
    Some(match event_type {
        b"turn/start" => turn(),
        b"step/start" | b"step/end" | b"assistant/chunk" => step(),
        b"tool/call" => step() && data.text(CallId) && data.text(Name) && data.text(Arguments),
        b"turn/end" => turn() && data.reason_with_kind(),
        b"compaction/start" | b"compaction/summary" | b"compaction/prune" | b"compaction/end" => true,
        _ => return None,
    })
}
