"""Tools: scheduling, model-order commits, error results, context, durability (notes 15, 16)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from dshkit.agent import Agent, Tool, ToolOutput
from dshkit.models import ScriptedModel
from dshkit.session import Session


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def drive(agent: Agent, *prompts: Any) -> None:
    async def main() -> None:
        for prompt in prompts:
            agent.followup(prompt)
        await agent.when_idle()

    run(main())


def result_texts(session: Session) -> list[str]:
    return [e.data["message"].content[0]["content"][0]["text"] for e in session.events if e.type == "tool/result"]


def test_results_are_committed_in_model_order_whatever_order_tools_finish(kit: Any) -> None:
    finish_order: list[str] = []
    gate: dict[str, asyncio.Event] = {}

    async def body(arguments: Any, ctx: Any) -> str:
        gate.setdefault("second", asyncio.Event())
        if ctx.call_id == "first":
            await gate["second"].wait()  # finishes only after the second call
        else:
            gate["second"].set()
        finish_order.append(ctx.call_id)
        return f"result {ctx.call_id}"

    model = ScriptedModel([kit.calls_response(("first", "t", "{}"), ("second", "t", "{}")), "done"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    assert finish_order == ["second", "first"]
    results = kit.of_type(agent.session, "tool/result")
    calls = kit.of_type(agent.session, "tool/call")
    assert [e.data["message"].source["call_id"] for e in results] == ["first", "second"]
    assert [e.source_event_seqs for e in results] == [(calls[0].seq,), (calls[1].seq,)]
    # results were created when committed: their ids are minted in model order too
    assert results[0].data["message"].id < results[1].data["message"].id


def test_tool_call_is_logged_when_each_call_starts_and_exclusive_tools_run_alone(kit: Any) -> None:
    log_lengths: dict[str, int] = {}
    holder: list[Agent] = []

    async def body(arguments: Any, ctx: Any) -> str:
        log_lengths[ctx.call_id] = len(holder[0].session.events)
        await asyncio.sleep(0)
        return ctx.call_id

    tools = [Tool("read", "r", {"type": "object"}, body), Tool("write", "w", {"type": "object"}, body, parallel=False)]
    model = ScriptedModel(
        [kit.calls_response(("r1", "read", "{}"), ("r2", "read", "{}"), ("w1", "write", "{}"), ("r3", "read", "{}")), "ok"]
    )
    agent = Agent(model, tools=tools)
    holder.append(agent)
    drive(agent, kit.user("go"))
    types = [(e.type, e.data.get("call_id") or (e.data["message"].source.get("call_id") if e.type == "tool/result" else None))
             for e in agent.session.events if e.type in ("tool/call", "tool/result")]
    assert types == [
        ("tool/call", "r1"), ("tool/call", "r2"), ("tool/result", "r1"), ("tool/result", "r2"),
        ("tool/call", "w1"), ("tool/result", "w1"),
        ("tool/call", "r3"), ("tool/result", "r3"),
    ]


def test_the_log_is_fsynced_off_the_loop_once_a_step_before_each_tool_body_and_at_turn_end(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 37: one durability point a step (before its tools run; the last step's is the turn's
    # end, before the turn is acknowledged), none before a model call, the fsync on a worker thread.
    session = Session.create(tmp_path / "log.jsonl")
    fsyncs: list[tuple[int, int]] = []  # (events appended when the fsync ran, its thread)
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append((len(session.events), threading.get_ident()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    on_disk_at_call: list[bool] = []

    async def body(arguments: Any, ctx: Any) -> str:
        # The tool/call event is in the store and an fsync covered it before the body runs.
        call_seq = kit.of_type(session, "tool/call")[-1].seq
        lines = (tmp_path / "log.jsonl").read_text().splitlines()
        logged = any(json.loads(line).get("data", {}).get("call_id") == ctx.call_id for line in lines[1:])
        on_disk_at_call.append(logged and any(appended > call_seq for appended, _ in fsyncs))
        return "ok"

    model = kit.RecordingModel([kit.calls_response(("c1", "t", "{}")), kit.calls_response(("c2", "t", "{}")), "done"])
    agent = Agent(model, session=session, tools=[Tool("t", "t", {"type": "object"}, body)])
    model.session = session
    drive(agent, kit.user("go"))
    assert on_disk_at_call == [True, True]
    assert len(fsyncs) == len(kit.of_type(session, "step/start")) == 3
    assert fsyncs[-1][0] == len(session.events)  # the turn's end is on disk once when_idle returns
    assert threading.get_ident() not in {thread for _, thread in fsyncs}  # drive's loop runs on this thread
    session.close()
    assert len(fsyncs) == 3  # nothing left to sync at close


def test_a_failed_fsync_at_turn_end_is_raised_by_when_idle_and_the_turn_is_not_acknowledged(
    tmp_path: Path, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = Session.create(tmp_path / "log.jsonl")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    agent = Agent(kit.RecordingModel(["done"]), session=session)
    ended: list[Any] = []
    agent.subscribe(lambda event: ended.append(event) if event.type == "turn_end" else None)
    with pytest.raises(OSError, match="Input/output error"):
        drive(agent, kit.user("go"))
    assert kit.of_type(session, "turn/end")  # logged, written, but not on disk: so not acknowledged
    assert ended == []
    monkeypatch.undo()
    with pytest.raises(Exception, match="fsync failed"):
        session.append("turn/start", {"turn": 2})  # the store refuses appends after a failed fsync
    session.close()


def test_a_raising_tool_gives_an_error_result_with_type_and_message(kit: Any) -> None:
    async def broken(arguments: Any, ctx: Any) -> str:
        raise FileNotFoundError(f"no such file: {arguments['path']}")

    model = ScriptedModel([kit.calls_response(("c1", "read", '{"path": "x.txt"}')), "sorry"])
    agent = Agent(model, tools=[Tool("read", "r", {"type": "object"}, broken)])
    drive(agent, kit.user("go"))
    (event,) = kit.of_type(agent.session, "tool/result")
    block = event.data["message"].content[0]
    assert block["is_error"] is True
    assert block["content"][0]["text"] == "FileNotFoundError: no such file: x.txt"
    assert event.data["error"] == {"name": "FileNotFoundError", "code": "tool_error"}
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


@pytest.mark.parametrize(
    ("name", "arguments", "code", "text"),
    [
        ("nope", "{}", "unknown_tool", "Unknown tool 'nope' (available: t)."),
        ("t", '{"a": ', "invalid_arguments", "Invalid arguments for t: not JSON"),
        ("t", "[1, 2]", "invalid_arguments", "expected a JSON object, got list"),
    ],
)
def test_unknown_tools_and_bad_arguments_are_error_results(kit: Any, name: str, arguments: str, code: str, text: str) -> None:
    ran: list[Any] = []

    async def body(arguments: Any, ctx: Any) -> str:
        ran.append(arguments)
        return "ran"

    agent = Agent(ScriptedModel([kit.calls_response(("c1", name, arguments)), "ok"]), tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    assert ran == []
    (event,) = kit.of_type(agent.session, "tool/result")
    assert event.data["error"]["code"] == code
    assert text in result_texts(agent.session)[0]


def test_empty_arguments_mean_an_empty_object(kit: Any) -> None:
    seen: list[Any] = []

    async def body(arguments: Any, ctx: Any) -> str:
        seen.append(arguments)
        return "ok"

    agent = Agent(ScriptedModel([kit.calls_response(("c1", "t", "")), "ok"]), tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    assert seen == [{}]


def test_tool_return_values_become_content(kit: Any) -> None:
    values = {
        "text": "plain text",
        "blocks": [{"type": "text", "text": "a block"}],
        "json": {"rows": [1, 2], "ok": True},
        "none": None,
        "output": ToolOutput("flagged", is_error=True, meta={"ui": "red"}),
        "bad": {1, 2},
    }

    async def body(arguments: Any, ctx: Any) -> Any:
        return values[arguments["kind"]]

    calls = [(f"c{i}", "t", json.dumps({"kind": kind})) for i, kind in enumerate(values)]
    agent = Agent(ScriptedModel([kit.calls_response(*calls), "ok"]), tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    results = kit.of_type(agent.session, "tool/result")
    texts = result_texts(agent.session)
    assert texts[:3] == ["plain text", "a block", '{"rows":[1,2],"ok":true}']
    assert texts[3] == ""  # None is an empty answer
    assert texts[4] == "flagged" and results[4].data["message"].content[0]["is_error"] is True
    assert results[4].data["meta"] == {"ui": "red"} and "error" not in results[4].data
    assert results[5].data["error"]["name"] == "TypeError" and "set" in texts[5]


def test_context_from_a_tool_batch_enters_after_all_results_in_model_order(kit: Any) -> None:
    first_context, second_context = kit.context("from first"), kit.context("from second")
    gate: list[asyncio.Event] = []

    async def body(arguments: Any, ctx: Any) -> ToolOutput:
        if not gate:
            gate.append(asyncio.Event())
        if ctx.call_id == "a":
            await gate[0].wait()
            return ToolOutput("a done", context=[first_context])
        gate[0].set()
        return ToolOutput("b done", context=[second_context])

    model = ScriptedModel([kit.calls_response(("a", "t", "{}"), ("b", "t", "{}")), "thanks"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    types = kit.types(agent.session)
    tail = types[types.index("tool/result"):]
    assert tail[:8] == [
        "tool/result", "tool/result", "agent/inbox/spliced", "step/end",
        "agent/inbox/spliced", "step/start", "user/message", "user/message",
    ]
    users = kit.of_type(agent.session, "user/message")
    assert [e.data for e in users[1:]] == [first_context, second_context]
    assert model.requests[1].messages[-2:] == (first_context, second_context)


def test_tool_context_must_be_new_to_the_session(kit: Any) -> None:
    prompt = kit.user("go")

    async def body(arguments: Any, ctx: Any) -> ToolOutput:
        return ToolOutput("x", context=[prompt])

    agent = Agent(ScriptedModel([kit.calls_response(("c1", "t", "{}")), "ok"]), tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, prompt)
    (event,) = kit.of_type(agent.session, "tool/result")
    assert event.data["error"]["name"] == "ValueError"
    assert "not new to the session" in result_texts(agent.session)[0]


def test_tool_context_receives_call_facts_and_the_session(kit: Any) -> None:
    seen: list[Any] = []

    async def body(arguments: Any, ctx: Any) -> str:
        seen.append((ctx.call_id, ctx.name, ctx.turn, ctx.step, ctx.cancel.cancelled, ctx.session.has_message(prompt.id)))
        return "ok"

    prompt = kit.user("go")
    agent = Agent(ScriptedModel([kit.calls_response(("c9", "t", "{}")), "ok"]), tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, prompt)
    assert seen == [("c9", "t", 1, 1, False, True)]


def test_a_sync_tool_body_works_too(kit: Any) -> None:
    agent = Agent(
        ScriptedModel([kit.calls_response(("c1", "t", '{"n": 2}')), "ok"]),
        tools=[Tool("t", "double", {"type": "object"}, lambda arguments, ctx: arguments["n"] * 2)],
    )
    drive(agent, kit.user("go"))
    assert result_texts(agent.session) == ["4"]


def test_tool_arguments_are_checked() -> None:
    async def body(arguments: Any, ctx: Any) -> str:
        return ""

    with pytest.raises(TypeError, match="Tool name"):
        Tool("", "d", {}, body)
    with pytest.raises(TypeError, match="description"):
        Tool("t", None, {}, body)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="parameters"):
        Tool("t", "d", "object", body)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run"):
        Tool("t", "d", {}, "body")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ToolOutput context"):
        ToolOutput("x", context="text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="user-role"):
        import dshkit

        ToolOutput("x", context=[dshkit.create_assistant_message("a", provider="p", model="m")])
    assert Tool("t", "d", {"type": "object"}, body).spec == {"name": "t", "description": "d", "parameters": {"type": "object"}}


def test_tool_meta_that_is_not_json_gives_an_error_result_not_an_orphan_call(kit: Any) -> None:
    async def body(arguments: Any, ctx: Any) -> ToolOutput:
        return ToolOutput("ok", meta={"elapsed": float("nan")})

    model = ScriptedModel([kit.calls_response(("c1", "t", "{}")), "done", "again"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    (event,) = kit.of_type(agent.session, "tool/result")
    assert event.data["error"] == {"name": "ValueError", "code": "invalid_meta"}
    assert "meta" not in event.data
    assert "NaN" in result_texts(agent.session)[0]
    assert agent.session.pending_tool_calls() == ()
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]
    drive(agent, kit.user("and now?"))  # the conversation can move on
    assert kit.turn_ends(agent.session)[-1] == {"kind": "completed"}


@pytest.mark.parametrize("parallel", [False, True])
def test_a_tool_body_raising_cancelled_error_itself_is_an_error_result(kit: Any, parallel: bool) -> None:
    async def body(arguments: Any, ctx: Any) -> str:
        if ctx.call_id == "c1":
            raise asyncio.CancelledError("the tool gave up")
        return "fine"

    calls = [("c1", "t", "{}"), ("c2", "t", "{}")] if parallel else [("c1", "t", "{}")]
    model = ScriptedModel([kit.calls_response(*calls), "done"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    results = kit.of_type(agent.session, "tool/result")
    assert [e.data["message"].source["call_id"] for e in results] == [call[0] for call in calls]
    assert results[0].data["error"] == {"name": "CancelledError", "code": "tool_error"}
    assert agent.session.pending_tool_calls() == ()
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_the_same_context_message_from_two_tools_enters_once(kit: Any) -> None:
    shared = kit.context("the workspace changed")

    async def body(arguments: Any, ctx: Any) -> ToolOutput:
        return ToolOutput(f"done {ctx.call_id}", context=[shared])

    model = ScriptedModel([kit.calls_response(("a", "t", "{}"), ("b", "t", "{}")), "thanks"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])
    drive(agent, kit.user("go"))
    users = kit.of_type(agent.session, "user/message")
    assert [e.data for e in users[1:]] == [shared]
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]
    assert len(agent.inbox) == 0


def test_tool_output_context_and_inbox_inserts_refuse_a_repeated_id(kit: Any) -> None:
    message = kit.context("twice")
    with pytest.raises(ValueError, match="appears twice"):
        ToolOutput("x", context=[message, message])
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ValueError, match="appears twice"):
        agent.inbox.insert("next_step", (message, message))
    agent.inject(message)
    with pytest.raises(ValueError, match="already pending"):
        agent.inbox.insert("next_turn", (message,))
    assert agent.inbox.next_step == (message,) and agent.inbox.next_turn == ()
    assert len(kit.of_type(agent.session, "agent/inbox/spliced")) == 1  # a refused insert logs nothing


def test_a_result_whose_write_failed_is_logged_once_when_the_batch_is_wound_up(tmp_path: Path, kit: Any, monkeypatch: Any) -> None:
    """The disk refuses the second result's line once (ENOSPC: the store cuts it back and goes
    on). Winding up the batch logs the results not yet logged, each exactly once, in model order."""
    import errno
    import os

    real_write = os.write
    refused: list[bytes] = []

    def write(fd: int, data: Any) -> int:
        if b'"tool/result"' in data and b'"b"' in data and not refused:
            refused.append(bytes(data))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    async def body(arguments: Any, ctx: Any) -> str:
        return f"result {ctx.call_id}"

    session = Session.create(tmp_path / "log.jsonl")
    model = ScriptedModel([kit.calls_response(("a", "t", "{}"), ("b", "t", "{}"), ("c", "t", "{}")), "done"])
    agent = Agent(model, session=session, tools=[Tool("t", "t", {"type": "object"}, body)])
    monkeypatch.setattr(os, "write", write)
    drive(agent, kit.user("go"))
    assert refused  # the fault happened
    results = [e.data["message"].source["call_id"] for e in session.events if e.type == "tool/result"]
    assert results == ["a", "b", "c"]
    assert kit.of_type(session, "turn/end")[-1].data["reason"]["kind"] == "error"
    session.close()
    with Session.open(tmp_path / "log.jsonl", read_only=True) as reopened:
        assert [e.data["message"].source["call_id"] for e in reopened.events if e.type == "tool/result"] == ["a", "b", "c"]
