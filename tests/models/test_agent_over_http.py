"""The agent loop with `OpenAICompatibleModel` over real HTTP: tools, cancel, errors, rebuild."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.models import Provider
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.session import Session, project_request

DISCONNECT_WAIT = 10.0
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


async def read_file(arguments: dict[str, Any], ctx: Any) -> str:
    return {"notes.md": "buy milk"}.get(arguments["path"], "no such file")


def make(loopback: Any, **options: Any) -> OpenAICompatibleModel:
    options.setdefault("timeout", 5.0)
    options.setdefault("retry_backoff", 0.01)
    return OpenAICompatibleModel("deepseek-chat", Provider(loopback.base_url, api_key="sk-test", name="deepseek", **options))


def request_prefixes(session: Session) -> list[int]:
    """The seq each request was built at: the event just before the first chunk of each attempt."""
    seqs, previous = [], None
    for event in session.events:
        if event.type == "assistant/chunk" and (previous is None or previous.type != "assistant/chunk"):
            seqs.append(event.seq - 1)
        previous = event
    return seqs


def tool_then_answer(wire: Any) -> list[Any]:
    first = wire.sse_reply(
        [
            wire.chunk(role="assistant", content=None, reasoning="", response_id="resp-1"),
            wire.chunk(reasoning="I need the file.", response_id="resp-1"),
            wire.chunk(content="Reading it.", response_id="resp-1"),
            wire.chunk(tool_calls=[wire.tool_call_start(0, "call_0", "read_file")], response_id="resp-1"),
            wire.chunk(tool_calls=[wire.tool_call_args(0, '{"path"')], response_id="resp-1"),
            wire.chunk(tool_calls=[wire.tool_call_args(0, ': "notes.md"}')], response_id="resp-1"),
            wire.chunk(finish="tool_calls", response_id="resp-1"),
            wire.usage({"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 32}}),
            wire.DONE,
        ]
    )
    second = wire.sse_reply(wire.answer("The notes say: buy milk", response_id="resp-2"))
    return [first, second]


def test_tool_call_round_trip_and_the_log_rebuilds_both_requests(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(*tool_then_answer(wire))
    path = tmp_path / "chat.jsonl"
    model = make(loopback)
    prompt = create_user_message("What do my notes say?", source={"kind": "user"})

    async def main() -> None:
        session = Session.create(path)
        agent = Agent(
            model,
            session=session,
            tools=[Tool("read_file", "Read a file", SCHEMA, read_file)],
            system="You are terse.",
            config={"temperature": 0.0},
        )
        async with model:
            agent.followup(prompt)
            await agent.when_idle()
        session.close()

    asyncio.run(main())
    first, second = loopback.received
    assert [m["role"] for m in first.json["messages"]] == ["system", "user"]
    assert first.json["tools"] == [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": SCHEMA}}
    ]
    assert first.json["temperature"] == 0.0
    # The second request carries the call, the reasoning (DeepSeek wants it back) and the result.
    assert second.json["messages"][2:] == [
        {
            "role": "assistant",
            "content": "Reading it.",
            "reasoning_content": "I need the file.",
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.md"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "buy milk"},
    ]

    session = Session.open(path, read_only=True)
    try:
        messages = session.messages()
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
        assert messages[0].id == prompt.id
        assert messages[1].source["replay_state"] == {"response_id": "resp-1"}
        assert messages[3].text == "The notes say: buy milk"
        assistant_events = [e for e in session.events if e.type == "assistant/message"]
        assert assistant_events[0].data["usage"]["prompt_tokens_details"] == {"cached_tokens": 32}
        # Every request is rebuilt from the log prefix alone, to the byte.
        rebuilt = [model.request_body(project_request(session, at_seq=seq)) for seq in request_prefixes(session)]
        assert rebuilt == [first.body, second.body]
    finally:
        session.close()


def test_cancel_mid_stream_keeps_the_prefix_and_drops_the_connection(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(reasoning="Let me think"), wire.chunk(content="The answer is"), wire.Stall()]))
    path = tmp_path / "cancel.jsonl"
    model = make(loopback, timeout=30)

    async def main() -> None:
        session = Session.create(path)
        agent = Agent(model, session=session)

        def on_event(event: Any) -> None:
            if event.type == "delta" and event.data["chunk"].get("text") == "The answer is":
                agent.cancel("user")

        agent.subscribe(on_event)
        async with model:
            agent.followup(create_user_message("Question?", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(main())
    assert loopback.disconnected.wait(DISCONNECT_WAIT)
    session = Session.open(path, read_only=True)
    try:
        [kept] = [e for e in session.events if e.type == "assistant/message"]
        assert kept.data["interrupted"] is True
        assert [dict(b) for b in kept.data["message"].content] == [
            {"type": "reasoning", "text": "Let me think"},
            {"type": "text", "text": "The answer is"},
        ]
        assert session.events[-1].data["reason"]["kind"] == "aborted"
    finally:
        session.close()


def test_http_error_ends_the_turn_with_the_typed_error(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.error_reply(401, "Authentication Fails", kind="authentication_error"))
    model = make(loopback)

    async def main() -> Session:
        agent = Agent(model)
        async with model:
            agent.followup(create_user_message("hi", source={"kind": "user"}))
            await agent.when_idle()
        return agent.session

    session = asyncio.run(main())
    reason = session.events[-1].data["reason"]
    assert reason["kind"] == "error"
    assert reason["error"]["code"] == "http_401" and reason["error"]["status"] == 401
    assert reason["error"]["request_id"] == "req-401" and reason["error"]["name"] == "AuthenticationError"
    assert [e.type for e in session.events if e.type.startswith("assistant/")] == []


def test_interrupted_prefix_is_sent_back_in_the_next_request(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.sse_reply([wire.chunk(content="Partial answer"), wire.Stall()]),
        wire.sse_reply(wire.answer("Sorry, go on")),
    )
    model = make(loopback, timeout=30)

    async def main() -> None:
        agent = Agent(model)

        def cancel_first_turn(event: Any) -> None:
            if event.type == "delta" and event.turn == 1:
                agent.cancel()

        agent.subscribe(cancel_first_turn)
        async with model:
            agent.followup(create_user_message("First", source={"kind": "user"}))
            await agent.when_idle()
            agent.followup(create_user_message("Second", source={"kind": "user"}))
            await agent.when_idle()

    asyncio.run(main())
    messages = loopback.received[1].json["messages"]
    assert messages == [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": "Partial answer"},
        {"role": "user", "content": "Second"},
    ]
    assert json.loads(loopback.received[1].body)["stream"] is True
