"""Reasoning streamed as ``reasoning_text`` content parts (DeepSeek's Responses API, open-weight
servers): read as reasoning, kept item for item, and sent back as a reasoning item with its
``content`` parts. The event shapes follow OpenAI's Responses streaming reference (the ``openai``
package's ``ResponseContentPartAddedEvent.PartReasoningText``, ``ResponseReasoningTextDeltaEvent``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent, Tool
from dshkit.interop.openai_responses import from_response_items, to_response_items
from dshkit.models import Provider
from dshkit.models.errors import MalformedResponseError
from dshkit.models.http.sse import ServerSentEvent
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.models.responses.stream import ResponsesStreamTranslator
from dshkit.session import ModelRequest, Session, project_request

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
THOUGHT = ["The user wants ", "their notes; ", "read notes.md."]


def reasoning_text_events(index: int, item_id: str, parts: list[list[str]], *, streamed: bool = True) -> list[dict[str, Any]]:
    """A reasoning item whose reasoning itself streams as ``reasoning_text`` content parts; with
    `streamed` false, its text comes only whole, in ``response.output_item.done``."""
    added = {"type": "reasoning", "id": item_id, "summary": [], "content": [], "status": "in_progress"}
    events: list[dict[str, Any]] = [{"type": "response.output_item.added", "output_index": index, "item": added}]
    for number, pieces in enumerate(parts if streamed else ()):
        where = {"item_id": item_id, "output_index": index, "content_index": number}
        events.append({"type": "response.content_part.added", **where, "part": {"type": "reasoning_text", "text": ""}})
        events += [{"type": "response.reasoning_text.delta", **where, "delta": piece} for piece in pieces]
        events.append({"type": "response.reasoning_text.done", **where, "text": "".join(pieces)})
        events.append({"type": "response.content_part.done", **where, "part": {"type": "reasoning_text", "text": "".join(pieces)}})
    content = [{"type": "reasoning_text", "text": "".join(pieces)} for pieces in parts]
    done = {"type": "reasoning", "id": item_id, "summary": [], "content": content, "status": "completed"}
    events.append({"type": "response.output_item.done", "output_index": index, "item": done})
    return events


def translate(*payloads: dict[str, Any]) -> list[dict[str, Any]]:
    translator = ResponsesStreamTranslator()
    chunks: list[dict[str, Any]] = []
    for payload in payloads:
        chunks += translator.feed(ServerSentEvent(event=payload["type"], data=json.dumps(payload)))  # type: ignore[arg-type]
    return chunks + translator.finish()  # type: ignore[operator]


CREATED = {"type": "response.created", "response": {"id": "resp_ds1", "object": "response", "status": "in_progress", "output": []}}
COMPLETED = {"type": "response.completed", "response": {"id": "resp_ds1", "object": "response", "status": "completed", "output": [], "usage": {"input_tokens": 9, "output_tokens": 7, "total_tokens": 16}}}


def message_events(index: int, item_id: str, text: str) -> list[dict[str, Any]]:
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **where, "delta": text},
    ]


# -- the stream translator ---------------------------------------------------------------------


def test_reasoning_text_parts_are_reasoning_and_their_lengths_are_kept() -> None:
    chunks = translate(CREATED, *reasoning_text_events(0, "rs_ds1", [THOUGHT, ["Then answer."]]), *message_events(1, "msg_ds1", "Hi."), COMPLETED)
    assert [c["text"] for c in chunks if c["type"] == "reasoning_delta"] == [*THOUGHT, "Then answer."]
    assert [c["text"] for c in chunks if c["type"] == "text_delta"] == ["Hi."]
    assert chunks[-1]["replay_state"] == {
        "api": "openai-responses",
        "id": "resp_ds1",
        "items": [
            {"type": "reasoning", "id": "rs_ds1", "summary": [], "content": [len("".join(THOUGHT)), len("Then answer.")]},
            {"type": "message", "id": "msg_ds1", "parts": [{"type": "output_text", "length": 3}]},
        ],
    }


def test_reasoning_that_only_comes_whole_in_the_done_item_is_read_there() -> None:
    chunks = translate(CREATED, *reasoning_text_events(0, "rs_ds1", [THOUGHT], streamed=False), COMPLETED)
    assert chunks[0] == {"type": "reasoning_delta", "text": "".join(THOUGHT)}
    assert chunks[-1]["replay_state"]["items"] == [{"type": "reasoning", "id": "rs_ds1", "summary": [], "content": [len("".join(THOUGHT))]}]


def test_a_delta_without_a_usable_content_index_goes_to_the_last_part() -> None:
    added, *_ = reasoning_text_events(0, "rs_ds1", [])
    delta = {"type": "response.reasoning_text.delta", "item_id": "rs_ds1", "output_index": 0, "content_index": None, "delta": "abc"}
    chunks = translate(CREATED, added, delta, {**delta, "content_index": -1, "delta": "de"}, COMPLETED)
    assert chunks[-1]["replay_state"]["items"] == [{"type": "reasoning", "id": "rs_ds1", "summary": [], "content": [5]}]


def test_a_part_that_is_not_reasoning_text_in_a_reasoning_item_is_malformed() -> None:
    added, *_ = reasoning_text_events(0, "rs_ds1", [])
    odd = {"type": "response.content_part.added", "item_id": "rs_ds1", "output_index": 0, "content_index": 0, "part": {"type": "output_text", "text": ""}}
    with pytest.raises(MalformedResponseError, match=r"event 3: a 'output_text' content part in a reasoning item \(expected reasoning_text\)"):
        translate(CREATED, added, odd)
    whole = {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_ds1", "summary": [], "content": [{"type": "reasoning_text"}]}}
    with pytest.raises(MalformedResponseError, match=r"reasoning item 'content' is not a list of parts with a str 'text'"):
        translate(CREATED, added, whole)


# -- an agent turn over HTTP -------------------------------------------------------------------


def first_reply(responses_wire: Any) -> Any:
    r = responses_wire("resp_ds1")
    arguments = ['{"path":', ' "notes.md"}']
    events = [
        *r.created(),
        *[r.event(payload) for payload in reasoning_text_events(0, "rs_ds1", [THOUGHT])],
        *r.function_call(1, "fc_ds1", "call_ds1", "read_file", arguments),
        r.completed(),
    ]
    return r.sse_reply(events)


EXPECTED_ROUND = [
    {"type": "reasoning", "id": "rs_ds1", "summary": [], "content": [{"type": "reasoning_text", "text": "".join(THOUGHT)}]},
    {"type": "function_call", "id": "fc_ds1", "call_id": "call_ds1", "name": "read_file", "arguments": '{"path": "notes.md"}'},
    {"type": "function_call_output", "call_id": "call_ds1", "output": "buy milk"},
]


def test_an_agent_turn_sends_the_reasoning_item_back_with_its_content(loopback: Any, responses_wire: Any, tmp_path: Path) -> None:
    model = OpenAIResponsesModel("deepseek-v4", Provider(loopback.base_url, api_key="sk-test", timeout=5.0))
    loopback.reply(first_reply(responses_wire), responses_wire("resp_ds2").sse_reply(responses_wire("resp_ds2").answer("Buy milk.")))

    async def read_file(arguments: dict[str, Any], ctx: Any) -> str:
        return {"notes.md": "buy milk"}.get(arguments["path"], "no such file")

    async def turn() -> None:
        session = Session.create(tmp_path / "log.jsonl")
        agent = Agent(model, session=session, tools=[Tool("read_file", "Read a file", SCHEMA, read_file)])
        async with model:
            agent.followup(create_user_message("What do my notes say?", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(turn())
    first, second = loopback.received
    assert second.json["input"][1:] == EXPECTED_ROUND
    with Session.open(tmp_path / "log.jsonl", read_only=True) as session:
        messages = session.messages()
        assert messages[1].content[0] == {"type": "reasoning", "text": "".join(THOUGHT)}
        assert messages[3].text == "Buy milk."
        # The log rebuilds the body that was sent, to the byte.
        seqs = [e.seq - 1 for i, e in enumerate(session.events) if e.type == "assistant/chunk" and session.events[i - 1].type != "assistant/chunk"]
        assert model.request_body(project_request(session, at_seq=seqs[1])) == second.body

    # The converters keep the item: exported as the model sends it, imported back to the same body.
    items = to_response_items(messages)
    assert items[1:4] == EXPECTED_ROUND
    again = from_response_items(items, ids=[m.id for m in messages])
    assert model.request_body(ModelRequest(again)) == model.request_body(ModelRequest(messages))
    openai = pytest.importorskip("openai")
    from pydantic import TypeAdapter

    TypeAdapter(list[openai.types.responses.ResponseInputItemParam]).validate_python(items, strict=True)
