"""Requests are a pure function of the log (notes 8, 13, 14): rebuild each one from its prefix."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.agent import Agent, Enter, Tool, ToolOutput
from dshkit.session import Session, project_request


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def rebuild_from_file_prefix(path: Path, event_count: int, scratch: Path) -> Any:
    """Open only the first `event_count` events of the log file (a copy) and project it."""
    lines = path.read_bytes().splitlines(keepends=True)
    scratch.write_bytes(b"".join(lines[: 1 + event_count]))  # the header line, then the events
    with Session.open(scratch, read_only=True) as prefix:
        assert len(prefix.events) == event_count
        return project_request(prefix)


def test_every_request_is_rebuilt_equal_from_the_log_prefix_alone(tmp_path: Path, kit: Any) -> None:
    path = tmp_path / "log.jsonl"
    session = Session.create(path)
    holder: list[Agent] = []
    steer = kit.user("also look at b.txt")

    async def list_files(arguments: Any, ctx: Any) -> Any:
        return ["a.txt", "b.txt"]

    async def read_file(arguments: Any, ctx: Any) -> Any:
        if arguments["path"] == "a.txt":
            holder[0].steer(steer)
            return ToolOutput("contents of a", context=[kit.context("a.txt is 3 days old", plugin="fs")])
        return "contents of b"

    def pre_step(ctx: Any) -> Enter:
        if ctx.turn == 2 and ctx.step == 1:
            rewritten = [m.with_content(m.text + " (please be careful)") for m in ctx.messages]
            return Enter([kit.context("workspace: /tmp/demo", plugin="workspace"), *rewritten])
        return Enter(ctx.messages)

    def request(ctx: Any) -> Any:
        if ctx.turn >= 2:
            return {**ctx.config, "temperature": 0.2}
        return None

    def request_error(ctx: Any) -> bool:
        return ctx.attempt == 1

    responses: list[Any] = [
        kit.calls_response(("l1", "list", "{}")),
        "There are two files.",
        kit.calls_response(("r1", "read", '{"path": "a.txt"}')),
        kit.calls_response(("r2", "read", '{"path": "b.txt"}')),
        "Both read.",
        [{"type": "text_delta", "text": "Hmm"}, {"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "busy"}}],
        "Retried fine.",
        "This answer will be cut short by a cancel",
        "After compaction.",
    ]
    model = kit.RecordingModel(responses, delay=0.0005)
    model.session = session
    tools = [Tool("list", "list files", {"type": "object"}, list_files), Tool("read", "read a file", {"type": "object"}, read_file)]
    hooks = {"pre_step": pre_step, "request": request, "request_error": request_error}
    agent = Agent(model, session=session, tools=tools, system="You are a careful assistant.", hooks=hooks, config={"max_tokens": 512})
    holder.append(agent)

    async def main() -> None:
        agent.followup(kit.user("What files are there?"))
        await agent.when_idle()
        agent.followup(kit.user("Read a.txt"))
        await agent.when_idle()
        agent.inject(kit.context("the user is on a phone", plugin="client"))
        agent.followup(kit.user("Summarise"))
        await agent.when_idle()
        cut = asyncio.Event()
        unsubscribe = agent.subscribe(lambda event: cut.set() if event.type == "delta" else None)
        agent.followup(kit.user("Tell me a long story"))
        await cut.wait()
        agent.cancel("user")
        await agent.when_idle()
        unsubscribe()

        def maintain() -> None:
            result = next(m for m in session.messages() if m.source.get("call_id") == "r1")
            block = result.content[0]
            pruned = result.with_content([{**block, "content": [{"type": "text", "text": "[pruned]"}]}])
            session.replace(pruned)
            messages = session.messages()
            summary = dshkit.create_user_message("Summary: listed two files.", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()})
            session.compact(messages[0].id, messages[3].id, summary)

        await agent.run_maintenance(maintain)
        agent.followup(kit.user("And now?"))
        await agent.when_idle()

    run(main())
    resumed_model = kit.RecordingModel(["Resumed."])
    resumed_model.session = session
    resumed = Agent(resumed_model, session=session, tools=tools, system="You are a careful assistant.", config={"max_tokens": 512})

    async def resume() -> None:
        resumed.followup(kit.user("Still there?"))
        await resumed.when_idle()

    run(resume())
    session.close()

    requests = list(zip(model.requests, model.prefix_lengths)) + list(zip(resumed_model.requests, resumed_model.prefix_lengths))
    assert len(requests) == 10
    reasons = [e.data["reason"] for e in kit.of_type(session, "request/header")]
    assert reasons == ["initial", "change", "resume"]
    for number, (sent, prefix_length) in enumerate(requests):
        rebuilt = rebuild_from_file_prefix(path, prefix_length, tmp_path / f"prefix-{number}.jsonl")
        assert rebuilt == sent, f"request {number}"
        assert [m.id for m in rebuilt.messages] == [m.id for m in sent.messages]
        assert project_request(session, at_seq=prefix_length - 1) == sent
    # the retry re-derived the same request in the same step
    assert model.requests[5] == model.requests[6]
    assert model.requests[2].config == {"max_tokens": 512, "temperature": 0.2}
    assert model.requests[0].config == {"max_tokens": 512}
    # compaction and pruning are visible in the request after maintenance
    after = model.requests[8].messages
    assert after[0].text == "Summary: listed two files."
    assert any(m.source.get("call_id") == "r1" and m.content[0]["content"][0]["text"] == "[pruned]" for m in after)


def test_the_request_messages_are_the_derived_messages_at_dispatch(kit: Any) -> None:
    model = kit.RecordingModel(["a", "b"])
    agent = Agent(model)
    model.session = agent.session

    async def main() -> None:
        agent.followup(kit.user("1"))
        agent.followup(kit.user("2"))
        await agent.when_idle()

    run(main())
    for sent, prefix_length in zip(model.requests, model.prefix_lengths):
        assert sent.messages == project_request(agent.session, at_seq=prefix_length - 1).messages
        assert all(a is b for a, b in zip(sent.messages, agent.session.messages()))


def test_each_agent_logs_one_full_header_then_only_real_changes(kit: Any) -> None:
    settings = {"temperature": 0.0}

    def request(ctx: Any) -> None:
        ctx.config.update(settings)

    model = kit.RecordingModel(["1", "2", "3"])
    agent = Agent(model, system="s", hooks={"request": request})
    model.session = agent.session

    async def main() -> None:
        agent.followup(kit.user("a"))
        await agent.when_idle()
        agent.followup(kit.user("b"))  # same settings: no header
        await agent.when_idle()
        settings["temperature"] = 0.7
        agent.followup(kit.user("c"))  # changed settings: one "change" header
        await agent.when_idle()

    run(main())
    headers = kit.of_type(agent.session, "request/header")
    assert [(h.data["reason"], h.data["header"]["config"]) for h in headers] == [
        ("initial", {"temperature": 0.0}),
        ("change", {"temperature": 0.7}),
    ]
    assert dict(headers[0].data["header"]) == {"system": "s", "tools": (), "config": {"temperature": 0.0}}
    second = Agent(kit.RecordingModel(["4"]), system="s", hooks={"request": request}, session=agent.session)

    async def again() -> None:
        second.followup(kit.user("d"))
        await second.when_idle()

    run(again())
    headers = kit.of_type(agent.session, "request/header")
    assert headers[-1].data["reason"] == "resume"  # even though identical
    assert headers[-1].data["header"] == headers[-2].data["header"]


def test_the_request_hook_may_change_call_settings_only(kit: Any) -> None:
    seen: list[Any] = []

    def request(ctx: Any) -> Any:
        seen.append((ctx.turn, ctx.step, ctx.attempt, ctx.system, [m.text for m in ctx.messages]))
        with pytest.raises(AttributeError):
            ctx.messages.append("x")
        return "not settings"

    agent = Agent(kit.RecordingModel([]), system="sys", hooks={"request": request})

    kit.run_followup(agent, kit.user("hello"))
    assert seen == [(1, 1, 1, "sys", ["hello"])]
    reason = kit.turn_ends(agent.session)[0]
    assert reason["kind"] == "error" and "expected None or a mapping of call settings" in reason["error"]["message"]
    assert kit.types(agent.session)[-2:] == ["step/end", "turn/end"]


def test_retry_within_a_step_keeps_the_failed_chunks_but_cites_only_the_retry(kit: Any) -> None:
    attempts: list[tuple[int, str]] = []

    async def request_error(ctx: Any) -> bool:
        attempts.append((ctx.attempt, type(ctx.error).__name__))
        return ctx.attempt < 2

    failing = [{"type": "text_delta", "text": "I was about to"}, ConnectionResetError("reset")]
    model = kit.RecordingModel([failing, failing, "third time lucky"])
    agent = Agent(model, hooks={"request_error": request_error})
    model.session = agent.session

    kit.run_followup(agent, kit.user("go"))
    # attempt 2 failed too and the hook declined a third: the turn ends with the error
    assert attempts == [(1, "ConnectionResetError"), (2, "ConnectionResetError")]
    assert kit.turn_ends(agent.session)[0]["kind"] == "error"
    assert len(model.requests) == 2 and model.requests[0] == model.requests[1]
    assert len(kit.of_type(agent.session, "assistant/chunk")) == 2
    assert "assistant/message" not in kit.types(agent.session)

    model = kit.RecordingModel([failing, "recovered"])
    agent = Agent(model, hooks={"request_error": lambda ctx: True})
    model.session = agent.session

    async def again() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    run(again())
    chunks = kit.of_type(agent.session, "assistant/chunk")
    (answer,) = kit.of_type(agent.session, "assistant/message")
    assert chunks[0].data["chunk"]["text"] == "I was about to"  # the failed attempt's chunk stays
    assert chunks[0].seq not in answer.source_event_seqs
    assert answer.source_event_seqs == tuple(c.seq for c in chunks[1:])
    assert answer.data["message"].text == "recovered"
    assert len(kit.of_type(agent.session, "step/start")) == 1
    assert len(kit.of_type(agent.session, "request/header")) == 1
    assert model.requests[0] == model.requests[1]
