"""Crash repair on open: closers for the open turn, deterministic ids, nothing truncated (item 10)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dshkit.session import Session, closer_message_id, project_request
from dshkit.session._verify import check_events


def crash_mid_tools(session: Session, build) -> dict[str, int]:
    """Turn 2 stops after c1 answered, c2 started (tool/call logged), c3 never started."""
    build.tool_turn(session, 1, ["a1"])
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})
    session.append("user/message", build.user("second prompt"))
    session.append("request/header", {"header": {"system": None, "tools": [], "config": {}}, "reason": "change"})
    reply = session.append("assistant/message", {"turn": 2, "step": 1, "message": build.assistant("three calls", ["c1", "c2", "c3"])})
    c1 = session.append("tool/call", {"turn": 2, "step": 1, "call_id": "c1", "name": "lookup", "arguments": "{}"})
    session.append("tool/result", {"turn": 2, "step": 1, "message": build.result("c1")}, source_event_seqs=[c1.seq])
    c2 = session.append("tool/call", {"turn": 2, "step": 1, "call_id": "c2", "name": "lookup", "arguments": "{}"})
    return {"reply": reply.seq, "c2": c2.seq}


def test_an_open_turn_is_closed_in_log_order(build, log_path: Path):
    with Session.create(log_path) as session:
        seqs = crash_mid_tools(session, build)
        crashed = list(session.events)
    with Session.open(log_path) as session:
        events = list(session.events)
        assert events[: len(crashed)] == crashed  # history is never truncated
        closers = events[len(crashed) :]
        assert [e.type for e in closers] == ["tool/result", "tool/result", "step/end", "turn/end"]
        assert [e.seq for e in closers] == list(range(len(crashed), len(crashed) + 4))
        assert all(e.time == crashed[-1].time for e in closers)

        started, never = closers[0], closers[1]
        assert started.message.source["call_id"] == "c2" and never.message.source["call_id"] == "c3"
        assert started.data["error"] == {"name": "SessionInterrupted", "code": "INTERRUPTED"}
        assert never.data["error"] == {"name": "SessionInterrupted", "code": "NOT_STARTED"}
        assert started.message.id == closer_message_id("c2", seqs["c2"])
        assert never.message.id == closer_message_id("c3", seqs["reply"])
        assert started.source_event_seqs == (seqs["c2"],) and never.source_event_seqs == (seqs["reply"],)
        assert (started.data["turn"], started.data["step"]) == (2, 1)
        block = started.message.content[0]
        assert block["is_error"] is True and "unknown" in started.message.text + block["content"][0]["text"]
        assert closers[2].data == {"turn": 2, "step": 1}
        assert closers[3].data == {"turn": 2, "reason": {"kind": "interrupted"}}

        assert session.pending_tool_calls() == ()
        assert check_events(session.events) == []
        session.append("turn/start", {"turn": 3})  # the conversation can go on
        session.append("user/message", build.user("third"))
        assert project_request(session).messages[-1].text == "third"


def test_opening_twice_appends_nothing_the_second_time(build, log_path: Path):
    with Session.create(log_path) as session:
        crash_mid_tools(session, build)
    with Session.open(log_path) as session:
        repaired = list(session.events)
    with Session.open(log_path) as session:
        assert list(session.events) == repaired


def test_a_redone_repair_gives_the_same_ids(build, log_path: Path, tmp_path: Path):
    with Session.create(log_path) as session:
        crash_mid_tools(session, build)
    copy = tmp_path / ("copy" + log_path.suffix)
    shutil.copy(log_path, copy)
    with Session.open(log_path) as first, Session.open(copy) as second:
        assert [m.id for m in first.messages()] == [m.id for m in second.messages()]
        assert first.messages() == second.messages()


def test_a_turn_without_an_open_step_only_gets_turn_end(build, log_path: Path):
    with Session.create(log_path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", build.user())
        session.append("assistant/message", {"turn": 1, "step": 1, "message": build.assistant("hi")})
        session.append("step/end", {"turn": 1, "step": 1})
    with Session.open(log_path) as session:
        assert [e.type for e in session.events][-2:] == ["step/end", "turn/end"]
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        assert len(session.events) == 6


def test_an_open_step_with_every_call_answered_gets_step_end_and_turn_end(build, log_path: Path):
    with Session.create(log_path) as session:
        build.tool_turn(session, 1, ["c1"], finish=False)
        count = len(session.events)
    with Session.open(log_path) as session:
        assert [e.type for e in session.events[count:]] == ["step/end", "turn/end"]


def test_a_turn_start_alone_is_closed(log_path: Path):
    with Session.create(log_path) as session:
        session.append("turn/start", {"turn": 4})
    with Session.open(log_path) as session:
        assert [(e.type, dict(e.data)) for e in session.events][-1] == ("turn/end", {"turn": 4, "reason": {"kind": "interrupted"}})


def test_finished_turns_and_empty_logs_need_no_repair(build, log_path: Path):
    with Session.create(log_path) as session:
        pass
    with Session.open(log_path) as session:
        assert len(session.events) == 0
    with Session.open(log_path) as session:
        build.tool_turn(session, 1, ["c1"])
        count = len(session.events)
    with Session.open(log_path) as session:
        assert len(session.events) == count


def test_read_only_open_does_not_repair(build, log_path: Path):
    with Session.create(log_path) as session:
        crash_mid_tools(session, build)
        count = len(session.events)
    with Session.open(log_path, read_only=True) as session:
        assert len(session.events) == count
        assert session.pending_tool_calls() == ("c2", "c3")


def test_closer_ids_are_deterministic_and_distinct():
    assert closer_message_id("c1", 7) == closer_message_id("c1", 7)
    ids = {closer_message_id(call, seq) for call in ("c1", "c2", "call-0") for seq in range(50)}
    assert len(ids) == 150
    for value in ids:
        assert len(value) == 26 and value[0] in "01234567"


@pytest.mark.parametrize("repeat", [1, 3])
def test_repeated_call_ids_across_steps_close_only_the_open_one(build, log_path: Path, repeat: int):
    with Session.create(log_path) as session:
        session.append("turn/start", {"turn": 1})
        for step in range(1, repeat + 1):
            session.append("step/start", {"turn": 1, "step": step})
            session.append("assistant/message", {"turn": 1, "step": step, "message": build.assistant("x", ["call-0"])})
            if step < repeat:
                session.append("tool/result", {"turn": 1, "step": step, "message": build.result("call-0")})
                session.append("step/end", {"turn": 1, "step": step})
        count = len(session.events)
    with Session.open(log_path) as session:
        closers = session.events[count:]
        assert [e.type for e in closers] == ["tool/result", "step/end", "turn/end"]
        assert closers[0].data["step"] == repeat
