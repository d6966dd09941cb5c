"""The native record decoder (`rust/log/records.rs`): the same events and errors as the Python decoder.

Opening a dshkit log goes through `dshkit._core.split_records` (JSON Lines: lines and checksums)
and `decode_records` (every record into `EventLog` columns); only message events and records the
native scan does not vouch for reach Python. These tests hold it to the Python decoder
(`codec.decode_events`), record by record and for whole logs, bad records included.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dshkit
from dshkit._core import Records, crc32c, decode_records, split_records, verified_rows
from dshkit.session import Session, SessionCorruptError, SessionIntegrityWarning
from dshkit.session._log.event_codec import decode_events
from dshkit.session.events import Event, check_plain_data
from dshkit.session._log.checksums import seal_line

from tests.session.conftest import Build


def append_record(path: Path, record: Any) -> None:
    text = record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)
    with path.open("ab") as log:
        log.write(seal_line(text))


def varied_log(path: Path) -> None:
    """A log with every kind of record: plain events, messages, a replace, a header, a splice,
    an ignorable plugin event, floats, escapes, non-ASCII text."""
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        prompt = session.append("user/message", Build.user("héllo \u2603 \"quoted\"\n")).data
        session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"text": "a\u0001b", "p": 0.25, "big": 1e300}})
        session.append("request/header", {"header": {"model": "m"}, "reason": "initial"})
        reply = Build.assistant("calling", calls=["c1"])
        session.append("assistant/message", {"turn": 1, "step": 1, "message": reply, "usage": {"in": 3}})
        call = session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "lookup", "arguments": "{}"})
        session.append("tool/result", {"turn": 1, "step": 1, "message": Build.result("c1")}, source_event_seqs=[call.seq])
        session.append("plugin/note", {"ignorable": True, "text": "x"})
        session.append("compaction/start", {"why": None})
        session.append("user/message", Build.user("summary"), surface_op={"op": "replace", "start": 0, "end": 1})
        session.append("agent/inbox/spliced", {"inserted": [Build.user("late")]})
        session.append("step/end", {"turn": 1, "step": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert prompt.id


def python_events(path: Path) -> list[Event]:
    lines = path.read_bytes().split(b"\n")[1:-1]
    records = [line[:-18] + b"}" for line in lines]
    return list(decode_events(records, str, lambda event: None))


def test_a_varied_log_opens_to_the_same_events_as_the_python_decoder(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    varied_log(path)
    expected = python_events(path)
    with Session.open(path, read_only=True) as session:
        assert list(session.events) == expected
        assert [session.events[seq] for seq in range(len(expected))] == expected
        assert [message.role for message in session.messages()] == ["user", "assistant", "user"]
        assert session.messages()[0].text == "summary"
        assert session.events[4].type == "request/header"
    with Session.open(path) as session:  # and for writing: appends continue the log
        assert session.append("turn/start", {"turn": 2}).seq == len(expected)
    assert python_events(path)[:-1] == expected


def test_message_events_carry_the_very_messages_on_the_surface(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    varied_log(path)
    with Session.open(path, read_only=True) as session:
        carried = [event.message for event in session.events if event.message is not None]
        for message in session.messages():
            assert any(message is other for other in carried)


def test_records_is_a_sequence_of_record_texts():
    records_text = [b'{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}', b'{"a":1}']
    content = b"header\n" + b"".join(seal_line(text.decode()) for text in records_text)
    records, bad = split_records(content, len(b"header\n"), len(content), True)
    assert bad == -1 and isinstance(records, Records)
    assert len(records) == 2
    assert list(records) == records_text
    assert records[-1] == records_text[1]
    with pytest.raises(IndexError):
        records[2]
    unsealed, bad = split_records(b"x\ny\n", 0, 4, False)
    assert bad == -1 and list(unsealed) == [b"x", b"y"]


@pytest.mark.parametrize("offset", [0, 5, 30, -19, -10, -2])
def test_a_flipped_byte_is_reported_at_its_line(offset: int):
    lines = [seal_line(json.dumps({"seq": seq, "time": 1, "type": "turn/start", "data": {"turn": seq}})) for seq in range(3)]
    damaged = bytearray(lines[1])
    damaged[offset] ^= 0x04
    content = lines[0] + bytes(damaged) + lines[2]
    assert split_records(content, 0, len(content), True) == (None, 1)


def test_a_short_line_is_a_checksum_failure():
    assert split_records(b'{"a":1}\n', 0, 8, True) == (None, 0)
    assert split_records(b"\n", 0, 1, True) == (None, 0)


BAD_PLAIN_RECORDS = {
    "turn not an int": ({"seq": 1, "time": 1, "type": "turn/start", "data": {"turn": "1"}}, "must be an int"),
    "no step": ({"seq": 1, "time": 1, "type": "assistant/chunk", "data": {"turn": 1}}, "needs 'step'"),
    "tool call without arguments": (
        {"seq": 1, "time": 1, "type": "tool/call", "data": {"turn": 1, "step": 1, "call_id": "c", "name": "n"}},
        "'arguments'",
    ),
    "turn end without reason kind": ({"seq": 1, "time": 1, "type": "turn/end", "data": {"turn": 1, "reason": {}}}, "'kind'"),
}


@pytest.mark.parametrize("case", list(BAD_PLAIN_RECORDS))
def test_a_plain_record_breaking_its_rules_is_corruption_naming_its_line(tmp_path: Path, case: str):
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
    record, reason = BAD_PLAIN_RECORDS[case]
    append_record(path, record)
    with pytest.raises(SessionCorruptError, match=f"line 3: .*{reason}"):
        Session.open(path)
    with pytest.warns(SessionIntegrityWarning, match=reason), Session.open(path, read_only=True) as session:
        assert session.events[1].data == record["data"]


@pytest.mark.parametrize(
    "record, reason",
    [
        (b'{"seq":1,"time":1,"type":"turn/start","data":{"turn":1,"x":"\xff"}}', "not valid JSON"),
        (b'{"seq":1,"time":1,"type":"turn/start","data":{"turn":1,}}', "not valid JSON"),
        (b'{"seq":2,"time":1,"type":"turn/start","data":{"turn":1}}', "seq 2 where 1 was expected"),
        (b'{"seq":1,"time":1.5,"type":"turn/start","data":{"turn":1}}', "'time' must be an int"),
        (b'{"seq":1,"time":1,"type":"user/message","data":{"id":"x"}}', "a message event needs"),
        (b'{"seq":1,"time":1,"type":"user/message","data":{"id":"x"},"surface_op":"append","source_event_seqs":[]}', "bad user/message"),
    ],
)
def test_a_record_that_is_no_event_is_corruption_naming_its_line(tmp_path: Path, record: bytes, reason: str):
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
    with path.open("ab") as log:  # a valid checksum over bytes that are no (good) event
        log.write(record[:-1] + b',"crc":"%08x"}\n' % crc32c(record))
    for read_only in (False, True):
        with pytest.raises(SessionCorruptError, match=f"line 3: {reason}"):
            Session.open(path, read_only=read_only)


def test_a_plain_event_carrying_a_surface_op_is_kept_as_it_was_read_only(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
    append_record(path, {"seq": 1, "time": 5, "type": "step/start", "data": {"turn": 1, "step": 1}, "surface_op": "append", "source_event_seqs": [0]})
    append_record(path, {"seq": 2, "time": 6, "type": "step/end", "data": {"turn": 1, "step": 1}})
    with pytest.warns(SessionIntegrityWarning, match="carry no surface_op"), Session.open(path, read_only=True) as session:
        assert session.events[1] == Event("step/start", 1, 5, {"turn": 1, "step": 1}, "append", (0,))
        assert session.events[2] == Event("step/end", 2, 6, {"turn": 1, "step": 1})


def test_a_source_seq_must_name_an_earlier_event_even_when_the_log_holds_later_ones(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("user/message", Build.user("hi"))
    message = Build.user("again").to_dict()
    append_record(path, {"seq": 1, "time": 1, "type": "user/message", "data": message, "surface_op": "append", "source_event_seqs": [2]})
    append_record(path, {"seq": 2, "time": 1, "type": "turn/start", "data": {"turn": 1}})
    with pytest.raises(SessionCorruptError, match="line 3: .*source_event_seqs: 2 is not the seq"):
        Session.open(path)


def test_sequences_of_bytes_and_str_records_decode_alike():
    records = ['{"seq":0,"time":1,"type":"turn/start","data":{"turn":1}}', '{"seq":1,"time":2,"type":"plugin/x","data":{}}']
    by_str = decode_records(records, Event)
    by_bytes = decode_records([record.encode() for record in records], Event)
    assert by_str == by_bytes
    types, times, messages, _, _, pending = by_str
    assert types == ["turn/start", None] and messages == [None, None] and pending == [1]


PLAIN_TYPES = ["turn/start", "turn/end", "step/start", "step/end", "assistant/chunk", "tool/call", "compaction/end"]
leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=5), st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["kind", "x", "turn"]), inner, max_size=3)), max_leaves=6)
plain_data = st.dictionaries(st.sampled_from(["turn", "step", "call_id", "name", "arguments", "reason", "chunk"]), values, max_size=7)


# Records as dshkit writes them, with spaces (another writer), and with the keys in another order.
LAYOUTS = {
    "dshkit": lambda event: dshkit.to_json(event),
    "spaced": lambda event: json.dumps(event, separators=(" , ", " : "), ensure_ascii=False),
    "reordered": lambda event: dshkit.to_json(dict(reversed(list(event.items())))),
}


@settings(max_examples=400, deadline=None)
@given(
    event_type=st.sampled_from(PLAIN_TYPES), data=plain_data, duplicate=st.sampled_from([None, "turn", "step", "kind"]),
    layout=st.sampled_from(list(LAYOUTS)),
)
def test_the_native_scan_never_vouches_for_a_plain_record_the_rules_refuse(event_type: str, data: dict, duplicate: str | None, layout: str):
    record = LAYOUTS[layout]({"seq": 0, "time": 1, "type": event_type, "data": data})
    if duplicate is not None and f'"{duplicate}":' in record:
        record = record.replace(f'"{duplicate}":', f'"{duplicate}":"dup","{duplicate}":', 1)  # the parser keeps the last
    types, _, _, blob, _, pending = decode_records([record], Event)
    frozen = dshkit.from_json(record)["data"]
    if not pending:  # vouched for: the rules must agree, and the record must parse to the same data
        assert types == [event_type]
        check_plain_data(event_type, frozen)
        # kept as its data alone, which parses to the same data (in the same key order)
        assert blob[:1] == b"D" and dshkit.to_json(dshkit.from_json(bytes(blob[1:]))) == dshkit.to_json(frozen)


def test_a_log_written_in_format_1_still_opens(tmp_path: Path):
    path = tmp_path / "old.jsonl"
    header = {"type": "session", "version": 1, "id": "s1", "created_at": 1}
    lines = [header, {"seq": 0, "time": 1, "type": "turn/start", "data": {"turn": 1}}]
    lines.append({"seq": 1, "time": 1, "type": "user/message", "data": Build.user("hi").to_dict(), "surface_op": "append", "source_event_seqs": []})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Session.open(path, read_only=True) as session:
            assert [event.type for event in session.events] == ["turn/start", "user/message"]
            assert session.messages()[0].text == "hi"


def test_rows_are_checked_against_their_checksum_column():
    good = [(b'{"a":1}', crc32c(b'{"a":1}')), ('{"b":"\u00e9"}', crc32c('{"b":"\u00e9"}'))]
    assert verified_rows(good) == ([b'{"a":1}', '{"b":"\u00e9"}'], -1)
    assert verified_rows(iter(good)) == ([b'{"a":1}', '{"b":"\u00e9"}'], -1)
    for bad in [
        (b'{"a":2}', crc32c(b'{"a":1}')),  # changed text
        (b'{"a":1}', str(crc32c(b'{"a":1}'))),  # checksum not an int
        (b'{"a":1}', None),
        (b'{"a":1}', crc32c(b'{"a":1}') + 2**32),
        (b'{"a":1}', True),
        (None, 0),
        ("\ud800", 0),  # not encodable: no checksum can match
        (b'{"a":1}',),
    ]:
        assert verified_rows([good[0], bad]) == (None, 1), bad
