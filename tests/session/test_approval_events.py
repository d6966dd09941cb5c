"""The approval/* events in the log: their rules, crash repair of a turn waiting for a person,
and the original harness's own approval/* records read and written in its vocabulary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session
from dshkit.session._approval_state import open_turn_asks, remembered_policies, undecided_asks
from tests.session.conftest import seal_any
from tests.session.dsh.original_logs import OriginalLog, assistant, user


def _crash_with_an_ask(path: Path, *, decide: bool = False, answer: bool = False) -> None:
    """A log as a process leaves it when it dies while a call waits for approval."""
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", create_user_message("go", source={"kind": "user"}))
        call = {"type": "tool_call", "id": "c1", "name": "rm", "arguments": "{}"}
        from dshkit import create_assistant_message

        message = create_assistant_message([call], provider="p", model="m")
        session.append("request/header", {"header": {"system": None, "tools": [], "config": {}}, "reason": "initial"})
        session.append("assistant/message", {"turn": 1, "step": 1, "message": message})
        session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "rm", "arguments": "{}"})
        session.append("approval/asked", {"turn": 1, "step": 1, "id": "a1", "call_id": "c1", "tool": "rm", "arguments": "{}"})
        if decide:
            session.append("approval/decided", {"id": "a1", "call_id": "c1", "outcome": "allowed_once"})


def test_repair_leaves_a_turn_waiting_for_a_person_open(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _crash_with_an_ask(path)
    with Session.open(path) as session:
        types = [e.type for e in session.events]
        assert types[-1] == "approval/asked" and "turn/end" not in types
        assert [ask.call_id for ask in undecided_asks(session.events)] == ["c1"]


def test_repair_closes_a_turn_whose_ask_was_decided_before_the_crash(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    _crash_with_an_ask(path, decide=True)  # approved, then the process died: did the body run?
    with Session.open(path) as session:
        result = [e for e in session.events if e.type == "tool/result"][0]
        assert result.data["error"]["code"] == "INTERRUPTED"
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        assert undecided_asks(session.events) == []


def test_a_remembered_policy_is_folded_latest_first_per_tool() -> None:
    session = Session()
    for data in ({"policy": "ask", "tool": "rm"}, {"policy": "never"}, {"policy": "always", "tool": "rm"}, {"policy": "ask", "tool": "ls"}):
        session.append("approval/policy", data)
    assert remembered_policies(session.events) == ({"rm": "always", "ls": "ask"}, "never")
    assert open_turn_asks(session.events) == {}


def test_a_stored_approval_event_is_held_to_the_python_rules_on_open(tmp_path: Path) -> None:
    # approval/* are not among the native fast path's types (rust/plain_rules.rs): the Python rule decides.
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("approval/policy", {"policy": "always", "tool": "rm"})
    lines = path.read_bytes().splitlines(keepends=True)
    text = lines[-1].decode()
    record = json.loads(text)
    del record["crc"]
    record["data"]["policy"] = "sometimes"
    path.write_bytes(b"".join(lines[:-1]) + seal_any(json.dumps(record, separators=(",", ":"))))
    with pytest.raises(Exception, match="policy"):
        with Session.open(path, read_only=True) as session:
            session.messages()


def _original_with_approvals() -> OriginalLog:
    log = OriginalLog()
    log.event("approval/policy", {"policy": "ask"})
    log.event("turn/start", {"turn": 1})
    log.event("step/start", {"turn": 1, "step": 1})
    log.event("user/message", user("write the file"), surfaceOp="append")
    call = {"type": "tool-call", "id": "call_00_a", "name": "bash", "arguments": '{"command": "touch x"}'}
    log.event("assistant/message", {"turn": 1, "step": 1, "message": assistant(call)}, surfaceOp="append")
    log.event("tool/call", {"turn": 1, "step": 1, "callId": "call_00_a", "name": "bash", "arguments": '{"command": "touch x"}'})
    log.event("approval/asked", {"id": "q1", "toolName": "bash", "callId": "call_00_a", "reason": "escalate"})
    log.event("approval/decided", {"id": "q1", "outcome": "allowed-once"})
    return log


def test_the_originals_approval_records_read_in_dshkit_vocabulary_and_write_back_as_its_own(tmp_path: Path) -> None:
    path = _original_with_approvals().write(tmp_path / "session.jsonl")
    with Session.open(path) as session:
        asked = [e for e in session.events if e.type == "approval/asked"][0]
        assert dict(asked.data) == {"id": "q1", "tool": "bash", "call_id": "call_00_a", "reason": "escalate"}
        decided = [e for e in session.events if e.type == "approval/decided"][0]
        assert decided.data["outcome"] == "allowed_once"
        assert remembered_policies(session.events) == ({}, "ask")
        session.append("approval/policy", {"policy": "never"})
    written = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    by_type = {record["type"]: record["data"] for record in written if record["type"].startswith("approval/")}
    assert by_type["approval/asked"] == {"id": "q1", "toolName": "bash", "callId": "call_00_a", "reason": "escalate"}
    assert by_type["approval/decided"] == {"id": "q1", "outcome": "allowed-once"}
    assert by_type["approval/policy"] == {"policy": "never"}


def test_an_agent_on_an_original_log_writes_its_asks_in_the_originals_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    ran: list[str] = []
    with Session.create(path, format="dsh") as session:
        model = ScriptedModel([
            [{"type": "tool_call_delta", "index": 0, "id": "c1", "name": "rm", "arguments": "{}"}, {"type": "finish", "reason": "tool_calls"}],
            "ok",
        ])
        agent = Agent(model, session=session, tools=[Tool("rm", "rm", {"type": "object"}, lambda a, c: ran.append("c1") or "done", approval="ask")])

        async def main() -> None:
            agent.followup(create_user_message("go", source={"kind": "user"}))
            while not agent.pending_approvals():
                await asyncio.sleep(0)
            agent.approve("c1")
            await agent.when_idle()

        asyncio.run(main())
    assert ran == ["c1"]
    records = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    asked = next(r["data"] for r in records if r["type"] == "approval/asked")
    decided = next(r["data"] for r in records if r["type"] == "approval/decided")
    assert asked["toolName"] == "rm" and asked["callId"] == "c1" and "tool" not in asked
    assert decided["outcome"] == "allowed-once" and decided["id"] == asked["id"]


def test_an_original_record_dshkit_does_not_read_is_kept_as_ignorable(tmp_path: Path) -> None:
    log = OriginalLog()
    log.event("approval/asked", {"requestId": "r1", "tool": "bash"})
    log.event("approval/decided", {"id": "r1", "outcome": "whatever"})
    path = log.write(tmp_path / "session.jsonl")
    with Session.open(path) as session:
        assert all(e.data["ignorable"] is True for e in session.events if e.type.startswith("approval/"))
        assert open_turn_asks(session.events) == {}
    written: list[Any] = [json.loads(line)["data"] for line in path.read_text().splitlines()[1:]]
    assert written == [{"requestId": "r1", "tool": "bash"}, {"id": "r1", "outcome": "whatever"}]


def test_log_verify_takes_a_turn_waiting_for_a_person_for_sound(tmp_path: Path) -> None:
    from dshkit.session._verify import check_events

    path = tmp_path / "log.jsonl"
    _crash_with_an_ask(path)
    with Session.open(path, read_only=True) as session:
        assert check_events(session.events) == []
    path2 = tmp_path / "log2.jsonl"
    _crash_with_an_ask(path2, decide=True)
    with Session.open(path2, read_only=True) as session:
        assert [problem.text for problem in check_events(session.events)] == [
            "turn 1 has no turn/end (a crash; it is closed when the log is opened for writing)"
        ]
