//! Tests of `record_scan.rs`: its own cases, and its verdicts against those of the first scan
//! (`record_scan_reference.rs`) on every edit of sample records from a set of edge bytes and
//! pieces, at every position, and on random edits.

use super::*;
use crate::log::plain_rules::set_test_rules;
use crate::log::record_scan_reference;

// The scans read the plain rules `events.py` gives in the library: these tests give the same.
fn sort(text: &[u8], seq: usize) -> Sorted {
    set_test_rules();
    super::sort(text, seq)
}

fn written_plain(text: &[u8], written: &Written, seq: usize) -> Option<Sorted> {
    set_test_rules();
    super::written_plain(text, written, seq)
}

fn written_message_type(text: &[u8], seq: usize) -> Option<(usize, usize)> {
    message_type(text, &written(text)?, seq)
}

fn plain(text: &str, seq: usize) -> Option<i64> {
    match sort(text.as_bytes(), seq) {
        Sorted::Plain(_, time, _) => Some(time),
        _ => None,
    }
}

#[test]
fn plain_events_are_vouched_for_only_when_every_rule_holds() {
    let chunk = r#"{"seq":3,"time":17,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"text":"a\"b\u00e9","n":[1.5,-0,null,true]}}}"#;
    assert_eq!(plain(chunk, 3), Some(17));
    assert_eq!(plain(chunk, 4), None, "seq must be the index");
    for bad in [
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":"1"}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"turn":"x"}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1},"surface_op":"append"}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1.0}}"#,
        r#"{"seq":0,"time":1.5,"type":"turn/start","data":{"turn":1}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}} x"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1e3}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":"\ud800"}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":"a	b"}}"#,
        r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1,"x":01}}"#,
        r#"{"seq":0,"time":1,"type":"turn/end","data":{"turn":1,"reason":{"kind":1}}}"#,
        r#"{"seq":0,"time":1,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c","name":"n"}}"#,
        r#"{"seq":0,"time":1,"type":"plugin/thing","data":{"ignorable":true}}"#,
        r#"{"seq":0,"time":1,"type":"request/header","data":{}}"#,
        r#"{"seq":0,"time":1,"type":"turn\/start","data":{"turn":1}}"#,
        r#"{"seq":0,"time":12345678901234567890,"type":"turn/start","data":{"turn":1}}"#,
    ] {
        assert_eq!(plain(bad, 0), None, "{bad}");
    }
    let long = r#"{"seq":0,"time":1,"type":"step/end","data":{"turn":1,"step":2,"note":"a long text of many bytes \"quoted\" and \u00e9 and more"}}"#;
    assert_eq!(plain(long, 0), Some(1));
    let control = "{\"seq\":0,\"time\":1,\"type\":\"step/end\",\"data\":{\"turn\":1,\"step\":2,\"note\":\"a long text of many bytes\u{1}\"}}";
    assert_eq!(plain(control, 0), None);
    let end = r#"{"seq":0,"time":1,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#;
    assert_eq!(plain(end, 0), Some(1));
    let call = r#"{"seq":0,"time":-2,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c","name":"n","arguments":"{}"}}"#;
    assert_eq!(plain(call, 0), Some(-2));
    let deep = format!(r#"{{"seq":0,"time":1,"type":"compaction/end","data":{{"x":{}1{}}}}}"#, "[".repeat(70), "]".repeat(70));
    assert_eq!(plain(&deep, 0), None);
    assert!(matches!(sort(br#"{"seq":0,"type":"user/message"}"#, 0), Sorted::Message(_)));
    let written = br#"{"seq":12,"time":1764520000000,"type":"tool/result","data":{}}"#;
    assert_eq!(written_message_type(written, 12).map(|(start, end)| &written[start..end]), Some(&b"tool/result"[..]));
    assert_eq!(written_message_type(written, 11), None);
    assert_eq!(written_message_type(br#"{"seq":0,"time":1,"type":"turn/start","data":{}}"#, 0), None);
    assert_eq!(written_message_type(br#"{"seq":0,"time":1,"type":"user/message"#, 0), None);
    assert!(matches!(sort(b"{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1,\"x\":\"\xff\"}}", 0), Sorted::Other));
}

/// Records of every plain type as dshkit writes them, message records, and some written otherwise.
const SAMPLES: &[&str] = &[
    r#"{"seq":0,"time":1796132627541,"type":"turn/start","data":{"turn":1}}"#,
    r#"{"seq":0,"time":1796132627541,"type":"step/start","data":{"turn":1,"step":1}}"#,
    r#"{"seq":0,"time":1796132627541,"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"text_delta","index":0,"text":"part 0 "}}}"#,
    r#"{"seq":0,"time":1796132627541,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"call_1","name":"lookup","arguments":"{\"item\": 1, \"fields\": [\"colour\", \"stock\"]}"}}"#,
    r#"{"seq":0,"time":1796132627542,"type":"step/end","data":{"turn":1,"step":1}}"#,
    r#"{"seq":0,"time":1796132627542,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    r#"{"seq":0,"time":1,"type":"compaction/end","data":{"x":[1,2.5,-0,true,false,null,{"a":"b"}]}}"#,
    r#"{"seq":0,"time":1,"type":"user/message","data":{"id":"x","role":"user","content":[]},"surface_op":"append","source_event_seqs":[]}"#,
    r#" { "data" : { "step" : 2 , "turn" : 3 } , "type" : "step/end" , "time" : -5 , "seq" : 0 } "#,
    r#"{"type":"tool/result","seq":0,"data":{"message":{}},"time":1}"#,
    r#"{"seq":0,"time":1,"type":"plugin/x","data":{"ignorable":true}}"#,
];

/// Bytes and pieces that sit at the edges of what the scan accepts.
const PIECES: &[&[u8]] = &[
    b"\"", b"\\", b"\\u00e9", b"\\ud800", b"\\udc00", b"\\u12", b"\\x", b"\\/", b"\\n", b"\\uD83D\\uDE00",
    b"\xc3\xa9", b"\xe2\x98\x83", b"\xf0\x9f\x98\x80", b"\xc3", b"\xe2\x98", b"\xff", b"\x80", b"\xed\xa0\x80", b"\xc0\xaf",
    b"\x01", b"\x1f", b"\x7f", b"\t", b" ", b"\n", b"{", b"}", b"[", b"]", b",", b":", b"0", b"9", b"-", b".", b"e", b"E", b"+",
    b"00", b".5", b"e3", b"1234567890123456789", b"123456789012345678", b"true", b"nul", b",\"turn\":1", b",\"step\":\"x\"",
    b",\"data\":{}", b",\"kind\":\"k\"", b",\"reason\":{}", b"\"seq\":0,", b"abcdefghijklmnopq",
];

fn verdicts_agree(text: &[u8]) {
    for seq in [0, 1] {
        assert_eq!(sort(text, seq), record_scan_reference::sort(text, seq), "seq {seq}: {}", String::from_utf8_lossy(text));
    }
}

#[test]
fn every_piece_at_every_position_of_every_sample_gets_the_first_scans_verdict() {
    for sample in SAMPLES {
        let sample = sample.as_bytes();
        verdicts_agree(sample);
        for at in 0..=sample.len() {
            verdicts_agree(&sample[..at]); // truncated
            let mut without = sample.to_vec();
            if at < sample.len() {
                without.remove(at);
                verdicts_agree(&without);
            }
            for piece in PIECES {
                let inserted = [&sample[..at], piece, &sample[at..]].concat();
                verdicts_agree(&inserted);
                if at < sample.len() {
                    let replaced = [&sample[..at], piece, &sample[at + 1..]].concat();
                    verdicts_agree(&replaced);
                }
            }
        }
    }
}

#[test]
fn strings_of_every_length_with_an_edge_byte_at_every_offset_get_the_first_scans_verdict() {
    // Keys and values from 0 to 40 bytes, one piece at each offset: every lane of a block, the
    // block's end, and the short tail after it.
    for length in 0..40 {
        for at in 0..=length {
            for piece in PIECES.iter().take(20) {
                let mut raw = vec![b'a'; length];
                raw.splice(at..at, piece.iter().copied());
                let value = [&br#"{"seq":0,"time":1,"type":"step/end","data":{"turn":1,"step":2,"note":""#[..], &raw, b"\"}}"].concat();
                verdicts_agree(&value);
                let key = [&br#"{"seq":0,"time":1,"type":"step/end","data":{"turn":1,"step":2,""#[..], &raw, b"\":0}}"].concat();
                verdicts_agree(&key);
                let tail = [&br#"{"seq":0,"time":1,"type":"step/end","data":{"turn":1,"step":2,"note":""#[..], &raw].concat();
                verdicts_agree(&tail);
            }
        }
    }
}

/// A small deterministic generator (xorshift), so the random edits are the same on every run.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_edits_of_the_samples_get_the_first_scans_verdict() {
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    let mut vouched = 0;
    for _ in 0..60_000 {
        let mut text = SAMPLES[random.below(SAMPLES.len())].as_bytes().to_vec();
        for _ in 0..1 + random.below(4) {
            let at = random.below(text.len() + 1);
            let piece = PIECES[random.below(PIECES.len())];
            match random.below(3) {
                0 => drop(text.splice(at..at, piece.iter().copied())),
                1 if at < text.len() => drop(text.splice(at..at + 1, piece.iter().copied())),
                _ if at < text.len() => drop(text.remove(at)),
                _ => {}
            }
        }
        verdicts_agree(&text);
        vouched += matches!(sort(&text, 0), Sorted::Plain(..)) as usize;
    }
    assert!(vouched > 1_000, "the edits must leave many records vouched for ({vouched})");
}

#[test]
fn the_type_span_and_time_are_those_written() {
    let text = br#"{"seq":7,"time":-123,"type":"step/end","data":{"turn":1,"step":2}}"#;
    let Sorted::Plain((start, end), time, data) = sort(text, 7) else { panic!("not vouched for") };
    assert_eq!((&text[start..end], time), (&b"step/end"[..], -123));
    assert_eq!(&text[data.0..data.1], br#"{"turn":1,"step":2}"#);
    let most = br#"{"seq":0,"time":999999999999999999,"type":"turn/start","data":{"turn":-999999999999999999}}"#;
    let Sorted::Plain((start, end), time, _) = sort(most, 0) else { panic!("not vouched for") };
    assert_eq!((&most[start..end], time), (&b"turn/start"[..], 999_999_999_999_999_999));
    for too_many in [&br#"{"seq":0,"time":1000000000000000000,"type":"turn/start","data":{"turn":1}}"#[..], br#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1000000000000000000}}"#] {
        assert_eq!(sort(too_many, 0), Sorted::Other);
    }
}

#[test]
fn members_past_the_limit_and_nesting_past_the_depth_take_the_full_path() {
    for (members, vouched) in [(30, true), (31, false)] {
        let extra: String = (0..members).map(|i| format!(r#","k{i}":{i}"#)).collect();
        let data = format!(r#"{{"seq":0,"time":1,"type":"step/end","data":{{"turn":1,"step":2{extra}}}}}"#);
        assert_eq!(matches!(sort(data.as_bytes(), 0), Sorted::Plain(..)), vouched, "{members} more");
        verdicts_agree(data.as_bytes());
        let reason = format!(r#"{{"seq":0,"time":1,"type":"turn/end","data":{{"turn":1,"reason":{{"kind":"k"{}}}}}}}"#, &extra[..extra.len()]);
        verdicts_agree(reason.as_bytes());
    }
    for depth in 60..66 {
        let deep = format!(r#"{{"seq":0,"time":1,"type":"compaction/end","data":{{"x":{}1{}}}}}"#, "[".repeat(depth), "]".repeat(depth));
        verdicts_agree(deep.as_bytes());
        let objects = format!(r#"{{"seq":0,"time":1,"type":"compaction/end","data":{}1{}}}"#, r#"{"a":"#.repeat(depth), "}".repeat(depth));
        verdicts_agree(objects.as_bytes());
    }
}

#[test]
fn records_written_the_way_dshkit_writes_them_are_vouched_for_without_the_full_scan() {
    for sample in &SAMPLES[..7] {
        let text = sample.as_bytes();
        let written = written(text).expect("written the dshkit way");
        assert!(matches!(written_plain(text, &written, 0), Some(Sorted::Plain(..))), "{sample}");
    }
    let spaced = br#"{"seq":0,"time":1,"type":"turn/start","data": {"turn":1} } "#;
    assert!(written_plain(spaced, &written(spaced).unwrap(), 0).is_some());
    for otherwise in [
        &br#"{"seq":0,"time":01,"type":"turn/start","data":{"turn":1}}"#[..],
        br#"{"seq":00,"time":1,"type":"turn/start","data":{"turn":1}}"#,
        br#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1},"x":1}"#,
        br#"{"seq":0,"time":1,"type":"turn/start","data":[]}"#,
        br#"{"seq":0,"time":1,"type":"plugin/x","data":{}}"#,
    ] {
        assert_eq!(written_plain(otherwise, &written(otherwise).unwrap(), 0), None);
        verdicts_agree(otherwise);
    }
}

#[test]
fn a_written_seq_sends_a_message_record_to_the_parser_only_as_an_integer_the_scan_reads() {
    let record = |seq: &str| {
        format!(r#"{{"seq":{seq},"time":1,"type":"user/message","data":{{"id":"x","role":"user","content":[]}},"surface_op":"append","source_event_seqs":[]}}"#)
    };
    for (written_seq, seq, routed) in [
        ("7", 7, true),
        ("0", 0, true),
        ("999999999999999999", 999_999_999_999_999_999, true),
        // Digits whose value is `seq` but which the scan does not read as an integer: the full
        // scan refuses them too, so the record takes the Python path.
        ("07", 7, false),
        ("00", 0, false),
        ("0000000000000000007", 7, false),
        ("1000000000000000000", 1_000_000_000_000_000_000, false),
        ("10000000000000000000", 10_000_000_000_000_000_000, false),
    ] {
        let text = record(written_seq);
        assert_eq!(written_message_type(text.as_bytes(), seq).is_some(), routed, "{written_seq} as {seq}");
        let sorted = sort(text.as_bytes(), seq);
        let routed_as = match sorted {
            Sorted::Message((start, end)) => Some(&text.as_bytes()[start..end]),
            _ => None,
        };
        assert_eq!(routed_as, routed.then_some(&b"user/message"[..]), "{written_seq} as {seq}");
        assert!(routed || sorted == Sorted::Other, "{written_seq} as {seq}");
        assert_eq!(sorted, record_scan_reference::sort(text.as_bytes(), seq), "{written_seq} as {seq}");
    }
    // Another integer is not `seq`, but the full scan still sends a message record it accepts to
    // the parser, which compares the seq itself (and refuses this one).
    let text = record("7");
    assert_eq!(written_message_type(text.as_bytes(), 8), None);
    assert!(matches!(sort(text.as_bytes(), 8), Sorted::Message(_)));
    assert_eq!(sort(text.as_bytes(), 8), record_scan_reference::sort(text.as_bytes(), 8));
}

#[test]
fn the_seq_and_time_written_are_read_once_as_the_scan_reads_integers() {
    let values = |text: &[u8]| written(text).map(|w| (w.seq_value, w.time_value));
    assert_eq!(values(br#"{"seq":12,"time":1796132627541,"type":"turn/start","data":{}}"#), Some((Some(12), Some(1796132627541))));
    assert_eq!(values(br#"{"seq":0,"time":0,"type":"x"}"#), Some((Some(0), Some(0))));
    // Digits the scan does not read as an integer: a leading zero, a nineteenth digit.
    assert_eq!(values(br#"{"seq":01,"time":1,"type":"x"}"#), Some((None, Some(1))));
    assert_eq!(values(br#"{"seq":1,"time":1234567890123456789,"type":"x"}"#), Some((Some(1), None)));
    assert_eq!(values(br#"{"seq":1,"time":123456789012345678,"type":"x"}"#), Some((Some(1), Some(123456789012345678))));
    assert_eq!(values(br#"{"seq":,"time":,"type":"x"}"#), Some((None, None)));
    // Not written the dshkit way: the full scan decides.
    for otherwise in [&br#"{"seq":1.0,"time":1,"type":"x"}"#[..], br#"{"seq":1,"time":1e3,"type":"x"}"#, br#"{"seq":-1,"time":1,"type":"x"}"#] {
        assert!(written(otherwise).is_none(), "{}", String::from_utf8_lossy(otherwise));
    }
}

#[test]
fn turn_and_step_read_without_a_key_scan_get_the_verdict_of_any_member() {
    let record = |data: &str| format!(r#"{{"seq":0,"time":1,"type":"step/end","data":{data}}}"#);
    for (data, vouched) in [
        (r#"{"turn":1,"step":2}"#, true),
        (r#"{"turn":1,"step":2,"note":"x"}"#, true),
        (r#"{"step":2,"turn":1}"#, true),
        (r#"{"turn": 1 , "step": 2 }"#, true),
        (r#"{ "turn":1,"step":2}"#, true),
        (r#"{"turn":1,"step":2,"turn":3}"#, false),
        (r#"{"turn":1,"step":2,"step":2}"#, false),
        (r#"{"turn":1,"turn":1,"step":2}"#, false),
        (r#"{"turn":1}"#, false),
        (r#"{"turn":1,"step":"2"}"#, false),
        (r#"{"turn":"1","step":2}"#, false),
        (r#"{"turn":1,"step":2,}"#, false),
        (r#"{"turn":1,,"step":2}"#, false),
        (r#"{"turn":1"step":2}"#, false),
        (r#"{"turn":,"step":2}"#, false),
        (r#"{"turn":1,"step":2"#, false),
        (r#"{"turn":01,"step":2}"#, false),
        (r#"{"turn":1,"step":2.5}"#, false),
    ] {
        let text = record(data);
        assert_eq!(matches!(sort(text.as_bytes(), 0), Sorted::Plain(..)), vouched, "{data}");
        verdicts_agree(text.as_bytes());
    }
    let start = r#"{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}"#;
    assert_eq!(plain(start, 0), Some(1));
    let end = r#"{"seq":0,"time":1,"type":"turn/end","data":{"turn":1,"reason":{"kind":"done"}}}"#;
    assert_eq!(plain(end, 0), Some(1));
}

#[test]
fn integers_of_every_length_up_to_a_word_past_the_limit_get_the_first_scans_verdict() {
    // The digits are found a word at a time: every length across the word edges, with what may
    // follow a number, signed and not, at the text's end and before more text.
    for length in 1..=20 {
        for first in [b'0', b'1', b'9'] {
            let digits: String = std::iter::once(first as char).chain((1..length).map(|i| (b'0' + (i % 10) as u8) as char)).collect();
            for sign in ["", "-"] {
                for after in ["", ".5", "e3", "E3", ".", ".5e1", "x"] {
                    let number = format!("{sign}{digits}{after}");
                    let turn = format!(r#"{{"seq":0,"time":1,"type":"turn/start","data":{{"turn":{number}}}}}"#);
                    verdicts_agree(turn.as_bytes());
                    let time = format!(r#"{{"seq":0,"time":{number},"type":"turn/start","data":{{"turn":1}}}}"#);
                    verdicts_agree(time.as_bytes());
                    verdicts_agree(&time.as_bytes()[..time.find(',').unwrap() + 8 + number.len()]);
                    let last = format!(r#"{{"type":"turn/start","seq":0,"data":{{"turn":1}},"time":{number}}}"#);
                    verdicts_agree(last.as_bytes());
                }
            }
            let expected = (first != b'0' || length == 1) && length <= 18;
            let turn = format!(r#"{{"seq":0,"time":1,"type":"turn/start","data":{{"turn":{digits}}}}}"#);
            assert_eq!(matches!(sort(turn.as_bytes(), 0), Sorted::Plain(..)), expected, "{digits}");
        }
    }
}
