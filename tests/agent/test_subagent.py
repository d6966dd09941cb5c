"""Subagents: a tool running a child `Agent` with its own log linked both ways, depth limits, cancellation, crashes, ids."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support import DSHKIT_PATH

from dshkit import create_user_message
from dshkit.agent import Agent, Tool, subagent_tool
from dshkit.cli.log import run as log_command
from dshkit.models import ScriptedModel
from dshkit.models.protocol import ModelError
from dshkit.session import Session, children_of, delegation_depth, delegation_of, list_sessions


def call(call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call_delta", "index": 0, "id": call_id, "name": name, "arguments": arguments},
        {"type": "finish", "reason": "tool_calls"},
    ]


def ask(task: str, call_id: str = "c1", name: str = "research") -> list[dict[str, Any]]:
    return call(call_id, name, '{"task": "%s"}' % task)


def user(text: str) -> Any:
    return create_user_message(text, source={"kind": "user"})


def drive(agent: Agent, *messages: Any) -> None:
    async def main() -> None:
        for message in messages:
            agent.followup(message)
        await agent.when_idle()

    asyncio.run(main())


def results(session: Session) -> list[Any]:
    return [event.data for event in session.events if event.type == "tool/result"]


def result_text(data: Any) -> str:
    return str(data["message"].content[0]["content"][0]["text"])


def open_child(folder: Path, session_id: str) -> Session:
    return Session.open(folder / f"{session_id}.jsonl", read_only=True)


def test_the_result_is_the_childs_final_answer_and_the_logs_link_both_ways(tmp_path: Path) -> None:
    child_model = ScriptedModel(["The answer is 42."])
    research = subagent_tool("research", "Research a question.", child_model, system="You research.")
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("find the answer"), "It is 42."]), session=parent, tools=[research]), user("What is it?"))

    (result,) = results(parent)
    assert result_text(result) == "The answer is 42." and not result["message"].content[0]["is_error"]
    child_id = result["meta"]["subagent"]["session_id"]
    assert children_of(parent) == {"c1": child_id}  # parent -> child, written before the child ran
    started = next(event for event in parent.events if event.type == "agent/subagent/started")
    assert started.seq < next(event.seq for event in parent.events if event.type == "tool/result")
    with open_child(tmp_path, child_id) as child:  # beside the parent's log
        assert delegation_of(child) == (parent.id, "c1", 1) and child.parent_id == parent.id
        assert child.messages()[-1].text == "The answer is 42."
        assert child_model.requests[0].system == "You research."
    infos = {info.id: info for info in list_sessions(tmp_path)}
    assert infos[child_id].parent_id == parent.id and infos[child_id].origin == "subagent"
    assert infos[parent.id].parent_id is None
    parent.close()

    out, err = io.StringIO(), io.StringIO()
    assert log_command("show", str(tmp_path / "parent.jsonl"), out, err) == 0
    assert f"subagent session {child_id} started by call c1 (depth 1)" in out.getvalue()
    out = io.StringIO()
    assert log_command("show", str(tmp_path / f"{child_id}.jsonl"), out, err) == 0
    assert f"subagent of session {parent.id} (call c1, depth 1)" in out.getvalue()
    out = io.StringIO()
    assert log_command("list", str(tmp_path), out, err) == 0
    assert f"{child_id} " in out.getvalue() and f"subagent of {parent.id}" in out.getvalue()


def test_the_child_has_its_own_tools_and_a_failure_returns_its_partial_text(tmp_path: Path) -> None:
    lookups: list[str] = []
    lookup = Tool("lookup", "Look up.", {"type": "object"}, lambda arguments, ctx: lookups.append(ctx.session.id) or "found")
    child_model = ScriptedModel([
        call("k1", "lookup", "{}"),
        [{"type": "text_delta", "text": "Half an answer"}, ModelError("connection reset", code="network")],
    ])
    research = subagent_tool("research", "Research.", child_model, tools=[lookup])
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("dig"), "Sorry."]), session=parent, tools=[research]), user("Dig."))

    (result,) = results(parent)
    text = result_text(result)
    assert result["message"].content[0]["is_error"] is True
    assert "did not finish: it failed (network: connection reset)" in text and "outcome unknown" in text
    assert text.endswith("Its output so far:\nHalf an answer")  # streamed, never a complete message
    assert result["meta"]["subagent"]["outcome"] == "error"
    assert lookups == [result["meta"]["subagent"]["session_id"]]  # the child's tool ran in the child's log
    assert [tool["name"] for tool in child_model.requests[0].tools] == ["lookup"]
    parent.close()


def test_a_child_dropped_mid_stream_returns_its_earlier_messages_and_the_streamed_prefix(tmp_path: Path) -> None:
    lookup = Tool("lookup", "Look up.", {"type": "object"}, lambda arguments, ctx: "found")
    child_model = ScriptedModel([
        [{"type": "text_delta", "text": "Looking it up."}, *call("k1", "lookup", "{}")],
        [{"type": "text_delta", "text": "The answer "}, {"type": "text_delta", "text": "is 4"}, ModelError("reset", code="network")],
    ])
    research = subagent_tool("research", "Research.", child_model, tools=[lookup])
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("dig"), "Sorry."]), session=parent, tools=[research]), user("Dig."))

    (result,) = results(parent)
    assert result["message"].content[0]["is_error"] is True
    assert result_text(result).endswith("Its output so far:\nLooking it up.\nThe answer is 4")
    with open_child(tmp_path, result["meta"]["subagent"]["session_id"]) as child:
        assert [m.text for m in child.messages() if m.role == "assistant"] == ["Looking it up."]  # the prefix is only chunks
    parent.close()


def test_a_parent_whose_subagent_header_is_malformed_starts_no_child(tmp_path: Path) -> None:
    child_model = ScriptedModel(["never asked"])
    research = subagent_tool("research", "Research.", child_model, max_depth=2)
    fields = {"origin": "subagent", "parent_id": "01PARENT", "parent_call_id": "c0", "seed_length": 0, "delegation_depth": -1000}
    parent = Session.create(tmp_path / "parent.jsonl", header_fields=fields)
    drive(Agent(ScriptedModel([ask("dig"), "Sorry."]), session=parent, tools=[research]), user("Dig."))

    (result,) = results(parent)
    assert result["message"].content[0]["is_error"] is True
    assert "'delegation_depth' must be an int >= 1, not -1000" in result_text(result)
    assert not child_model.requests and children_of(parent) == {}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["parent.jsonl"]
    parent.close()


def test_ids_the_task_is_new_forwarded_messages_keep_theirs_and_the_answer_is_new(tmp_path: Path) -> None:
    question = user("Please summarise the attached notes.")
    research = subagent_tool(
        "research", "Research.", ScriptedModel(["Summary."]),
        forward=lambda ctx: [m for m in ctx.session.messages() if m.role == "user" and m.source["kind"] == "user"],
    )
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("summarise"), "Done."]), session=parent, tools=[research]), question)

    (result,) = results(parent)
    meta = result["meta"]["subagent"]
    with open_child(tmp_path, meta["session_id"]) as child:
        forwarded, task = child.messages()[:2]
        final = child.messages()[-1]
    assert forwarded is not question and forwarded.id == question.id and forwarded.content == question.content
    parent_ids = {message.id for message in parent.messages()}
    assert task.id not in parent_ids  # the task is new content, minted in the child's log
    assert dict(task.source) == {"kind": "parent_agent", "session_id": parent.id, "call_id": "c1"}
    assert meta["final_message_id"] == final.id and result["message"].id != final.id
    assert final.id not in parent_ids
    parent.close()


def test_the_depth_limit_refuses_a_call_too_deep_and_survives_a_restart(tmp_path: Path) -> None:
    leaf = ScriptedModel(["leaf answer"] * 3)
    inner = subagent_tool("deeper", "Go deeper.", leaf, max_depth=1)
    middle = subagent_tool("research", "Research.", ScriptedModel([ask("go", "m1", "deeper"), "middle done"]), tools=[inner])
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("start"), "top done"]), session=parent, tools=[middle]), user("Go."))

    child_id = results(parent)[0]["meta"]["subagent"]["session_id"]
    with open_child(tmp_path, child_id) as child:
        refused = results(child)[0]
        assert delegation_depth(child) == 1
    assert refused["message"].content[0]["is_error"] is True
    assert refused["meta"]["subagent"] == {"error": "depth_limit", "depth": 2}
    assert "delegation depth limit reached (1)" in result_text(refused)
    assert leaf.requests == ()  # no grandchild ran
    parent.close()

    # A restarted child knows its depth from its header: the same limit holds.
    reopened = Session.open(tmp_path / f"{child_id}.jsonl")
    assert delegation_depth(reopened) == 1
    drive(Agent(ScriptedModel([ask("again", "m2", "deeper"), "ok"]), session=reopened, tools=[inner]), user("Again."))
    assert results(reopened)[-1]["meta"]["subagent"]["error"] == "depth_limit"
    reopened.close()


def test_the_default_limit_is_three_delegations(tmp_path: Path) -> None:
    def level(depth: int) -> Any:
        script: list[Any] = [ask(f"level {depth}", f"d{depth}", "delegate"), f"answer {depth}"]
        tools = [level(depth + 1)] if depth < 4 else []
        return subagent_tool("delegate", "Delegate.", ScriptedModel(script), tools=tools)

    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("top", "d0", "delegate"), "top"]), session=parent, tools=[level(1)]), user("Go."))
    assert result_text(results(parent)[0]) == "answer 1"
    session, depths, opened = parent, [], []
    for depth in (1, 2, 3):  # follow the links down: parent -> child -> grandchild -> ...
        session = open_child(tmp_path, children_of(session)[f"d{depth - 1}"])
        opened.append(session)
        depths.append(delegation_depth(session))
    assert depths == [1, 2, 3]
    refused = results(session)[0]  # the depth-3 child's own call would have made a fourth level
    assert refused["meta"]["subagent"] == {"error": "depth_limit", "depth": 4} and children_of(session) == {}
    for session in (*opened, parent):
        session.close()


def test_cancelling_the_parent_aborts_the_child_with_cause_parent(tmp_path: Path) -> None:
    child_model = ScriptedModel(["one two three four five six seven eight nine ten"], delay=0.05)
    research = subagent_tool("research", "Research.", child_model)
    parent = Session.create(tmp_path / "parent.jsonl")
    agent = Agent(ScriptedModel([ask("slow")]), session=parent, tools=[research])

    async def main() -> None:
        agent.followup(user("Go."))
        while not any(event.type == "agent/subagent/started" for event in parent.events):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # the child is streaming
        agent.cancel("user")
        await agent.when_idle()

    asyncio.run(main())
    (result,) = results(parent)
    text = result_text(result)
    assert result["message"].content[0]["is_error"] is True
    assert "it was aborted (cause parent)" in text and "Its output so far:\none" in text
    assert [event.data["reason"] for event in parent.events if event.type == "turn/end"] == [{"kind": "aborted", "cause": "user"}]
    with open_child(tmp_path, result["meta"]["subagent"]["session_id"]) as child:
        ends = [event.data["reason"] for event in child.events if event.type == "turn/end"]
        assert ends == [{"kind": "aborted", "cause": "parent"}]
        assert any(event.data.get("interrupted") for event in child.events if event.type == "assistant/message")
    parent.close()


CRASHING = textwrap.dedent(
    """
    import asyncio, os, sys
    from dshkit import create_user_message
    from dshkit.agent import Agent, subagent_tool
    from dshkit.models import ScriptedModel
    from dshkit.session import Session

    class CrashingModel(ScriptedModel):
        # streams one chunk of the child's answer, then the whole process dies
        async def _crash(self):
            yield {"type": "text_delta", "text": "Partial "}
            await asyncio.sleep(0.05)
            os._exit(9)

        def stream(self, request, cancel=None):
            return self._crash()

    call = [{"type": "tool_call_delta", "index": 0, "id": "c1", "name": "research", "arguments": '{"task": "t"}'},
            {"type": "finish", "reason": "tool_calls"}]

    async def main():
        parent = Session.create(sys.argv[1], durability="always")
        agent = Agent(ScriptedModel([call]), session=parent,
                      tools=[subagent_tool("research", "Research.", CrashingModel(["x"]))])
        agent.followup(create_user_message("Go.", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())
    """
)


def test_a_crash_of_both_is_repaired_on_reopen_and_the_call_gets_an_honest_result(tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(CRASHING)
    python_path = DSHKIT_PATH
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "parent.jsonl")],
        env={"PYTHONPATH": python_path, "PATH": "/usr/bin:/bin"}, capture_output=True, timeout=120,
    )
    assert done.returncode == 9, done.stderr.decode()
    parent = Session.open(tmp_path / "parent.jsonl")
    (result,) = results(parent)
    assert result["message"].content[0]["is_error"] is True and "outcome is unknown" in result_text(result)
    child_id = children_of(parent)["c1"]
    child = Session.open(tmp_path / f"{child_id}.jsonl")
    assert delegation_of(child) == (parent.id, "c1", 1)
    assert [event.data["reason"] for event in child.events if event.type == "turn/end"] == [{"kind": "interrupted"}]
    parent.close()
    child.close()


def test_bad_options_and_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_depth"):
        subagent_tool("r", "R.", ScriptedModel([]), max_depth=0)
    with pytest.raises(TypeError, match="forward"):
        subagent_tool("r", "R.", ScriptedModel([]), forward="all")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model"):
        subagent_tool("r", "R.", object())  # type: ignore[arg-type]
    parent = Session()
    drive(Agent(ScriptedModel([call("c1", "r", '{"task": ""}'), "ok"]), session=parent, tools=[subagent_tool("r", "R.", ScriptedModel([]))]), user("x"))
    (result,) = results(parent)
    assert result["meta"]["subagent"]["error"] == "invalid_arguments" and "'task'" in result_text(result)
    assert children_of(parent) == {}


def test_a_child_whose_loop_fails_answers_with_an_error_and_its_log_is_repaired_on_reopen(tmp_path: Path) -> None:
    def break_the_log(arguments: Any, ctx: Any) -> str:
        ctx.session.close()  # the child's log can no longer be written: its loop fails
        return "closed"

    breaker = Tool("break_log", "Break the log.", {"type": "object"}, break_the_log)
    child_model = ScriptedModel([[{"type": "text_delta", "text": "Working on it. "}, *call("k1", "break_log", "{}")]])
    research = subagent_tool("research", "Research.", child_model, tools=[breaker])
    parent = Session.create(tmp_path / "parent.jsonl")
    drive(Agent(ScriptedModel([ask("break"), "Noted."]), session=parent, tools=[research]), user("Go."))

    (result,) = results(parent)
    text = result_text(result)
    assert result["message"].content[0]["is_error"] is True
    assert "did not finish: its loop failed (SessionClosedError" in text and "Working on it." in text
    child_id = children_of(parent)["c1"]
    with Session.open(tmp_path / f"{child_id}.jsonl") as child:  # the open turn is closed on re-open
        assert [event.data["reason"] for event in child.events if event.type == "turn/end"] == [{"kind": "interrupted"}]
        closer = [event.data for event in child.events if event.type == "tool/result"]
        assert closer and "outcome is unknown" in result_text(closer[0])
    parent.close()
