"""Events older than the hot window are kept compact and rebuilt on access: equal, same Messages."""

from __future__ import annotations

from array import array
from collections import Counter
from pathlib import Path

import pytest

import dshkit
from dshkit.session import Session
from dshkit.session._log.event_log import HOT


def _user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def _fill(session: Session, turns: int) -> list:
    appended = []
    add = lambda *args, **kwargs: appended.append(session.append(*args, **kwargs))  # noqa: E731
    add("request/header", {"header": {"system": "s", "tools": [], "config": {}}, "reason": "initial"})
    for turn in range(1, turns + 1):
        add("turn/start", {"turn": turn})
        add("step/start", {"turn": turn, "step": 1})
        add("user/message", _user(f"question {turn}"))
        add("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text_delta", "index": 0, "text": "é ✓"}})
        call_id = f"call-{turn}"
        reply = dshkit.create_assistant_message(
            [{"type": "text", "text": "looking"}, {"type": "tool_call", "id": call_id, "name": "f", "arguments": "{}"}],
            provider="p", model="m",
        )
        add("assistant/message", {"turn": turn, "step": 1, "message": reply, "usage": {"input_tokens": turn}},
            source_event_seqs=[appended[-1].seq])
        call = session.append("tool/call", {"turn": turn, "step": 1, "call_id": call_id, "name": "f", "arguments": "{}"})
        appended.append(call)
        add("tool/result", {"turn": turn, "step": 1, "message": dshkit.create_tool_result_message(call_id, f"r{turn}")},
            source_event_seqs=[call.seq])
        add("step/end", {"turn": turn, "step": 1})
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return appended


def _same(event, original) -> None:
    assert tuple(event) == tuple(original)
    message = original.message
    if message is not None:
        assert event.message is message  # the very object on the surface, never a copy


def test_old_events_are_rebuilt_equal_with_the_same_messages():
    session = Session()
    appended = _fill(session, HOT)  # 9 events a turn: several compactions
    assert len(session.events) == len(appended) > 2 * HOT
    for event, original in zip(session.events, appended):
        _same(event, original)
    for seq in (0, 1, 5, -1, len(appended) // 2):
        _same(session.events[seq], appended[seq])
    assert session.events[-1] is appended[-1]  # the latest events are the appended objects
    assert list(session.events[3:9]) == appended[3:9]
    first_result = appended[7].message
    assert session.message_event(first_result.id) == appended[7]
    assert session.request_header == appended[0]


def test_a_replace_of_an_old_message_and_a_reopened_log_keep_every_event(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    appended = _fill(session, HOT)
    old = appended[3].message
    rewrite = dshkit.create_user_message("rewritten", source={"kind": "user"})
    appended.append(session.compact(old.id, old.id, rewrite))  # reads the old event back from the columns
    assert session.messages()[0] is rewrite
    session.close()
    reopened = Session.open(path, read_only=True)
    assert len(reopened.events) == len(session.events)
    for event, original in zip(reopened.events, session.events):
        assert tuple(event) == tuple(original)
    assert reopened.messages() == session.messages()
    assert reopened.request_header == session.request_header


def test_a_reopened_log_holds_each_message_once_and_rebuilds_its_events_exactly(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    appended = _fill(session, 12)
    session.close()
    reopened = Session.open(path, read_only=True)
    for event, original in zip(reopened.events, appended, strict=True):
        assert dshkit.to_json(tuple(event)) == dshkit.to_json(tuple(original))  # same fields, same key order
        if original.message is not None:
            assert event.message is reopened.message(original.message.id)
    # The messages live once, as the surface's Messages: the compact records hold `null` for them.
    compact = bytes(reopened._events._blob)
    assert b"question" not in compact and b'"text":"r1"' not in compact and b"looking" not in compact
    assert compact.count(b'"message":null') == 24  # an assistant message's and a tool result's place
    assert b'[{"turn":12,"step":1,"message":null,"usage":{"input_tokens":12}},[' in compact  # the rest of the envelope stays
    # Only what the columns do not hold: seq is the place, type and time are columns. A plain
    # event keeps its data (D), a message append its data beside the message and its source seqs
    # (M), a user message that cites nothing keeps nothing (U), the header its whole record (R).
    ends = reopened._events._ends
    kinds = Counter(chr(compact[end]) for end in [0, *ends[:-1]])
    assert kinds == {"D": 6 * 12, "M": 2 * 12, "U": 12, "R": 1}
    assert compact.count(b'"seq":') == 1


def test_a_reopened_user_message_citing_events_keeps_null_and_its_seqs(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        appended = [session.append("turn/start", {"turn": 1})]
        appended.append(session.append("user/message", _user("cites the turn"), source_event_seqs=[0]))
    reopened = Session.open(path, read_only=True)
    assert dshkit.to_json(tuple(reopened.events[1])) == dshkit.to_json(tuple(appended[1]))
    assert reopened.events[1].message is reopened.messages()[0]
    assert bytes(reopened._events._blob) == b'D{"turn":1}M[null,[0]]'  # its data is its message


def _as_json(events) -> list[str]:
    return [dshkit.to_json(tuple(event)) for event in events]  # every field, in key order


def test_an_agents_events_come_back_exactly_once_moved_into_the_columns():
    """Every kind of event an agent logs (header, splices holding messages, user messages citing
    their splice, chunks, calls, results) is rebuilt field for field, in key order."""
    import asyncio

    from dshkit.agent import Agent, Tool
    from dshkit.models import ScriptedModel

    async def noop(arguments, ctx):
        return "ok"

    steps = HOT // 4  # about 8 events a step: past 2 * HOT, so moved at least once
    call = lambda step: [  # noqa: E731
        {"type": "tool_call_delta", "index": 0, "id": f"call-{step}", "name": "noop", "arguments": "{}"},
        {"type": "usage", "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        {"type": "finish", "reason": "tool_calls"},
    ]
    model = ScriptedModel([call(step) for step in range(steps)] + ["done"])
    session = Session()
    seen = []
    session.subscribe(seen.append)
    agent = Agent(model, session=session, tools=[Tool("noop", "no-op", {"type": "object"}, noop)], system="s")

    async def run() -> None:
        agent.followup(_user("go"))
        await agent.when_idle()

    asyncio.run(run())
    events = session._events
    assert events._cold >= HOT and len(events) == len(seen)
    assert {"agent/inbox/spliced", "user/message", "request/header", "tool/result"} <= {e.type for e in seen[: events._cold]}
    assert _as_json(events) == _as_json(seen)
    for event, original in zip(events, seen):
        _same(event, original)


def test_a_lone_surrogate_is_replaced_on_append_so_every_event_moves():
    """A str holding a lone surrogate (no UTF-8 form) is frozen with U+FFFD in its place, so the
    event can be written as JSON and moves out of the hot window like any other."""
    session = Session()
    odd = "bad \ud800 text"
    appended = [session.append("turn/start", {"turn": 1, "note": odd})]
    appended += _fill(session, 2)
    call_id = "call-odd"
    reply = dshkit.create_assistant_message(
        [{"type": "tool_call", "id": call_id, "name": "f", "arguments": "{}"}], provider="p", model="m"
    )
    appended.append(session.append("assistant/message", {"turn": 1, "step": 1, "message": reply, "usage": {odd: 1}}))
    call = session.append("tool/call", {"turn": 1, "step": 1, "call_id": call_id, "name": "f", "arguments": "{}"})
    appended.append(call)
    result = dshkit.create_tool_result_message(call_id, odd)
    appended.append(session.append("tool/result", {"turn": 1, "step": 1, "message": result}, source_event_seqs=[call.seq]))
    appended += _fill(session, 2 * HOT // 9 + 1)
    events = session._events
    assert events._cold > appended.index(call) + 1 and len(events) == len(appended)
    assert events._kept == {}
    for event, original in zip(events, appended):
        _same(event, original)
    assert events[0].data["note"] == "bad \ufffd text"
    assert events[appended.index(call) - 1].data["usage"] == {"bad \ufffd text": 1}
    assert session.message(result.id) is result and result.content[0]["content"][0]["text"] == "bad \ufffd text"


def test_an_event_that_cannot_be_written_as_json_is_kept_whole_when_moved():
    """An event built by hand around data never frozen (so holding a lone surrogate) cannot be
    written as JSON: moving it neither fails nor loses it, nor any event after it."""
    from dshkit._core import compact_events
    from dshkit.session.events import Event

    good = Session().append("turn/start", {"turn": 1})
    odd = Event("turn/start", 1, good.time, {"turn": 2, "note": "bad \ud800 text"})
    types, _times, _messages, _blob, _ends, _ops, kept = compact_events([good, odd, good], 3, 0)
    assert types == ["turn/start"] * 3 and dict(kept) == {1: odd}


def test_compact_events_names_what_it_cannot_move():
    from dshkit._core import compact_events

    event = Session().append("turn/start", {"turn": 1})
    with pytest.raises(IndexError, match="2 events asked, 1 given"):
        compact_events([event], 2, 0)
    with pytest.raises(TypeError, match="an event is a 6-tuple"):
        compact_events([("turn/start", 0)], 1, 0)
    types, times, messages, blob, ends, ops, kept = compact_events([event, event], 1, 10)
    assert (types, messages, blob, ops, kept) == (["turn/start"], [None], b'D{"turn":1}', [], [])
    assert array("Q", ends).tolist() == [10 + len(blob)] and array("q", times).tolist() == [event.time]


def test_a_reopened_log_appended_to_reads_back_its_opened_and_its_packed_events(tmp_path: Path):
    """An opened log's events stay as their records; events appended and moved later go into
    compressed packs: both come back field for field, read forwards, backwards and at random."""
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    appended = _fill(session, 12)
    session.close()
    reopened = Session.open(path)
    added = _fill(reopened, HOT)  # past 2 * HOT new events: several packs
    expected = [dshkit.to_json(tuple(event)) for event in [*appended, *added]]
    assert [dshkit.to_json(tuple(event)) for event in reopened.events] == expected
    assert reopened._events._packs and len(expected) > len(appended) + 2 * HOT
    for seq in [*range(len(expected) - 1, -1, -1), 0, len(expected) // 2, 3, len(appended), len(expected) - 2 * HOT]:
        assert dshkit.to_json(tuple(reopened.events[seq])) == expected[seq]
    for event, original in zip(reopened.events[len(appended) :], added, strict=True):
        _same(event, original)


def test_moved_events_are_held_compressed():
    """An agent's events repeat their keys and values: moved ones cost a fraction of their JSON."""
    import tracemalloc

    session = Session()
    chunk = {"type": "tool_call_delta", "index": 0, "id": None, "name": "lookup", "arguments": "{}"}
    session.append("turn/start", {"turn": 1})
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for step in range(40 * HOT):
            session.append("assistant/chunk", {"turn": 1, "step": step, "chunk": {**chunk, "id": f"call-{step}"}})
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    json_size = len(dshkit.to_json({"turn": 1, "step": 999, "chunk": {**chunk, "id": "call-999"}}))
    # Per event: the type, time, message and end columns (~32 bytes) and a little of a pack; the
    # JSON alone is ~115 bytes, which each event held before packs.
    assert retained / (40 * HOT) < 32 + json_size / 2


def test_reading_between_moves_finds_each_event_in_its_own_pack():
    session = Session()
    appended = [session.append("turn/start", {"turn": 1})]
    for round_ in range(6):
        for step in range(HOT):
            appended.append(session.append("step/start", {"turn": 1, "step": round_ * HOT + step}))
        # The newest pack, read while it is the last one, then again once more packs follow it.
        for seq in (session._events._cold - 1, 0, session._events._cold // 2):
            assert tuple(session.events[seq]) == tuple(appended[seq])
    assert [tuple(event) for event in session.events] == [tuple(event) for event in appended]
