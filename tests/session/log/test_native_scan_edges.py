"""The edges of the native scan of plain records (`rust/log/record_scan.rs`): escapes and non-ASCII
text at every position around its 16-byte blocks, invalid UTF-8, truncated records, numbers at
their limits, repeated keys, keys in other orders. Each record is decoded the native way
(`load_events`, which vouches for plain records without Python) and the full Python way
(`decode_events`, every record parsed and admitted): the same events, or the same error.
"""

from __future__ import annotations

import itertools
import json

import pytest

from dshkit._core import decode_records
from dshkit.session import SessionCorruptError
from dshkit.session._log.event_codec import decode_events
from dshkit.session.events import KNOWN_EVENT_TYPES, Event
from dshkit.session._log.loading import load_events
from dshkit.session._log.formats import DshkitFormat
from dshkit.session._surface import Surface

FIRST = b'{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}'
CHUNK = '{"seq":1,"time":5,"type":"assistant/chunk","data":{"turn":1,"step":1,%s}}'


def native_way(records: list[bytes]) -> tuple[list[Event] | None, str | None]:
    try:
        return list(load_events(DshkitFormat(), records, str, Surface(), read_only=False)), None
    except SessionCorruptError as error:
        return None, str(error)


def full_way(records: list[bytes]) -> tuple[list[Event] | None, str | None]:
    surface = Surface()

    def fold(event: Event) -> None:
        if event.type in KNOWN_EVENT_TYPES:
            surface.admit(event.type, event.data, event.surface_op, event.source_event_seqs, [None] * event.seq)  # type: ignore[arg-type]
        surface.fold(event)

    try:
        return list(decode_events(records, str, fold)), None
    except SessionCorruptError as error:
        return None, str(error)


def vouched(record: bytes) -> bool:
    """Whether the native scan vouched for `record` as event 1 (no Python object built for it)."""
    types, _, _, _, _, pending = decode_records([FIRST, record], Event)
    return types[1] is not None and 1 not in pending


def agree(record: bytes | str) -> bool:
    """Both ways decode `[FIRST, record]` alike; whether the scan vouched for the record."""
    text = record.encode() if isinstance(record, str) else record
    records = [FIRST, text]
    expected = full_way(records)
    assert native_way(records) == expected, text
    if vouched(text):
        assert expected[1] is None, f"vouched for a record the full way refuses: {text!r}"
    return vouched(text)


PIECES = ["é", "\u2603", "\U0001f600", "\\u00e9", "\\n", '\\"', "\\\\", "\\/", "\\ud83d\\ude00", "\\ud800", "\\u12", "\\x"]


@pytest.mark.parametrize("piece", PIECES)
def test_escapes_and_non_ascii_text_at_every_offset_of_keys_and_values(piece: str):
    counts = []
    for offset in range(36):  # every lane of two blocks and the tail after them
        text = "a" * offset + piece + "b" * (35 - offset)
        short = "a" * offset + piece
        counts.append(agree(CHUNK % f'"chunk":{{"text":"{text}"}}'))  # a value, then more bytes
        agree(CHUNK % f'"chunk":{{"text":"{short}"}}')  # a value ending with the piece
        agree(CHUNK % f'"chunk":{{"{short}":0}}')  # a key of a nested object
        agree(CHUNK % f'"{short}":0')  # a key of data: an escape there takes the full path
        agree(CHUNK % f'"note":"{short}","chunk":{{"{text}":"{text}"}}')
    if piece in ("é", "\u2603", "\U0001f600", "\\u00e9", "\\n", '\\"'):
        assert all(counts), "text the parser accepts is vouched for at every offset"


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3", b"\xe2\x98", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8_anywhere_is_refused_as_the_full_way_refuses_it(bad: bytes):
    for offset in range(0, 34, 3):
        prefix = b"a" * offset
        for record in (
            b'{"seq":1,"time":5,"type":"step/end","data":{"turn":1,"step":1,"note":"' + prefix + bad + b'"}}',
            b'{"seq":1,"time":5,"type":"step/end","data":{"turn":1,"step":1,"note":"' + prefix + "é".encode() + bad + b'x"}}',
            b'{"seq":1,"time":5,"type":"step/end","data":{"turn":1,"step":1,"' + prefix + bad + b'":1}}',
            b'{"seq":1,"time":5,"type":"step/end","data":{"turn":1,"step":1}}' + bad,
        ):
            assert not agree(record)


def test_a_record_cut_anywhere_is_refused_as_the_full_way_refuses_it():
    whole = CHUNK % '"chunk":{"type":"text_delta","index":0,"text":"part \\u00e9 0 \\"x\\" "},"extra":[1.5,-0,true,null]'
    assert agree(whole)
    for length in range(len(whole)):
        assert not agree(whole[:length])


NUMBERS = [
    "0", "-0", "7", "-7", "01", "-01", "00", "-", "+1", "1e3", "1E3", "1e-3", "1.0", "1.", ".5", "1.5e3", "0x1",
    "999999999999999999", "-999999999999999999", "1000000000000000000", "9223372036854775807",
    "9223372036854775808", "-9223372036854775809", "123456789012345678901234567890",
    "0.12345678901234567890", "0.123456789012345678901", "1 2", "Infinity", "NaN", "tru", "nulll",
]


@pytest.mark.parametrize("number", NUMBERS)
def test_numbers_at_their_limits_where_a_rule_looks_and_where_none_does(number: str):
    turn = agree(f'{{"seq":1,"time":5,"type":"turn/start","data":{{"turn":{number}}}}}')
    time = agree(f'{{"seq":1,"time":{number},"type":"turn/start","data":{{"turn":1}}}}')
    seq = agree(f'{{"seq":{number},"time":5,"type":"turn/start","data":{{"turn":1}}}}')
    other = agree(CHUNK % f'"x":[{number}]')
    if number in ("0", "-0", "7", "-7", "999999999999999999", "-999999999999999999"):
        assert turn and time and other  # ints the scan reads in range
    if number in ("01", "-01", "00", "-", "+1", "1e3", "1E3", "1e-3", "1.", ".5", "1.5e3", "0x1", "1 2"):
        assert not (turn or time or seq or other)  # never vouched for: leading zeros, exponents ...
    if number == "1.0":
        assert other and not (turn or time or seq)  # a float is data, never an int a rule needs


REPEATS = [
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1,"turn":"x"}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":"x","turn":1}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1,"turn":2}}',
    '{"seq":1,"time":5,"type":"step/end","data":{"turn":1,"step":1,"step":"x"}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1,"step":1,"step":"x"}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1,"x":1,"x":2}}',
    '{"seq":1,"seq":1,"time":5,"type":"turn/start","data":{"turn":1}}',
    '{"seq":1,"time":5,"time":6,"type":"turn/start","data":{"turn":1}}',
    '{"seq":1,"time":5,"type":"turn/start","type":"turn/start","data":{"turn":1}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1},"data":{"turn":1}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{},"data":{"turn":1}}',
    '{"seq":1,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"a"},"reason":{"kind":"b"}}}',
    '{"seq":1,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"a","kind":1}}}',
    '{"seq":1,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":1,"kind":"a"}}}',
    '{"seq":1,"time":5,"type":"turn/end","data":{"turn":1,"reason":{"k\\u0069nd":1,"kind":"a"}}}',
    '{"seq":1,"time":5,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c","name":"n","arguments":"{}","name":"m"}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1,"t\\u0075rn":"x"}}',
    '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1},"d\\u0061ta":{"turn":"x"}}',
]


@pytest.mark.parametrize("record", REPEATS)
def test_a_repeated_key_where_a_rule_looks_takes_the_full_path(record: str):
    repeated_elsewhere = '"x":1,"x":2' in record or '"step":1,"step":"x"}}' in record and "turn/start" in record
    assert agree(record) == repeated_elsewhere


def test_keys_in_any_order_and_with_whitespace_are_vouched_for_alike():
    top = {"seq": "1", "time": "5", "type": '"tool/call"', "data": None}
    data = {"turn": "1", "step": "2", "call_id": '"c"', "name": '"n"', "arguments": '"{}"'}
    orders = list(itertools.permutations(data))[::7]
    for top_order in itertools.permutations(top):
        for data_order, space in zip(orders, itertools.cycle(["", " ", "\n\t ", "\r"])):
            inner = f",{space}".join(f'{space}"{key}"{space}:{space}{data[key]}' for key in data_order)
            members = [f'"{key}":{top[key] or "{" + inner + "}"}' for key in top_order]
            assert agree(space + "{" + f"{space},".join(members) + "}" + space)
    reason = '{"seq":1,"time":5,"type":"turn/end","data":{"reason":{"x":[{}],"kind":"done","y":{"kind":1}},"turn":3}}'
    assert agree(reason)


@pytest.mark.parametrize(
    "record",
    [
        '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1},"surface_op":null}',
        '{"seq":1,"time":5,"type":"user/message","data":{}}',
        '{"seq":1,"time":5,"type":"tool/result","data":{"message":{}},"surface_op":"append","source_event_seqs":[]}',
        '{"seq":1,"time":5,"type":"turn\\/start","data":{"turn":1}}',
        '{"seq":1,"time":5,"type":"turn/end","data":{"turn":1,"reason":"done"}}',
        '{"seq":1,"time":5,"type":"plugin/x","data":{"ignorable":true}}',
        '{"seq":1,"time":5,"type":"compaction/end","data":[]}',
        '{"seq":1,"time":5,"type":1,"data":{"turn":1}}',
        "[]",
        "",
        " ",
        json.dumps({"seq": 1, "time": 5, "type": "step/end", "data": {"turn": 1, "step": 1, **{f"k{i}": i for i in range(30)}}}),
        json.dumps({"seq": 1, "time": 5, "type": "step/end", "data": {"turn": 1, "step": 1, **{f"k{i}": i for i in range(31)}}}),
    ],
)
def test_records_the_scan_leaves_to_python_decode_as_before(record: str):
    agree(record)


def test_nesting_at_the_depth_limit_and_past_it():
    verdicts = []
    for depth in (61, 62, 63, 64):
        verdicts.append(agree(CHUNK % f'"x":{"[" * depth}1{"]" * depth}'))
        agree(CHUNK % ('"x":' + '{"a":' * depth + "1" + "}" * depth))
    assert verdicts[0] and not verdicts[-1]  # the scan's own limit, below the parser's
