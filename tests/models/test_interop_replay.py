"""One representation of provider replay state: `dshkit.interop` and the HTTP models agree.

A transcript imported with `from_anthropic` / `from_response_items` is sent by `AnthropicModel` /
`OpenAIResponsesModel` exactly as it was written (signatures, redacted thinking, item ids,
encrypted reasoning byte for byte); a message the model assembled from a real stream exports
with all of it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dshkit import Message, create_user_message
from dshkit.agent import Agent
from dshkit.interop.anthropic import from_anthropic, to_anthropic
from dshkit.interop.blocks import ConversionError
from dshkit.interop.openai_chat import to_chat_messages
from dshkit.interop.openai_responses import from_response_items, item_ids_of, to_response_items
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.session import ModelRequest, Session

SIGNATURE = "EqQBCkYIBhgCIkB0c2lnbmF0dXJlLW9mLXRoZS10aGlua2luZw=="
LATER_SIGNATURE = "ErUBCkYIBRgCIkDzZWNvbmQtc2lnbmF0dXJlLWJ5dGVz+/=="
REDACTED = "EmwKAhgBEgy3redacted+data/=="
ENCRYPTED = "gAAAAABoZW5jcnlwdGVkLXJlYXNvbmluZy1pdGVt"

ANTHROPIC_TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "What do my notes say?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I need the file.", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"path": "notes.md"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "buy milk"}]}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Short answer.", "signature": LATER_SIGNATURE},
            {"type": "text", "text": "Buy ", "citations": [{"type": "char_location", "cited_text": "buy", "document_index": 0, "start_char_index": 0, "end_char_index": 3}]},
            {"type": "text", "text": "milk."},
        ],
    },
]

RESPONSES_TRANSCRIPT: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What do my notes say?"}]},
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "I need the file."}, {"type": "summary_text", "text": "Then answer."}],
        "encrypted_content": ENCRYPTED,
    },
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "notes.md"}', "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "buy milk"},
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": ENCRYPTED + "2"},
    {
        "type": "message",
        "id": "msg_2",
        "role": "assistant",
        "status": "incomplete",
        "content": [{"type": "output_text", "text": "Buy milk.", "annotations": [{"type": "url_citation", "url": "https://x.test", "title": "x", "start_index": 0, "end_index": 3}]}],
    },
]


def anthropic_model(base_url: str = "http://127.0.0.1:9") -> AnthropicModel:
    return AnthropicModel("claude-test", Provider(base_url, api_key="sk-ant-test", timeout=5.0), settings={"max_tokens": 1024})


def responses_model(base_url: str = "http://127.0.0.1:9/v1") -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", Provider(base_url, api_key="sk-test", timeout=5.0))


def sent_body(model: Any, messages: tuple[Message, ...]) -> dict[str, Any]:
    """The body the model posts for these messages (its own projection, no network)."""
    return json.loads(model.request_body(ModelRequest(messages)))  # type: ignore[no-any-return]


def assembled(model: Any, loopback: Any, reply: Any, tmp_path: Path) -> tuple[Message, ...]:
    """The log's messages after one agent turn of `model` against a real loopback stream."""
    loopback.reply(reply)

    async def turn() -> None:
        session = Session.create(tmp_path / "log.jsonl")
        agent = Agent(model, session=session)
        async with model:
            agent.followup(create_user_message("What do my notes say?", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(turn())
    with Session.open(tmp_path / "log.jsonl", read_only=True) as session:
        return session.messages()


# -- Anthropic -----------------------------------------------------------------------------


def test_an_imported_anthropic_transcript_is_sent_by_the_model_as_written() -> None:
    imported = from_anthropic(ANTHROPIC_TRANSCRIPT)
    assert sent_body(anthropic_model(), imported)["messages"] == ANTHROPIC_TRANSCRIPT
    # One place for the state: the source, as the model records it; the blocks hold no signature.
    assistant = imported[1]
    assert assistant.source["replay_state"]["api"] == "anthropic-messages"
    assert [block["type"] for block in assistant.content] == ["reasoning", "text", "tool_call"]
    assert all("signature" not in block for block in assistant.content)
    assert to_anthropic(imported) == (None, ANTHROPIC_TRANSCRIPT)


def test_an_assistant_message_without_thinking_or_extra_keys_needs_no_state() -> None:
    plain = from_anthropic([{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])
    assert "replay_state" not in plain[0].source
    assert to_anthropic(plain) == (None, [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}])


def test_a_message_the_anthropic_model_assembled_exports_its_signature(loopback: Any, anthropic_wire: Any, tmp_path: Path) -> None:
    a = anthropic_wire
    reply = a.sse_reply(
        [
            a.message_start("msg_01"),
            *a.thinking(0, ["I need ", "the file."], SIGNATURE),
            a.block_start(1, {"type": "redacted_thinking", "data": REDACTED}),
            a.block_stop(1),
            *a.text(2, ["Reading", " it."]),
            a.message_delta("end_turn", 30),
            a.MESSAGE_STOP,
        ]
    )
    model = anthropic_model(loopback.base_url)
    messages = assembled(model, loopback, reply, tmp_path)
    _, params = to_anthropic(messages)
    assert params[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I need the file.", "signature": SIGNATURE},
            {"type": "redacted_thinking", "data": REDACTED},
            {"type": "text", "text": "Reading it."},
        ],
    }
    # Imported back, the model sends the same turn it would have sent from its own log.
    again = from_anthropic(params, ids=[m.id for m in messages])
    assert sent_body(model, again)["messages"] == sent_body(model, messages)["messages"]


def test_an_edited_message_does_not_export_a_signature_that_no_longer_fits() -> None:
    imported = from_anthropic(ANTHROPIC_TRANSCRIPT[:2])
    edited = imported[1].with_content([{"type": "reasoning", "text": "changed"}, *imported[1].content[1:]])
    with pytest.raises(ConversionError, match=rf"message 1 \(id {edited.id}\) content\[0\] \(reasoning without the signature"):
        to_anthropic([imported[0], edited])
    _, params = to_anthropic([imported[0], edited], lossy=True)
    assert [block["type"] for block in params[1]["content"]] == ["text", "tool_use"]


# -- Responses -----------------------------------------------------------------------------


def test_imported_response_items_are_sent_by_the_model_as_written() -> None:
    imported = from_response_items(RESPONSES_TRANSCRIPT)
    assert sent_body(responses_model(), imported)["input"] == RESPONSES_TRANSCRIPT
    assert [m.id for m in imported if m.role == "assistant"] == ["rs_1", "rs_2"]
    assert item_ids_of(imported[1]) == ["rs_1", "msg_1", "fc_1"]
    assert imported[1].source["replay_state"]["api"] == "openai-responses"
    assert to_response_items(imported) == RESPONSES_TRANSCRIPT


def test_a_message_the_responses_model_assembled_exports_its_items(loopback: Any, responses_wire: Any, tmp_path: Path) -> None:
    r = responses_wire("resp_1")
    reply = r.sse_reply([*r.created(), *r.reasoning(0, "rs_1", [["I need ", "the file."]], ENCRYPTED), *r.message(1, "msg_1", ["Reading", " it."]), r.completed()])
    model = responses_model(loopback.base_url)
    messages = assembled(model, loopback, reply, tmp_path)
    items = to_response_items(messages)
    assert items[1:] == [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "I need the file."}], "encrypted_content": ENCRYPTED},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Reading it.", "annotations": []}]},
    ]
    again = from_response_items(items, ids=[messages[0].id])
    assert sent_body(model, again)["input"] == sent_body(model, messages)["input"]


# -- other formats -------------------------------------------------------------------------


def test_chat_refuses_state_only_another_api_takes_back_unless_lossy() -> None:
    imported = from_anthropic(ANTHROPIC_TRANSCRIPT[:2])
    with pytest.raises(ConversionError, match=rf"message 1 \(id {imported[1].id}\) source.replay_state \(Anthropic redacted thinking"):
        to_chat_messages(imported)
    assert to_chat_messages(imported, lossy=True)[1]["reasoning_content"] == "I need the file."
    # Item ids alone are no content: a Responses message without encrypted reasoning converts.
    plain = from_response_items([RESPONSES_TRANSCRIPT[2]])
    assert to_chat_messages(plain) == [{"role": "assistant", "content": "Reading it."}]


def test_encrypted_reasoning_that_cannot_be_replayed_is_refused_on_import_unless_lossy() -> None:
    items = [RESPONSES_TRANSCRIPT[1], {"type": "message", "role": "assistant", "content": "no id"}]
    with pytest.raises(ConversionError, match=r"openai_responses item 1 \(encrypted reasoning in a run of items that do not all have ids"):
        from_response_items([RESPONSES_TRANSCRIPT[0], *items])
    [_, answer] = from_response_items([RESPONSES_TRANSCRIPT[0], *items], lossy=True)
    assert "replay_state" not in answer.source and answer.text == "no id"


def test_a_block_the_replay_state_does_not_describe_is_refused_not_dropped() -> None:
    image = {"type": "image", "url": "https://x.test/a.png"}
    imported = from_anthropic(ANTHROPIC_TRANSCRIPT[:2])
    odd = imported[1].with_content([*imported[1].content, image])
    with pytest.raises(ConversionError, match=rf"message 1 \(id {odd.id}\) content\[3\] \('image' in an assistant message\)"):
        to_anthropic([imported[0], odd])
    assert to_anthropic([imported[0], odd], lossy=True) == (None, ANTHROPIC_TRANSCRIPT[:2])
    items = from_response_items(RESPONSES_TRANSCRIPT[:4])
    odd_items = items[1].with_content([*items[1].content, image])
    with pytest.raises(ConversionError, match=r"content\[4\] \('image' in an assistant message\)"):
        to_response_items([items[0], odd_items])
    assert to_response_items([items[0], odd_items], lossy=True) == RESPONSES_TRANSCRIPT[:4]
