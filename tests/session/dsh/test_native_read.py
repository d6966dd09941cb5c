"""The native reader of original logs (`rust/original/`) against the Python path it stands in for.

Every log is translated both ways, `codec.decode_records` (native pass, the rest in Python) and
`codec.decode_records_in_python` (the reference), and must give the same events (types, seqs,
times, data, surface ops, source seqs, message ids), fold the same events in the same order, and
fail with the same error on the same record.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dshkit._core import _decode_original_records_taped, decode_original_records
from support import assert_no_collection_during
from dshkit.session import Session, SessionCorruptError, SessionRecoveryWarning
from dshkit.session.dsh import codec
from dshkit.session.dsh.chunk_rows import ROW_TYPES
from dshkit.session.dsh.repair import plan_closers
from dshkit.session.dsh.vocabulary import IGNORABLE_TYPES, VERBATIM_TYPES
from dshkit.session.events import Event
from tests.session.dsh.original_logs import OriginalLog, assistant, tool_result, user
from tests.session.dsh.scenarios import SCENARIOS

T = 1_783_600_629_539


def _native_reads(records: list[Any]) -> bool:
    return decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES) is not None


def _decode(decoder: Any, records: list[Any]) -> tuple[str, Any]:
    """What `decoder` makes of `records`: ("events", (events, message ids, folded, header seq)) or ("error", message)."""
    folded: list[Event] = []
    try:
        events = decoder(records, lambda index: f"line {index + 2}", folded.append)
    except SessionCorruptError as error:
        return "error", str(error)
    as_list = list(events)
    assert [events[seq] for seq in range(len(events))] == as_list  # by index as by iteration
    ids = [event.message.id if event.message is not None else None for event in as_list]
    return "events", (as_list, ids, folded, events.header_seq, [events.type_at(seq) for seq in range(len(events))])


def assert_same_both_ways(records: list[Any], *, native: bool | None = True) -> tuple[str, Any]:
    """Both translations of `records` agree (`native`: whether the native pass must take the log),
    and the native pass gives the same columns with every record read as the thread ahead of it
    reads a large log's (message appends rewritten and taped there)."""
    if native is not None:
        assert _native_reads(records) is native
    taped, _ = _decode_original_records_taped(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert taped == decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    got = _decode(codec.decode_records, records)
    assert got == _decode(codec.decode_records_in_python, records)
    return got


def _lines(log: OriginalLog, *, spaced: bool = False) -> list[bytes]:
    if spaced:
        return [json.dumps(record).encode() for record in log.records]
    return [line.encode() for line in log.lines()]


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":")).encode()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("form", ["bytes", "str", "spaced"])
def test_every_scenario_reads_the_same_both_ways(name: str, form: str) -> None:
    lines = _lines(SCENARIOS[name](), spaced=form == "spaced")
    records: list[Any] = [line.decode() for line in lines] if form == "str" else lines
    kind, (events, ids, folded, _, _) = assert_same_both_ways(records)
    assert kind == "events" and events and any(ids) and folded


def _agent_log(turns: int) -> OriginalLog:
    """An agent's log as the bench writes it: boundaries, a prompt, a title, a packed row, tool calls."""
    log = OriginalLog()
    for turn in range(1, turns + 1):
        log.event("turn/start", {"turn": turn})
        log.event("step/start", {"turn": turn, "step": 1})
        prompt = log.event("user/message", user(f"look up item {turn} \u00e9\u4e2d"), surfaceOp="append")
        log.event("session/title", {"title": f"item {turn}", "messageSeqs": [prompt], "source": {"kind": "fallback"}})
        first = log.seq
        log.packed("text-chunks", turn, 1, 0, ["part ", "\u00e9 \"quoted\"\n", "\\end"])
        log.packed("tool-call-chunks", turn, 1, 1, ['{"item', '": ', f"{turn}}}"], id=f"call_{turn}", name="lookup")
        log.packed("tool-call-chunks", turn, 1, 2, ["{", "}", " "], id=f"call_{turn}b")
        reply = assistant({"type": "text", "text": "part"}, {"type": "tool-call", "id": f"call_{turn}", "name": "lookup", "arguments": "{}"})
        log.event("assistant/message", {"turn": turn, "step": 1, "message": reply, "usage": {"inputTokens": 9, "outputTokens": 4}},
                  sourceEventSeqs=list(range(first, log.seq)), surfaceOp="append")
        call = log.event("tool/call", {"turn": turn, "step": 1, "callId": f"call_{turn}", "name": "lookup", "arguments": "{}"})
        log.event("tool/result", {"turn": turn, "step": 1, "message": tool_result(f"call_{turn}", "blue")}, sourceEventSeqs=[call], surfaceOp="append")
        log.event("step/end", {"turn": turn, "step": 1})
        log.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return log


def test_an_agent_log_reads_the_same_both_ways() -> None:
    kind, (events, _, folded, _, _) = assert_same_both_ways(_lines(_agent_log(30)))
    assert kind == "events" and len(folded) == 90
    chunks = [event for event in events if event.type == "assistant/chunk"]
    assert chunks[1].data["chunk"]["text"] == "\u00e9 \"quoted\"\n" and chunks[3].data["chunk"]["name"] == "lookup"
    assert "name" not in chunks[6].data["chunk"] and chunks[8].data["chunk"]["argumentsDelta"] == " "


# Records of the original's own types (presented ignorable), odd but readable: each must read the
# same both ways, whether the native pass reads it or leaves it to Python.
ODD_RECORDS = [
    {"type": "hook/invoked", "seq": 1, "time": T, "data": {}},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": {"ignorable": False, "x": 1}},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": {"x": 1, "x2": [1, 2.5, None, True]}},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": [1, 2]},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": "text"},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": None},
    {"type": "hook/invoked", "seq": 1, "time": T, "data": {"x": 1}, "ignorable": True},
    {"type": "turn/start", "seq": 1, "time": T, "data": {"turn": 1}, "surfaceOp": "append"},
    {"type": "turn/start", "seq": 1, "time": -5, "data": {"turn": 1.5}},
    {"type": "assistant/chunk", "seq": 1, "time": T, "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "\ud83d\ude00"}}},
    {"type": "future/kind", "seq": 1, "time": T, "data": {"x": 1}},
    {"type": "future/kind", "seq": 1, "time": T, "data": {"x": 1}, "ignorable": True},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1, "reason": {"kind": "max-tokens"}}},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1, "reason": {"kind": "error", "error": {"message": "x", "code": "y"}}}},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1, "reason": {"kind": 5}}},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1, "reason": "completed"}},
    {"type": "turn/end", "seq": 1, "time": T, "data": {"turn": 1}},
    {"type": "turn/end", "seq": 1, "time": T, "data": [1]},
    {"type": "tool/call", "seq": 1, "time": T, "data": {"turn": 1, "step": 1, "callId": "c", "name": "n", "arguments": "{}"}},
    {"type": "tool/call", "seq": 1, "time": T, "data": {"turn": 1, "step": 1, "callId": "c", "call_id": "d"}},
    {"type": "tool/call", "seq": 1, "time": T, "data": {"turn": 1, "step": 1, "name": "n"}},
    {"type": "tool/call", "seq": 1, "time": T, "data": "c"},
    {"type": "request/header", "seq": 1, "time": T, "data": {"header": {"config": {"provider": "p", "model": "m", "maxTokens": 5}}, "reason": "initial"}},
    {"type": "step/start", "seq": 1, "time": 12345678901234567890, "data": {"turn": 1, "step": 1}},
    # Claiming another seq than the next (read ahead, a record is read for the seq it claims).
    {"type": "turn/start", "seq": 2, "time": T, "data": {"turn": 1}},
    {"type": "turn/start", "seq": -1, "time": T, "data": {"turn": 1}},
]
ODD_TEXTS = [
    b'{"type":"hook/invoked","seq":1,"time":%d,"data":{"a":1,"a":2}}' % T,
    b'{"type":"turn/end","seq":1,"time":%d,"data":{"reason":{"kind":"max\\u002dtokens"}}}' % T,
    b'{"type":"turn/end","seq":1,"time":%d,"data":{"reason":{"kind":"completed","kind":"aborted","reason":{"kind":"user"}}}}' % T,
    b'{"type":"turn/end","seq":1,"time":%d,"data":{"reason":{"ki\\u006ed":"aborted","reason":{"kind":"user"}}}}' % T,
    b'{"type":"turn/end","seq":1,"time":%d,"data":{"reason":{},"reason":{"kind":"max-tokens"}}}' % T,
    b'{"type":"tool/call","seq":1,"time":%d,"data":{"callId":"a","callId":"b"}}' % T,
    b'{"type":"tool/call","seq":1,"time":%d,"data":{ "callId" : "a" }}' % T,
    b'{"type":"hook/invoked","seq":1,"time":%d,"data":{"ign\\u006frable":1}}' % T,
    b'{"type":"hook/invoked","seq":1,"time":%d,"data":{ "a" : 1 , "b":{} } }' % T,
    b'{"type":"hook/invoked","seq":1,"time":%d,"data":{ }}' % T,
    b' {"type" : "step/end" , "seq" : 1 , "time" : %d , "data" : {"turn":1,"step":1}} ' % T,
    b'{"type":"step/end","seq":1,"time":%d,"data":{"turn":1e0,"step":1}}' % T,
    b'{"type":"step\\/end","seq":1,"time":%d,"data":{"turn":1,"step":1}}' % T,
    b'{"type":"step/end","seq":1,"time":%d,"time":5,"data":{"turn":1,"step":1}}' % T,
    b'{"type":"step/end","seq":1,"time":%d,"data":{"turn":1,"step":1},"data":{}}' % T,
    b'{"type":"step/end","seq":1,"time":%d,"data":{"turn":1,"step":1}}' % T,
]


@pytest.mark.parametrize("odd", [_line(record) for record in ODD_RECORDS] + ODD_TEXTS)
def test_odd_records_read_the_same_both_ways(odd: bytes) -> None:
    first = _line({"type": "turn/start", "seq": 0, "time": T, "data": {"turn": 1}})
    last = _line({"type": "step/end", "seq": 2, "time": T, "data": {"turn": 1, "step": 1}})
    assert_same_both_ways([first, odd, last], native=None)


def test_the_native_pass_reads_the_plain_records_and_leaves_the_rest() -> None:
    records = [_line({**record, "seq": seq}) for seq, record in enumerate(ODD_RECORDS)]
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    types, _, _, blob, _, pending = columns
    # Left to Python: ignorable data holding "ignorable" itself, extra envelope keys, a surrogate
    # pair's escapes, unknown types, turn ends dshkit names otherwise, a call naming both
    # `callId` and `call_id`, a request header, a time past 64 bits.
    assert [index for index, _ in pending] == [1, 6, 7, 9, 10, 11, 12, 13, 20, 23, 24]
    assert b'D{"turn":1,"step":1,"call_id":"c","name":"n","arguments":"{}"}E' in blob
    assert types[0] == "hook/invoked" and types[1] is None
    assert blob.startswith(b'D{"ignorable":true}E')


def _row(tag: str, seq0: Any = 1, **data: Any) -> bytes:
    fields: dict[str, Any] = {"turn": 1, "step": 1, "index": 0, "dt": [2, -1], "texts": ["a", "b", "c"]}
    if tag == "tool-call-chunks":
        del fields["texts"]
        fields.update(id="call", name="bash", args=["{", "}", "x"])
    fields.update(data)
    return _line({"type": tag, "seq0": seq0, "time0": T, "data": {key: value for key, value in fields.items() if value is not None}})


GOOD_ROWS = [
    _row("text-chunks"),
    _row("reasoning-chunks", texts=["\u00e9", "\\n", '"'], dt=[0, 0]),
    _row("tool-call-chunks"),
    _row("tool-call-chunks", name=None),
    _row("text-chunks", texts=["only"], dt=[]),
]
# Each is refused by the Python path, or read in a way the native pass does not vouch for: the
# whole log then takes the Python path.
BAD_ROWS = [
    _row("text-chunks", dt=[1]),
    _row("text-chunks", texts=[], dt=[]),
    _row("text-chunks", seq0=5),
    _row("text-chunks", seq0=True),
    _row("text-chunks", turn=1.0),
    _row("text-chunks", extra=1),
    _row("text-chunks", texts=["a", 1, "c"]),
    _row("tool-call-chunks", name=7),
    _row("tool-call-chunks", id=None),
    _row("text-chunks", id="call"),
    _row("text-chunks").replace(b'"turn":1', b'"turn":1,"turn":2'),
    _row("text-chunks").replace(b"text-chunks", b"text\\u002dchunks"),
    _row("text-chunks").replace(b'"seq0"', b'"se\\u0071\\u0030"'),
    _row("text-chunks").replace(b'"time0":', b'"time0":1.5,"x":'),
]


@pytest.mark.parametrize("row", GOOD_ROWS)
def test_packed_rows_read_the_same_both_ways(row: bytes) -> None:
    first = _line({"type": "turn/start", "seq": 0, "time": T, "data": {"turn": 1}})
    kind, (events, *_rest) = assert_same_both_ways([first, row])
    assert kind == "events" and {event.type for event in events[1:]} == {"assistant/chunk"}


@pytest.mark.parametrize("row", BAD_ROWS)
def test_a_row_the_native_pass_is_unsure_of_leaves_the_log_to_python(row: bytes) -> None:
    first = _line({"type": "turn/start", "seq": 0, "time": T, "data": {"turn": 1}})
    assert_same_both_ways([first, row], native=False)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"type":"step/end","seq":1,"time":5,"data":{"turn":1,"step":1}',  # torn
        b"not json",
        b'{"type":"step/end","seq":7,"time":5,"data":{}}',
        b'{"type":"step/end","seq":1,"time":5.5,"data":{}}',
        b'{"type":"step/end","seq":1,"time":5}',
        b'{"seq":1,"time":5,"data":{}}',
        b"[1]",
        _row("text-chunks", dt=[12345678901234567890, 1]),  # no int the parser reads
        b'{"type":"user/message","seq":1,"time":5,"data":{"content":[]},"surfaceOp":"append"}',
        b'{"type":"user/message","seq":1,"time":5,"data":{},"surfaceOp":{"op":"replace","start":9,"end":9}}',
    ],
)
def test_a_bad_record_fails_the_same_both_ways(bad: bytes) -> None:
    first = _line({"type": "turn/start", "seq": 0, "time": T, "data": {"turn": 1}})
    after = [_row("text-chunks", seq0=2), _line({"type": "hook/invoked", "seq": 5, "time": T, "data": {}})]
    kind, message = assert_same_both_ways([first, bad, *after], native=None)
    assert kind == "error" and message.startswith("line 3: ")


def _open(path: Path, **options: Any) -> tuple[list[Event], list[Any]]:
    with Session.open(path, **options) as session:
        return list(session.events), [(m.id, m.role, m.content) for m in session.messages()]


@pytest.mark.parametrize("suffix", ["session.jsonl", "session.jsonl.zstd"])
def test_a_session_opens_the_same_both_ways(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("zstandard")
    log = _agent_log(12)
    log.frames.extend(range(0, len(log.records), 7))
    path = log.write(tmp_path / suffix)
    native = _open(path, read_only=True)
    monkeypatch.setattr(codec, "decode_original_records", lambda *args: None)
    assert _open(path, read_only=True) == native
    assert len(native[1]) == 36


def test_a_torn_last_line_opens_the_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _agent_log(3)
    torn = [log.write(tmp_path / f"{way}.jsonl") for way in ("native", "python")]
    for path in torn:
        with open(path, "a") as file:
            file.write(_line({"type": "text-chunks", "seq0": log.seq, "time0": T, "data": {}}).decode()[:30])
    with pytest.warns(SessionRecoveryWarning, match="torn last line"):
        native = _open(torn[0])
    monkeypatch.setattr(codec, "decode_original_records", lambda *args: None)
    with pytest.warns(SessionRecoveryWarning, match="torn last line"):
        assert _open(torn[1]) == native


# -- message events ----------------------------------------------------------------------------


def _conversation(**variant: Any) -> list[bytes]:
    """A turn with a prompt, a tool call and its result, and an answer; `variant` changes records
    by name (`prompt`, `call`, `result`, `answer`): a function of the record, returning it."""
    log = OriginalLog()
    log.event("turn/start", {"turn": 1})
    log.event("step/start", {"turn": 1, "step": 1})
    log.event("user/message", user("look it up \u00e9 \\ \"x\""), surfaceOp="append")
    call = {"type": "tool-call", "id": "call_1", "name": "lookup", "arguments": "{}"}
    log.event("assistant/message", {"turn": 1, "step": 1, "message": assistant({"type": "text", "text": "ok"}, call),
                                    "usage": {"inputTokens": 9, "outputTokens": 4, "cacheReadTokens": 0}}, surfaceOp="append")
    call_seq = log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_1", "name": "lookup", "arguments": "{}"})
    log.event("tool/result", {"turn": 1, "step": 1, "message": tool_result("call_1", "blue")}, sourceEventSeqs=[call_seq], surfaceOp="append")
    log.event("assistant/message", {"turn": 1, "step": 2, "message": assistant({"type": "text", "text": "It is blue."}), "finishReason": "stop"},
              surfaceOp="append")
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    names = {"prompt": 2, "call": 3, "result": 5, "answer": 6}
    for name, change in variant.items():
        log.records[names[name]] = change(json.loads(json.dumps(log.records[names[name]])))
    return _lines(log)


def _set(path: str, value: Any) -> Any:
    """A change setting `record[path...]` (keys split on `/`; `DELETE` removes the key)."""

    def change(record: dict[str, Any]) -> dict[str, Any]:
        *parents, last = path.split("/")
        target: Any = record
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        index: Any = int(last) if isinstance(target, list) else last
        if value is DELETE:
            del target[index]
        else:
            target[index] = value
        return record

    return change


DELETE = object()
MESSAGE_VARIANTS = {
    "as written": {},
    "prompt with an extra message key": {"prompt": _set("data/extra", 1)},
    "prompt off the surface": {"prompt": _set("surfaceOp", DELETE)},
    "prompt with an ignorable envelope": {"prompt": _set("ignorable", True)},
    "prompt citing itself": {"prompt": _set("sourceEventSeqs", [2])},
    "prompt claiming the next seq": {"prompt": _set("seq", 3)},
    "prompt claiming a negative seq": {"prompt": _set("seq", -2)},
    "answer claiming an earlier seq": {"answer": _set("seq", 5)},
    "prompt citing a dict": {"prompt": _set("sourceEventSeqs", {"a": 1})},
    "prompt from a plugin": {"prompt": _set("data/source", {"kind": "plugin", "plugin": "notes"})},
    "prompt from the compact plugin": {"prompt": _set("data/source", {"kind": "plugin", "plugin": "compact", "compactionId": "c1"})},
    "prompt with an image by attachment": {"prompt": _set("data/content/0", {"type": "image", "attachment": {"attachmentId": "sha256:" + "0" * 64, "mediaType": "image/png"}})},
    "prompt with an image by url": {"prompt": _set("data/content/0", {"type": "image", "url": "https://example.com/a.png"})},
    "prompt with a block no object": {"prompt": _set("data/content/0", "text")},
    "call replayed from state": {"call": _set("data/message/source/replayState", {"x": 1})},
    "call with snake and camel finish reasons": {"call": _set("data/finishReason", "stop")},
    "call with both finish reasons": {"call": lambda r: _set("data/finish_reason", "stop")(_set("data/finishReason", "stop")(r))},
    "call with usage keys meeting": {"call": _set("data/usage/input_tokens", 3)},
    "call with usage no object": {"call": _set("data/usage", [1])},
    "call without a message": {"call": _set("data/message", DELETE)},
    "result without isError": {"result": _set("data/message/content/0/isError", DELETE)},
    "result with isError true": {"result": _set("data/message/content/0/isError", True)},
    "result without toolCallId": {"result": _set("data/message/content/0/toolCallId", DELETE)},
    "result without content": {"result": _set("data/message/content/0/content", DELETE)},
    "result with content text": {"result": _set("data/message/content/0/content", "blue")},
    "result with a nested call": {"result": _set("data/message/content/0/content/0", {"type": "tool-call", "id": "x", "name": "n", "arguments": "{}"})},
    "result with an extra block key": {"result": _set("data/message/content/0/note", "n")},
    "result with a tool_call_id key": {"result": _set("data/message/content/0/tool_call_id", "call_1")},
    "result answering another call": {"result": lambda r: _set("data/message/source/callId", "call_9")(_set("data/message/content/0/toolCallId", "call_9")(r))},
    "result source without callId": {"result": _set("data/message/source/callId", DELETE)},
    "result source with both call ids": {"result": _set("data/message/source/call_id", "call_1")},
    "answer repeating the prompt's id": {"answer": lambda r: r},
    "answer with a bad turn": {"answer": _set("data/turn", "one")},
    "answer empty": {"answer": _set("data/message/content", [])},
}


@pytest.mark.parametrize("name", sorted(MESSAGE_VARIANTS))
def test_message_events_read_the_same_both_ways(name: str) -> None:
    records = _conversation(**MESSAGE_VARIANTS[name])
    if name == "answer repeating the prompt's id":
        records[6] = records[6].replace(json.loads(records[6])["data"]["message"]["id"].encode(), json.loads(records[2])["data"]["id"].encode())
    assert_same_both_ways(records, native=None)


def test_the_messages_of_a_conversation_are_read_natively() -> None:
    columns = decode_original_records(_conversation(), VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    assert [item for item in columns[5] if len(item) == 2] == []  # nothing left to Python
    runs = [item for item in columns[5] if len(item) == 4]
    assert [seq for seqs, _, _, _ in runs for seq in seqs] == [2, 3, 5, 6]


def test_the_messages_of_a_conversation_are_read_from_their_tapes_ahead() -> None:
    records = _conversation()
    columns, taped = _decode_original_records_taped(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert taped == 4 and columns == decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    # An append left to Python is not read ahead either: the prompt off the surface.
    _, taped = _decode_original_records_taped(_conversation(prompt=_set("surfaceOp", DELETE)), VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert taped == 3


# The top scan rewrites a message's data into the chunk's buffer as it meets it (after `type`);
# what the record then turns out to be decides whether that stays. Each change to the prompt's
# text below comes after its data: the records after it must read as before.
BEGUN_THEN_REFUSED = {
    "type repeated": (b',"surfaceOp"', b',"type":"user/message","surfaceOp"'),
    "data repeated": (b',"surfaceOp"', b',"data":{},"surfaceOp"'),
    "a replace": (b'"surfaceOp":"append"', b'"surfaceOp":"replace"'),
    "an escaped key": (b'"surfaceOp"', b'"surf\\u0061ceOp"'),
    "a bad byte": (b'"surfaceOp":"append"', b'"surfaceOp":"app\xffend"'),
    "a number the scan refuses": (b',"surfaceOp"', b',"x":1e5,"surfaceOp"'),
}


@pytest.mark.parametrize("change", sorted(BEGUN_THEN_REFUSED))
def test_a_message_the_scan_began_to_rewrite_then_refused_reads_the_same_both_ways(change: str) -> None:
    records = _conversation()
    old, new = BEGUN_THEN_REFUSED[change]
    assert records[2].count(old) == 1 and records[2].index(b'"data"') < records[2].index(old)
    records[2] = records[2].replace(old, new)
    kind, _ = assert_same_both_ways(records, native=True)
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    assert [item for item in columns[5] if len(item) == 2] == [(2, 2)]  # the prompt alone left to Python
    assert [seq for item in columns[5] if len(item) == 4 for seq in item[0]] == [3, 5, 6]


def test_a_message_whose_data_comes_before_its_type_is_read_natively() -> None:
    records = _conversation(prompt=lambda record: {"data": record.pop("data"), **record})
    assert records[2].startswith(b'{"data"')
    assert_same_both_ways(records, native=True)
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None and [seq for item in columns[5] if len(item) == 4 for seq in item[0]] == [2, 3, 5, 6]


@pytest.mark.parametrize("odd", ["as written", "a prompt claiming the next seq", "a record the scan cannot tell"])
def test_a_log_read_ahead_on_a_second_thread_reads_the_same_both_ways(odd: str) -> None:
    # Over a thousand records: the native pass reads them ahead on a second thread (rewriting and,
    # when both threads have a core, taping the message appends), the GIL thread building; the
    # odd record lies in a later chunk, read ahead or by the GIL thread, as the threads run.
    records = _lines(_agent_log(120))
    assert len(records) > 1024
    at = next(index for index in range(900, len(records)) if b'"user/message"' in records[index])
    if odd == "a prompt claiming the next seq":
        records[at] = records[at].replace(b'"seq":', b'"seq":1', 1)
    elif odd == "a record the scan cannot tell":
        records[at] = records[at].replace(b'"type"', b'"t\\u0079pe"', 1)
    kind, got = assert_same_both_ways(records, native=True)
    if odd == "a prompt claiming the next seq":
        assert kind == "error" and f"line {at + 2}" in got
    else:
        assert kind == "events" and len(got[2]) == 360


def _open_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    """`Session.open(path)` with the native pass and without: the same events, messages and
    warnings, or the same error."""
    outcomes = []
    for native in (True, False):
        with monkeypatch.context() as patch:
            if not native:
                patch.setattr(codec, "decode_original_records", lambda *args: None)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    outcome: Any = _open(path, **options)
                except SessionCorruptError as error:
                    outcome = str(error)
            outcomes.append((outcome, [str(warning.message) for warning in caught]))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


@pytest.mark.parametrize("name", sorted(MESSAGE_VARIANTS))
@pytest.mark.parametrize("read_only", [True, False])
def test_message_events_open_the_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, read_only: bool) -> None:
    records = _conversation(**MESSAGE_VARIANTS[name])
    if name == "answer repeating the prompt's id":
        records[6] = records[6].replace(json.loads(records[6])["data"]["message"]["id"].encode(), json.loads(records[2])["data"]["id"].encode())
    header = json.dumps(OriginalLog().header).encode()
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"\n".join([header, *records]) + b"\n")
    _open_both_ways(path, monkeypatch, read_only=read_only)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("read_only", [True, False])
def test_every_scenario_opens_the_same_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, read_only: bool) -> None:
    log = SCENARIOS[name]()
    (outcome, caught) = _open_both_ways(log.write(tmp_path / "session.jsonl"), monkeypatch, read_only=read_only)
    assert not isinstance(outcome, str) and outcome[1]


class _CountingEvents(Sequence[Event]):
    """A log's events that note which ones are rebuilt (`type_at` reads a type without rebuilding)."""

    def __init__(self, events: list[Event]) -> None:
        self.events, self.rebuilt = events, set[int]()

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, index: Any) -> Any:
        self.rebuilt.add(index)
        return self.events[index]

    def type_at(self, index: int) -> str:
        return self.events[index].type


def test_the_crash_repair_reads_only_the_last_turn(tmp_path: Path) -> None:
    log = _agent_log(3)
    log.event("turn/start", {"turn": 4})
    log.event("step/start", {"turn": 4, "step": 1})
    with Session.open(log.write(tmp_path / "session.jsonl"), read_only=True) as session:
        events = _CountingEvents(list(session.events))
    closers = plan_closers(events)
    assert [closer[0] for closer in closers] == ["step/end", "turn/end"]
    assert min(index % len(events) for index in events.rebuilt) == len(events) - 2  # the last turn/start on


def test_appends_without_model_visible_content_are_noted_hidden_for_a_later_replace() -> None:
    """The native pass hands over the seqs of a run's appends without model-visible content
    (tag `False`), which the original's replace ranges skip when presented as positions."""
    log = OriginalLog()
    log.event("turn/start", {"turn": 1})
    first = log.event("user/message", user("first question"), surfaceOp="append")
    empty = [log.event("assistant/message", {"turn": 1, "step": step, "message": assistant({"type": "text", "text": ""})}, surfaceOp="append")
             for step in (1, 2)]
    answer = log.event("assistant/message", {"turn": 1, "step": 3, "message": assistant({"type": "text", "text": "first answer"})},
                       surfaceOp="append")
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    log.event("turn/start", {"turn": 2})
    log.event("compaction/start", {"compactionId": "cmp-1", "turn": 2})
    summary = user("Summary.", source={"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"})
    log.event("user/message", summary, sourceEventSeqs=[first, answer], surfaceOp={"op": "replace", "start": empty[1], "end": answer})
    log.event("compaction/end", {"compactionId": "cmp-1", "turn": 2})
    log.event("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    records = _lines(log)
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    runs = [item for item in columns[5] if len(item) == 4]
    assert [(seqs, hidden) for seqs, _tags, _indexes, hidden in runs] == [([first, *empty, answer], empty)]
    kind, (events, _, _, _, _) = assert_same_both_ways(records)
    assert kind == "events" and events[answer + 4].surface_op == {"op": "replace", "start": 1, "end": 2}


def test_a_native_decode_starts_no_collection_and_leaves_the_gc_as_it_found_it() -> None:
    records = _lines(_agent_log(1000))  # tens of thousands of tuples, strs and frozen values built
    columns = assert_no_collection_during(
        lambda: decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES),
        lambda: decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, 42),  # type: ignore[arg-type]
    )
    assert columns is not None
