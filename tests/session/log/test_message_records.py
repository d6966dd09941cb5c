"""Message records read in one pass (`rust/log/message_record.rs`) open exactly as the Python decoder
opens them: the same events, surface, errors and warnings, whatever the record's envelope looks
like (keys reordered, extra or repeated keys, escaped keys, missing or ill-typed fields, a
message that breaks a rule, nesting at the depth limit).

The reference is the same `Session.open` with every message record sent down the Python path
(`codec._fold_record`), which is what the native pass does with any record it has a doubt about.
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dshkit
from dshkit._core import decode_records
from dshkit.session import Session, SessionCorruptError, SessionIntegrityWarning
from dshkit.session._log import event_codec as codec
from dshkit.session._log.event_codec import decode_record
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import Event

from tests.session.conftest import seal_any
from tests.session.test_native_appends import message_records, surface_state

USER = '{"id":"u2","role":"user","content":[{"type":"text","text":"more"}],"source":{"kind":"user"}}'
REPLY = (
    '{"id":"a1","role":"assistant","content":[{"type":"text","text":"calling"},'
    '{"type":"tool_call","id":"c1","name":"f","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}'
)
RESULT = (
    '{"id":"r1","role":"user","content":[{"type":"tool_result","tool_call_id":"c1","content":[{"type":"text","text":"ok"}],'
    '"is_error":false}],"source":{"kind":"tool","call_id":"c1"}}'
)
ENVELOPE = '"surface_op":"append","source_event_seqs":[]'
GOOD = {
    1: '{"seq":1,"time":5,"type":"assistant/message","data":{"turn":1,"step":1,"message":%s,"usage":{"input_tokens":3}},%s}' % (REPLY, ENVELOPE),
    3: '{"seq":3,"time":7,"type":"tool/result","data":{"turn":1,"step":1,"message":%s},"surface_op":"append","source_event_seqs":[2]}' % RESULT,
    4: '{"seq":4,"time":8,"type":"user/message","data":%s,%s}' % (USER, ENVELOPE),
}
OTHERS = {
    0: '{"seq":0,"time":4,"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},%s}' % ENVELOPE,
    2: '{"seq":2,"time":6,"type":"tool/call","data":{"turn":1,"step":1,"call_id":"c1","name":"f","arguments":"{}"}}',
}


def assistant(data: str, rest: str = ENVELOPE, head: str = '"seq":1,"time":5,"type":"assistant/message"') -> str:
    return '{%s,"data":%s,%s}' % (head, data, rest)


def user(data: str = USER, rest: str = ENVELOPE, head: str = '"seq":4,"time":8,"type":"user/message"') -> str:
    return '{%s,"data":%s,%s}' % (head, data, rest)


def deep(levels: int) -> str:
    """A message whose one custom block holds `levels` nested lists."""
    nested = "[" * levels + "]" * levels
    return '{"id":"a1","role":"assistant","content":[{"type":"custom","x":%s}],"source":{"kind":"model","provider":"p","model":"m"}}' % nested


# name -> (seq, record, whether the native pass takes it itself rather than leaving it to Python)
CASES: dict[str, tuple[int, str, bool]] = {
    "as written": (1, GOOD[1], True),
    "keys reordered": (1, '{"type":"assistant/message","data":{"message":%s,"step":1,"turn":1},"source_event_seqs":[],"surface_op":"append","time":5,"seq":1}' % REPLY, True),
    "whitespace": (1, '{ "seq" : 1 ,\t"time" : 5 , "type" : "assistant/message" , "data" : { "turn" : 1 , "message" : %s } , "surface_op" : "append" , "source_event_seqs" : [ ] }' % REPLY, True),
    "an extra key": (1, assistant('{"turn":1,"message":%s}' % REPLY, ENVELOPE + ',"note":{"x":[1,2.5,null]}'), True),
    "extra data keys": (1, assistant('{"other":"x","message":%s,"interrupted":true,"error":{"name":"n","code":"c"}}' % REPLY), True),
    "user keys reordered": (4, '{"data":%s,"source_event_seqs":[],"surface_op":"append","type":"user/message","time":8,"seq":4}' % USER, True),
    "user message keys reordered": (4, user('{"source":{"kind":"user"},"content":[{"type":"text","text":"more"}],"role":"user","id":"u2"}'), True),
    "tool result reordered": (3, '{"source_event_seqs":[2],"data":{"message":%s,"turn":1},"seq":3,"surface_op":"append","time":7,"type":"tool/result"}' % RESULT, True),
    # the append rules refuse it: the fold names the rule
    "usage not an object": (1, assistant('{"turn":1,"message":%s,"usage":5}' % REPLY), True),
    "turn not an int": (1, assistant('{"turn":"1","message":%s}' % REPLY), True),
    "error without code": (1, assistant('{"error":{"name":"n"},"message":%s}' % REPLY), True),
    "surface_op null": (1, assistant('{"message":%s}' % REPLY, '"surface_op":null,"source_event_seqs":[]'), True),
    "a replace": (4, user(rest='"surface_op":{"op":"replace","start":0,"end":1},"source_event_seqs":[]'), True),
    "citing a later seq": (4, user(rest='"surface_op":"append","source_event_seqs":[9]'), True),
    "citing a bool": (4, user(rest='"surface_op":"append","source_event_seqs":[true]'), True),
    "a user message from a model": (4, user('{"id":"u2","role":"user","content":[],"source":{"kind":"model","provider":"p","model":"m"}}'), True),
    "a reply with the user role": (1, assistant('{"message":%s}' % REPLY.replace('"role":"assistant"', '"role":"user"')), True),
    "a result for no pending call": (3, GOOD[3].replace('"c1"', '"c9"'), True),
    "a message id already logged": (4, user(USER.replace('"u2"', '"u1"')), True),
    # no event: the Python decoder names what is wrong
    "no surface_op": (1, assistant('{"message":%s}' % REPLY, '"source_event_seqs":[]'), False),
    "no source_event_seqs": (1, assistant('{"message":%s}' % REPLY, '"surface_op":"append"'), False),
    "no time": (4, user(head='"seq":4,"type":"user/message"'), False),
    "no seq": (4, user(head='"time":8,"type":"user/message"'), False),
    "no data": (4, '{"seq":4,"time":8,"type":"user/message",%s}' % ENVELOPE, False),
    "no message in the data": (1, assistant('{"turn":1}'), False),
    "data a list": (1, assistant("[%s]" % REPLY), False),
    "message a string": (1, assistant('{"message":"hi"}'), False),
    "time a string": (4, user(head='"seq":4,"time":"8","type":"user/message"'), False),
    "time a float": (4, user(head='"seq":4,"time":8.0,"type":"user/message"'), False),
    "time a bool": (4, user(head='"seq":4,"time":true,"type":"user/message"'), False),
    "time the largest int": (4, user(head='"seq":4,"time":9223372036854775807,"type":"user/message"'), True),
    "time past the largest int": (4, user(head='"seq":4,"time":9223372036854775808,"type":"user/message"'), False),
    "time with a leading zero": (4, user(head='"seq":4,"time":08,"type":"user/message"'), False),
    "time negative zero": (4, user(head='"seq":4,"time":-0,"type":"user/message"'), True),
    "time an exponent": (4, user(head='"seq":4,"time":8e0,"type":"user/message"'), False),
    "seq a float": (4, user(head='"seq":4.0,"time":8,"type":"user/message"'), False),
    "seq wrong": (4, user(head='"seq":5,"time":8,"type":"user/message"'), False),
    # a seq that is not a plain JSON integer, though its digits may read as the index
    "seq with a leading zero": (4, user(head='"seq":04,"time":8,"type":"user/message"'), False),
    "seq of 19 digits, the index's value": (4, user(head='"seq":0000000000000000004,"time":8,"type":"user/message"'), False),
    "seq of 20 digits, the index's value": (4, user(head='"seq":00000000000000000004,"time":8,"type":"user/message"'), False),
    "seq of 25 digits, the index's value": (4, user(head='"seq":%s4,"time":8,"type":"user/message"' % ("0" * 24)), False),
    "seq of 19 digits": (4, user(head='"seq":1000000000000000004,"time":8,"type":"user/message"'), False),
    "seq of 20 digits": (4, user(head='"seq":10000000000000000004,"time":8,"type":"user/message"'), False),
    "seq of 25 digits": (4, user(head='"seq":1%s4,"time":8,"type":"user/message"' % ("0" * 23)), False),
    "seq negative": (4, user(head='"seq":-4,"time":8,"type":"user/message"'), False),
    "seq negative zero": (0, OTHERS[0].replace('"seq":0', '"seq":-0'), True),
    "seq a fraction": (4, user(head='"seq":4.5,"time":8,"type":"user/message"'), False),
    "seq an exponent": (4, user(head='"seq":4e0,"time":8,"type":"user/message"'), False),
    "seq a fraction with an exponent": (4, user(head='"seq":4.0e0,"time":8,"type":"user/message"'), False),
    "source seqs an object": (4, user(rest='"surface_op":"append","source_event_seqs":{}'), False),
    "source seqs a string": (4, user(rest='"surface_op":"append","source_event_seqs":"3"'), False),
    "repeated seq": (4, user(head='"seq":0,"seq":4,"time":8,"type":"user/message"'), False),
    "repeated type, the last plain": (4, user(rest=ENVELOPE + ',"type":"turn/start"'), False),
    "repeated type, the last another message type": (1, assistant('{"message":%s}' % REPLY, ENVELOPE + ',"type":"tool/result"'), False),
    "repeated data, the first bad": (4, user('{"id":""}', '"data":%s,%s' % (USER, ENVELOPE)), False),
    "repeated data, the last bad": (4, user(rest='"data":{"id":""},' + ENVELOPE), False),
    "repeated surface_op": (4, user(rest='"surface_op":"replace",' + ENVELOPE), False),
    "repeated message": (1, assistant('{"message":{"id":""},"message":%s}' % REPLY), False),
    "repeated turn": (1, assistant('{"turn":"x","message":%s,"turn":1}' % REPLY), False),
    "repeated message id": (4, user(USER.replace('"id":"u2"', '"id":"zz","id":"u2"')), True),
    "escaped envelope key": (4, user(rest='"surface_op":"append","source_\\u0065vent_seqs":[]'), False),
    "escaped data key": (1, assistant('{"t\\u0075rn":"x","message":%s}' % REPLY), False),
    "escaped message key": (4, user(USER.replace('"role"', '"r\\u006fle"')), True),
    "escaped type": (4, user(head='"seq":4,"time":8,"type":"user\\/message"'), False),
    "a block without text": (4, user('{"id":"u2","role":"user","content":[{"type":"text"}],"source":{"kind":"user"}}'), False),
    "content a number": (4, user('{"id":"u2","role":"user","content":5,"source":{"kind":"user"}}'), False),
    "content a string": (4, user('{"id":"u2","role":"user","content":"more","source":{"kind":"user"}}'), True),
    "an unknown message key": (4, user(USER[:-1] + ',"extra":1}'), False),
    "an empty id": (4, user(USER.replace('"u2"', '""')), False),
    "no source": (4, user('{"id":"u2","role":"user","content":[]}'), False),
    "a bad role": (4, user(USER.replace('"role":"user"', '"role":"robot"')), False),
    "a trailing comma": (4, user(USER[:-1] + ",}"), False),
    "an int out of range": (1, assistant('{"message":%s,"usage":{"n":99999999999999999999}}' % REPLY), False),
    "trailing text": (4, user() + " x", False),
    "at the depth limit": (1, assistant('{"message":%s}' % deep(251)), True),
    "one level past the depth limit": (1, assistant('{"message":%s}' % deep(252)), False),
}


def write_log(path: Path, seq: int, record: str) -> list[str]:
    with Session.create(path):
        pass
    records = [OTHERS.get(index) or GOOD[index] for index in range(5)]
    records[seq] = record
    with path.open("ab") as log:
        for text in records:
            log.write(seal_any(text))
    return records


def every_message_the_python_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `Session.open` leave every message record to the Python decoder."""
    native = codec.decode_records

    def deferring(records: Any, event_class: Any) -> Any:
        types, times, messages, blob, ends, pending = native(records, event_class)
        seqs: list[int] = []
        for item in pending:
            if type(item) is tuple:
                seqs.extend(item[0])
            else:
                seqs.append(item if type(item) is int else item.seq)
        return types, times, messages, blob, ends, seqs

    monkeypatch.setattr(codec, "decode_records", deferring)


def opened(path: Path) -> tuple[Any, ...]:
    """What opening `path` gives: read-only (events, surface, warnings), and for writing (the error)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Session.open(path, read_only=True) as session:
                read = (list(session.events), [m.id for m in session.messages()], surface_state(session._surface))
        except SessionCorruptError as error:
            read = (f"corrupt: {error}",)
    warned = [str(w.message) for w in caught if isinstance(w.message, SessionIntegrityWarning)]
    try:
        with Session.open(path) as session:
            written: Any = len(session.events)
    except SessionCorruptError as error:
        written = f"corrupt: {error}"
    return read, warned, written


@pytest.mark.parametrize("case", list(CASES))
def test_a_message_record_opens_as_the_python_decoder_opens_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str):
    seq, record, native = CASES[case]
    path = tmp_path / "log.jsonl"
    records = write_log(path, seq, record)
    _, _, messages, _, _, pending = decode_records(records, Event)
    deferred = [item for item in pending if type(item) is int]
    assert (seq not in deferred) == native, pending
    if native:  # the Python decoder accepts it too, to the same event
        event, _ = decode_record(record, seq, str)
        assert event.message == messages[seq]
        events = [item for item in pending if type(item) is Event]
        assert all(item == event for item in events if item.seq == seq)
    got = opened(path)
    every_message_the_python_way(monkeypatch)
    assert got == opened(path)


@pytest.mark.parametrize(
    ("written_seq", "error"),
    [
        ("04", "line 6: not valid JSON"),
        ("0" * 18 + "4", "line 6: not valid JSON"),
        ("1" + "0" * 17 + "4", "line 6: seq 1000000000000000004 where 4 was expected (seqs are contiguous from 0)"),
        ("1" + "0" * 18 + "4", "line 6: not valid JSON"),
        ("-4", "line 6: seq -4 where 4 was expected (seqs are contiguous from 0)"),
        ("4.5", "line 6: 'seq' must be an int"),
        # equal to 4 in Python, but no int: refused by type
        ("4.0", "line 6: 'seq' must be an int"),
        ("4e0", "line 6: 'seq' must be an int"),
        ("4.0e0", "line 6: 'seq' must be an int"),
    ],
)
def test_a_message_record_whose_seq_is_no_plain_integer_is_named_by_the_python_decoder(tmp_path: Path, written_seq: str, error: str):
    # The native pass reads a seq only as a plain integer of at most 18 digits: any other seq,
    # whatever its digits' value, leaves the record to the Python decoder, which names it.
    path = tmp_path / "log.jsonl"
    records = write_log(path, 4, user(head='"seq":%s,"time":8,"type":"user/message"' % written_seq))
    assert 4 in decode_records(records, Event)[5]
    with pytest.raises(SessionCorruptError) as raised:
        Session.open(path, read_only=True)
    assert str(raised.value) == f"{path}: {error}"


@pytest.mark.parametrize("record", [GOOD[1], '{"seq":1,"time":5,"type":"turn/start","data":{"turn":1}}'])
@pytest.mark.parametrize("written_seq", ["true", "1.0", "1e0"])
def test_a_record_whose_seq_only_equals_its_index_is_refused(tmp_path: Path, written_seq: str, record: str):
    # `true == 1` and `1.0 == 1` in Python: the decoder checks the seq's type as well as its value.
    path = tmp_path / "log.jsonl"
    records = write_log(path, 1, record.replace('"seq":1', '"seq":%s' % written_seq))
    assert '"seq":%s,' % written_seq in records[1]
    with pytest.raises(SessionCorruptError) as raised:
        Session.open(path, read_only=True)
    assert str(raised.value) == f"{path}: line 3: 'seq' must be an int"


def test_a_record_naming_a_message_type_first_and_another_last_is_the_last(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    write_log(path, 4, user(rest=ENVELOPE + ',"type":"turn/start"'))
    with pytest.warns(SessionIntegrityWarning), Session.open(path, read_only=True) as session:
        assert session.events[4].type == "turn/start"
        assert [m.id for m in session.messages()] == ["u1", "a1", "r1"]


def reshaped(record: dict[str, Any], rng: random.Random, change: str) -> str:
    """`record`'s JSON with its keys (and its data's) in another order, and maybe one more key."""

    def shuffled(mapping: dict[str, Any]) -> list[tuple[str, Any]]:
        items = list(mapping.items())
        rng.shuffle(items)
        return items

    data = record["data"]
    data_items = shuffled(data) if "message" in data else list(data.items())
    top = [(key, dict(data_items) if key == "data" else value) for key, value in shuffled(record)]
    text = "{" + ",".join(f"{json.dumps(key)}:{json.dumps(value)}" for key, value in top) + "}"
    if change == "extra key":
        return text[:-1] + ',"x":[1,{"y":2.5}]}'
    if change in ("repeated seq", "repeated turn"):
        key = '"seq":' if change == "repeated seq" else '"turn":'
        return text.replace(key, key + "0," + key, 1) if key in text else text
    return text


@settings(max_examples=400, deadline=None)
@given(case=message_records(), order=st.randoms(use_true_random=False), change=st.sampled_from(["none", "extra key", "repeated seq", "repeated turn"]))
def test_a_reshaped_record_decodes_natively_only_to_what_python_decodes(case: tuple[str, int, str], order: random.Random, change: str):
    text, seq, _ = case
    record = reshaped(json.loads(text), order, change)
    filler = '{"seq":%d,"time":1,"type":"turn/start","data":{"turn":1}}'
    types, times, messages, blob, ends, pending = decode_records([filler % index for index in range(seq)] + [record], Event)
    if seq in pending:
        return  # left to the Python decoder
    event, _ = decode_record(record, seq, str)
    assert messages[seq] == event.message
    for item in pending:
        if type(item) is Event:
            assert item == event
    # and what the log keeps of it (`[data, source seqs]`, nothing, or the record without its
    # message) rebuilds the same event: every field, in key order
    log = EventLog()
    log.adopt(types, times, messages, blob, ends)
    log.reveal(seq + 1)
    assert dshkit.to_json(tuple(log[seq])) == dshkit.to_json(tuple(event))
    assert log[seq].message is messages[seq]
