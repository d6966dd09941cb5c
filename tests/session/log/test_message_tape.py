"""A message record read from its tape (`rust/json/read/tape.rs`, made on `decode_records`' second
thread; `rust/log/message_tape.rs`) is exactly what the GIL thread reads from its text
(`rust/log/message_record.rs`, the reference): same time, `Message`, spans, envelope fields (values
of the same types, keys in the same order), surface_op, source seqs, and the same event data.

Where the tape does not take a record (a key with an escape, a repeated key, deep nesting,
anything `from_json` refuses), `decode_records` reads the text as before, so only agreement where
the tape answers needs proving; the tests also check that the tape answers for the records dshkit
writes (else it would save nothing) and never for text `from_json` refuses.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dshkit import FrozenDict, Message, from_json, to_json
from dshkit._core import _read_message_record_both_ways as both_ways

from tests.session.log.test_message_records import CASES, GOOD, REPLY, RESULT, USER

TYPES = {0: "user/message", 1: "assistant/message", 3: "tool/result", 4: "user/message"}


def same(ours: Any, theirs: Any) -> bool:
    """Equal values of the same types all the way down, mappings with their keys in the same order."""
    if type(ours) is not type(theirs):
        return False
    if isinstance(ours, Message):
        return to_json(ours) == to_json(theirs) and same(ours.content, theirs.content) and same(ours.source, theirs.source)
    if isinstance(ours, FrozenDict):
        return list(ours) == list(theirs) and all(same(ours[key], theirs[key]) for key in ours)
    if isinstance(ours, (tuple, list)):
        return len(ours) == len(theirs) and all(same(a, b) for a, b in zip(ours, theirs))
    if isinstance(ours, float):
        return ours.hex() == theirs.hex()
    return bool(ours == theirs)


def check(record: str, seq: int, event_type: str) -> tuple[Any, Any, bool]:
    """Read `record` both ways; the tape's reading, when it gives one, is the text's."""
    from_text, from_tape, taped = both_ways(record, seq, event_type)
    if taped:
        from_json(record)  # the tokenizer never takes what the parser refuses
    if from_tape is not None:
        assert from_text is not None and same(from_tape, from_text), record
    return from_text, from_tape, taped


@pytest.mark.parametrize("case", list(CASES))
def test_every_unusual_record_reads_the_same_from_its_tape(case: str):
    seq, record, _ = CASES[case]
    check(record, seq, TYPES[seq])


@pytest.mark.parametrize("seq", sorted(GOOD))
def test_the_records_dshkit_writes_are_read_from_their_tape(seq: int):
    from_text, from_tape, taped = check(GOOD[seq], seq, TYPES[seq])
    assert taped and from_tape is not None and from_text is not None


# Pieces put into a message's text block, a custom block's value, or the data beside the message.
VALUES = {
    "escapes": '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\\u20ac"',
    "a surrogate pair": '"\\ud83d\\ude00 smile"',
    "a lone surrogate": '"\\ud83d"',
    "a bad escape": '"\\x"',
    "non-ASCII text": '"déjà vu — 日本語 🙂"',
    "a control character": '"a\tb"',
    "a long string": '"%s"' % ("x" * 100_000),
    "a long escaped string": '"%s"' % ("\\n" * 50_000),
    "floats": "[1.5, -0.0, 1e300, 2.5E-3, 0.1, 123456789012345678901234567890.0]",
    "a float out of range": "1e400",
    "ints": "[0, -0, 9223372036854775807, -9223372036854775808]",
    "an int out of range": "9223372036854775808",
    "a leading zero": "012",
    "a bare fraction": "1.",
    "literals": "[true, false, null]",
    "a bad literal": "nul",
    "non-ASCII keys": '{"clé": 1, "日本": {"ключ": [2]}}',
    "an escaped key": '{"k\\u0065y": 1}',
    "a repeated key": '{"k": 1, "k": 2}',
    "a repeated nested key": '{"o": {"k": 1, "k": 2}}',
    "sixteen keys": "{%s}" % ",".join('"k%d":%d' % (i, i) for i in range(16)),
    "seventeen keys": "{%s}" % ",".join('"k%d":%d' % (i, i) for i in range(17)),
    "a long key": '{"%s": 1}' % ("k" * 40),
    "empty containers": '[{}, [], ""]',
    "whitespace": ' { "a" : [ 1 , 2 ] } ',
    "a trailing comma": "[1, 2,]",
    "deep nesting": "[" * 40 + "]" * 40,
    "nesting just below the tape's limit": "[" * 25 + "]" * 25,
}


def records_with(value: str) -> list[tuple[int, str]]:
    """The written records with `value` in a custom block, beside the message, and in the envelope."""
    custom = REPLY.replace('{"type":"text","text":"calling"}', '{"type":"custom","x":%s}' % value)
    return [
        (1, GOOD[1].replace(REPLY, custom)),
        (1, GOOD[1].replace('"turn":1', '"turn":1,"extra":%s' % value)),
        (3, GOOD[3].replace('"turn":1', '"extra":%s,"turn":1' % value)),
        (4, GOOD[4].replace(USER, USER.replace('"text":"more"', '"text":%s' % value))),
        (4, GOOD[4][:-1] + ',"note":%s}' % value),
        (4, GOOD[4].replace('"surface_op":"append"', '"surface_op":%s' % value)),
    ]


@pytest.mark.parametrize("name", list(VALUES))
def test_values_of_every_kind_read_the_same_from_the_tape(name: str):
    for seq, record in records_with(VALUES[name]):
        check(record, seq, TYPES[seq])


def test_the_tape_leaves_what_it_does_not_take_to_the_text():
    for name in ["an escaped key", "a repeated key", "a repeated nested key", "seventeen keys", "deep nesting"]:
        seq, record = records_with(VALUES[name])[0]
        from_text, from_tape, taped = check(record, seq, TYPES[seq])
        assert not taped and from_tape is None and from_text is not None, name
    seq, record, _ = CASES["at the depth limit"]
    assert check(record, seq, TYPES[seq])[2] is False
    assert check(GOOD[1].replace(REPLY, REPLY.replace("calling", "a\\u0000b")), 1, TYPES[1])[1] is not None


def test_the_tape_takes_long_and_non_ascii_text_and_floats():
    for name in ["a long string", "a long escaped string", "non-ASCII text", "non-ASCII keys", "floats", "sixteen keys"]:
        for seq, record in records_with(VALUES[name]):
            from_text, from_tape, taped = check(record, seq, TYPES[seq])
            assert taped, (name, record[:200])
            assert (from_tape is None) == (from_text is None), (name, record[:200])


def test_every_edit_of_a_written_record_reads_the_same_from_its_tape():
    pieces = ["\\", '"', "\\u00e9", "é", "1.5", "-", "0", "e5", "[", "]", "{", "}", ",", ":", " ", "null", "\x01", '"k":1,']
    for seq in sorted(GOOD):
        text = GOOD[seq]
        for at in range(len(text) + 1):
            for piece in pieces:
                check(text[:at] + piece + text[at:], seq, TYPES[seq])
            check(text[:at] + text[at + 1 :], seq, TYPES[seq])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=5),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values, where=st.integers(0, 5), ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_random_values_read_the_same_from_the_tape(value: Any, where: int, ascii_only: bool, indent: int | None):
    seq, record = records_with(json.dumps(value, ensure_ascii=ascii_only, indent=indent))[where]
    from_text, from_tape, taped = check(record, seq, TYPES[seq])
    if taped:
        assert (from_tape is None) == (from_text is None)


def test_a_result_message_and_deep_blocks_read_the_same():
    nested = "[" * 20 + "]" * 20
    from_text, from_tape, taped = check(GOOD[3].replace(RESULT, RESULT.replace('"text":"ok"', '"text":"ok","x":%s' % nested)), 3, TYPES[3])
    assert taped and from_tape is not None


# The original harness's message appends as `rust/original/message_text.rs` rewrites them (its
# envelope order, snake-case usage, `finish_reason`, a result's `is_error_omitted`): since the
# original's records are taped on the second thread too, these shapes must read the same both ways.
ORIGINAL_REWRITES = [
    (3, "user/message", '{"seq":3,"time":9,"type":"user/message","data":{"content":[{"type":"text","text":"hi \\u00e9 \\"x\\""}],'
     '"source":{"kind":"user"},"role":"user","id":"u1"},"surface_op":"append","source_event_seqs":[]}'),
    (4, "assistant/message", '{"seq":4,"time":9,"type":"assistant/message","data":{"turn":1,"message":{"role":"assistant","content":'
     '[{"type":"text","text":"ok"},{"type":"tool_call","id":"c","name":"n","arguments":"{}"}],"source":{"kind":"model",'
     '"provider":"p","model":"m"},"id":"a"},"usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":0,"x":2},'
     '"finish_reason":"stop"},"surface_op":"append","source_event_seqs":[1,2]}'),
    (5, "tool/result", '{"seq":5,"time":9,"type":"tool/result","data":{"turn":1,"step":1,"message":{"role":"user","source":'
     '{"kind":"tool","call_id":"c"},"content":[{"type":"tool_result","tool_call_id":"c","content":[{"type":"text","text":"t"}],'
     '"is_error":false,"is_error_omitted":true}],"id":"r"}},"surface_op":"append","source_event_seqs":[4]}'),
]


@pytest.mark.parametrize(("seq", "event_type", "record"), ORIGINAL_REWRITES)
def test_the_originals_rewritten_appends_read_the_same_from_their_tapes(seq: int, event_type: str, record: str) -> None:
    from_text, from_tape, taped = check(record, seq, event_type)
    assert taped and from_text is not None and from_tape is not None
