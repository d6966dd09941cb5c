"""A full agent turn with a tool call over each wire format (Chat Completions, Anthropic Messages,
OpenAI Responses) on a real HTTP server: the bodies rebuilt from the re-opened log equal the bodies
sent, to the byte, replay state included; a log cut off while the tool ran (crash) is repaired on
open and rebuilt into the same next request the live agent sends."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.session import Session, project_request

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
SIGNATURE = "EqQBCkYIBhgCIkB0c2lnbmF0dXJlLW9mLXRoZS10aGlua2luZw=="
ENCRYPTED = "gAAAAABoZW5jcnlwdGVkLXJlYXNvbmluZy1pdGVt"


def request_prefixes(session: Session) -> list[int]:
    """The seq each request was built at: the event just before the first chunk of each attempt."""
    seqs, previous = [], None
    for event in session.events:
        if event.type == "assistant/chunk" and (previous is None or previous.type != "assistant/chunk"):
            seqs.append(event.seq - 1)
        previous = event
    return seqs


def chat_replies(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, list[Any]]:
    model = OpenAICompatibleModel("deepseek-reasoner", Provider(loopback.base_url, api_key="sk-test", name="deepseek", timeout=5.0))
    first = wire.sse_reply(
        [
            wire.chunk(role="assistant", reasoning="I need ", response_id="r1"),
            wire.chunk(reasoning="the file.", response_id="r1"),
            wire.chunk(tool_calls=[wire.tool_call_start(0, "call_0", "read_file")], response_id="r1"),
            wire.chunk(tool_calls=[wire.tool_call_args(0, '{"path": ')], response_id="r1"),
            wire.chunk(tool_calls=[wire.tool_call_args(0, '"notes.md"}')], response_id="r1"),
            wire.chunk(finish="tool_calls", response_id="r1"),
            wire.usage({"prompt_tokens": 40, "completion_tokens": 9}),
            wire.DONE,
        ]
    )
    return model, [first, wire.sse_reply(wire.answer("Buy milk.", response_id="r2")), wire.sse_reply(wire.answer("Done.", response_id="r3"))]


def anthropic_replies(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, list[Any]]:
    model = AnthropicModel("claude-test", Provider(loopback.base_url, api_key="sk-ant-test", timeout=5.0), settings={"max_tokens": 1024})
    a = anthropic_wire
    first = a.sse_reply(
        [
            a.message_start("msg_01", {"input_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 32, "output_tokens": 1}),
            *a.thinking(0, ["I need ", "the file."], SIGNATURE),
            a.block_start(1, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3redacted"}),
            a.block_stop(1),
            a.PING,
            *a.text(2, ["Reading it."]),
            *a.tool_use(3, "toolu_01", "read_file", ['{"path":', ' "notes.md"}']),
            a.message_delta("tool_use", 30),
            a.MESSAGE_STOP,
        ]
    )
    return model, [first, a.sse_reply(a.answer("Buy milk.", message_id="msg_02")), a.sse_reply(a.answer("Done.", message_id="msg_03"))]


def responses_replies(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, list[Any]]:
    model = OpenAIResponsesModel("gpt-test", Provider(loopback.base_url, api_key="sk-test", timeout=5.0))
    r = responses_wire("resp_1")
    first = r.sse_reply(
        [
            *r.created(),
            *r.reasoning(0, "rs_1", [["I need ", "the file."], ["Then answer."]], ENCRYPTED),
            *r.message(1, "msg_1", ["Reading", " it."]),
            *r.function_call(2, "fc_1", "call_1", "read_file", ['{"path":', ' "notes.md"}']),
            r.completed(),
        ]
    )
    return model, [first, r.sse_reply(responses_wire("resp_2").answer("Buy milk.")), r.sse_reply(responses_wire("resp_3").answer("Done."))]


APIS: dict[str, Callable[..., tuple[Any, list[Any]]]] = {
    "chat": chat_replies,
    "anthropic": anthropic_replies,
    "responses": responses_replies,
}


def replay_part(api: str, body: dict[str, Any]) -> Any:
    """The part of the second request that carries the first response back."""
    if api == "chat":
        return body["messages"][2]
    if api == "anthropic":
        return body["messages"][1]
    return body["input"][1:4]


EXPECTED_REPLAY = {
    "chat": {
        "role": "assistant",
        "content": None,
        "reasoning_content": "I need the file.",
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.md"}'}}],
    },
    "anthropic": {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I need the file.", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3redacted"},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "notes.md"}},
        ],
    },
    "responses": [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "I need the file."}, {"type": "summary_text", "text": "Then answer."}],
            "encrypted_content": ENCRYPTED,
        },
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "notes.md"}'},
    ],
}


@pytest.mark.parametrize("api", list(APIS))
def test_agent_turn_and_the_log_rebuilds_every_body(api: str, loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, tmp_path: Path) -> None:
    model, replies = APIS[api](loopback, wire, anthropic_wire, responses_wire)
    loopback.reply(*replies[:2])
    path, crashed = tmp_path / "live.jsonl", tmp_path / "crashed.jsonl"

    async def read_file(arguments: dict[str, Any], ctx: Any) -> str:
        # The log as a crash at this moment would leave it: the call is logged, its result is not.
        shutil.copyfile(path, crashed)
        return {"notes.md": "buy milk"}.get(arguments["path"], "no such file")

    tools = [Tool("read_file", "Read a file", SCHEMA, read_file)]

    async def live() -> None:
        session = Session.create(path)
        agent = Agent(model, session=session, tools=tools, system="You are terse.", config={"temperature": 0.0})
        async with model:
            agent.followup(create_user_message("What do my notes say?", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(live())
    first, second = loopback.received
    assert replay_part(api, second.json) == EXPECTED_REPLAY[api]

    with Session.open(path, read_only=True) as session:
        messages = session.messages()
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
        assert messages[3].text == "Buy milk."
        rebuilt = [model.request_body(project_request(session, at_seq=seq)) for seq in request_prefixes(session)]
    assert rebuilt == [first.body, second.body]

    # The crashed copy: repaired on open, then the conversation goes on over the same API.
    loopback.reply(replies[2])

    async def resume() -> None:
        session = Session.open(crashed)
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        agent = Agent(model, session=session, tools=tools, system="You are terse.", config={"temperature": 0.0})
        async with model:
            agent.followup(create_user_message("Go on.", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(resume())
    resumed = loopback.received[2]
    assert replay_part(api, resumed.json) == EXPECTED_REPLAY[api]  # the signature survived the crash
    assert "outcome is unknown" in resumed.body.decode()  # the repaired tool result went too
    with Session.open(crashed, read_only=True) as session:
        last = request_prefixes(session)[-1]
        assert model.request_body(project_request(session, at_seq=last)) == resumed.body
        assert "outcome is unknown" in session.messages()[2].content[0]["content"][0]["text"]
