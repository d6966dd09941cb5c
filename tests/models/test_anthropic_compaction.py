"""Anthropic's ``compaction`` content block (context management, server-side compaction): a stream
carrying it is read, its summary shown as reasoning, the block kept whole in the replay state, in
order with the other blocks, and sent back in the next request exactly as it came. The event
shapes follow the
``anthropic`` package's beta types (``BetaCompactionBlock``, ``BetaCompactionContentBlockDelta``,
``BetaStopReason``) and how its stream accumulator reads them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dshkit import create_assistant_message, create_user_message
from dshkit.agent import Agent, Tool
from dshkit.interop.anthropic import from_anthropic, to_anthropic
from dshkit.interop.blocks import ConversionError
from dshkit.interop.openai_chat import to_chat_messages
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.anthropic.stream import AnthropicStreamTranslator
from dshkit.models.errors import MalformedResponseError
from dshkit.models.http.sse import ServerSentEvent
from dshkit.session import ModelRequest, Session, project_request

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
SUMMARY = "<summary>The user asked about their notes; notes.md holds the list.</summary>"
ENCRYPTED = "EpcBCkgIBxABGAIiQGNvbXBhY3Rpb24tc3RhdGU="
COMPACTED = {"type": "compaction", "content": SUMMARY, "encrypted_content": ENCRYPTED}


def compaction_events(index: int, start: dict[str, Any] | None = None, *deltas: dict[str, Any]) -> list[dict[str, Any]]:
    """A compaction block: its start (no summary yet), the delta with the summary, its stop."""
    block = start if start is not None else {"type": "compaction", "content": None, "encrypted_content": None}
    sent = deltas or ({"type": "compaction_delta", "content": SUMMARY, "encrypted_content": ENCRYPTED},)
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        *[{"type": "content_block_delta", "index": index, "delta": delta} for delta in sent],
        {"type": "content_block_stop", "index": index},
    ]


def text_events(index: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": index},
    ]


START = {"type": "message_start", "message": {"id": "msg_c1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 9, "output_tokens": 1}}}


def stop(reason: str) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None}, "usage": {"output_tokens": 5}}, {"type": "message_stop"}]


def translate(*payloads: dict[str, Any]) -> list[dict[str, Any]]:
    translator = AnthropicStreamTranslator()
    chunks: list[dict[str, Any]] = []
    for payload in payloads:
        chunks += translator.feed(ServerSentEvent(event=payload["type"], data=json.dumps(payload)))  # type: ignore[arg-type]
    return chunks + translator.finish()  # type: ignore[operator]


# -- the stream translator ---------------------------------------------------------------------


def test_a_compaction_block_is_kept_whole_in_order_and_its_summary_is_reasoning() -> None:
    chunks = translate(START, *compaction_events(0), *text_events(1, "Hi."), *stop("end_turn"))
    assert chunks[:2] == [{"type": "reasoning_delta", "text": SUMMARY}, {"type": "text_delta", "text": "Hi."}]
    assert chunks[-1] == {
        "type": "finish",
        "reason": "stop",
        "replay_state": {
            "api": "anthropic-messages",
            "id": "msg_c1",
            "blocks": [{"type": "compaction", "length": len(SUMMARY), "block": COMPACTED}, {"type": "text", "length": 3}],
        },
    }


def test_a_pause_after_compaction_ends_the_turn_with_the_block_alone() -> None:
    chunks = translate(START, *compaction_events(0), *stop("compaction"))
    assert [c["type"] for c in chunks] == ["reasoning_delta", "usage", "finish"]
    assert chunks[-1]["reason"] == "stop"
    assert chunks[-1]["replay_state"]["blocks"] == [{"type": "compaction", "length": len(SUMMARY), "block": COMPACTED}]


def test_the_blocks_other_keys_and_a_failed_compaction_are_kept_as_they_came() -> None:
    # Keys the block starts with stay in their order; each delta's fields replace the block's.
    start = {"type": "compaction", "content": "", "signature": "", "tool_changes": [], "encrypted_content": None}
    deltas = (
        {"type": "compaction_delta", "content": "draft", "encrypted_content": "old"},
        {"type": "compaction_delta", "content": SUMMARY, "encrypted_content": ENCRYPTED},
        {"type": "signature_delta", "signature": "sig-C"},
    )
    chunks = translate(START, *compaction_events(0, start, *deltas), *stop("end_turn"))
    assert chunks[0] == {"type": "reasoning_delta", "text": SUMMARY}  # the summary once, as it ended
    [entry] = chunks[-1]["replay_state"]["blocks"]
    assert list(entry["block"].items()) == [("type", "compaction"), ("content", SUMMARY), ("signature", "sig-C"), ("tool_changes", []), ("encrypted_content", ENCRYPTED)]
    # A compaction that produced no summary (content null) shows nothing and is kept as it came.
    failed = translate(START, *compaction_events(0, None, {"type": "compaction_delta", "content": None}), *stop("end_turn"))
    assert [c["type"] for c in failed] == ["usage", "finish"]
    assert failed[-1]["replay_state"]["blocks"] == [{"type": "compaction", "length": 0, "block": {"type": "compaction", "content": None, "encrypted_content": None}}]


def test_malformed_compaction_events_name_what_was_wrong() -> None:
    with pytest.raises(MalformedResponseError, match=r"event 3: a compaction block's 'content' must be a str or null"):
        translate(START, *compaction_events(0, None, {"type": "compaction_delta", "content": 42}))
    with pytest.raises(MalformedResponseError, match=r"event 2: a compaction block's 'encrypted_content' must be a str or null"):
        translate(START, {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", "encrypted_content": 7}})
    with pytest.raises(MalformedResponseError, match=r"delta 'compaction_delta' does not fit block 0 \(text\)"):
        translate(START, text_events(0, "x")[0], {"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", "content": SUMMARY}})


# -- an agent turn over HTTP -------------------------------------------------------------------


def reply(anthropic_wire: Any, *payloads: dict[str, Any]) -> Any:
    return anthropic_wire.sse_reply([anthropic_wire.event(payload) for payload in payloads])


def tool_use_events(index: int) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": "toolu_c1", "name": "read_file", "input": {}}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": '{"path": "notes.md"}'}},
        {"type": "content_block_stop", "index": index},
    ]


EXPECTED_TURN = {
    "role": "assistant",
    "content": [COMPACTED, {"type": "text", "text": "Reading it."}, {"type": "tool_use", "id": "toolu_c1", "name": "read_file", "input": {"path": "notes.md"}}],
}


def agent_run(model: AnthropicModel, path: Path, *prompts: str) -> None:
    async def read_file(arguments: dict[str, Any], ctx: Any) -> str:
        return {"notes.md": "buy milk"}.get(arguments["path"], "no such file")

    async def main() -> None:
        session = Session.create(path)
        agent = Agent(model, session=session, tools=[Tool("read_file", "Read a file", SCHEMA, read_file)], config={"context_management": {"edits": [{"type": "compact_20260112"}]}})
        async with model:
            for prompt in prompts:
                agent.followup(create_user_message(prompt, source={"kind": "user"}))
                await agent.when_idle()
        session.close()

    asyncio.run(main())


def make(loopback: Any) -> AnthropicModel:
    beta = {"anthropic-beta": "compact-2026-01-12"}
    return AnthropicModel("claude-test", Provider(loopback.base_url, api_key="sk-ant-test", headers=beta, timeout=5.0), settings={"max_tokens": 1024})


def test_an_agent_turn_sends_the_compaction_block_back_as_it_came(loopback: Any, anthropic_wire: Any, tmp_path: Path) -> None:
    model = make(loopback)
    loopback.reply(
        reply(anthropic_wire, START, *compaction_events(0), *text_events(1, "Reading it."), *tool_use_events(2), *stop("tool_use")),
        anthropic_wire.sse_reply(anthropic_wire.answer("Buy milk.", message_id="msg_c2")),
    )
    agent_run(model, tmp_path / "log.jsonl", "What do my notes say?")
    first, second = loopback.received
    assert first.headers["anthropic-beta"] == "compact-2026-01-12"
    assert second.json["messages"][1] == EXPECTED_TURN
    # Byte for byte: the block's keys in the order the API sent them.
    assert json.dumps(COMPACTED, separators=(",", ":")).encode() in second.body
    with Session.open(tmp_path / "log.jsonl", read_only=True) as session:
        messages = session.messages()
        assert messages[1].content[0] == {"type": "reasoning", "text": SUMMARY}  # the summary is no answer text
        assert [block["type"] for block in messages[1].content[1:]] == ["text", "tool_call"]
        seqs = [e.seq - 1 for i, e in enumerate(session.events) if e.type == "assistant/chunk" and session.events[i - 1].type != "assistant/chunk"]
        assert model.request_body(project_request(session, at_seq=seqs[1])) == second.body

    # The converters keep the block where the model does: exported as sent, imported back to the same body.
    _, params = to_anthropic(messages)
    assert params[1] == EXPECTED_TURN
    again = from_anthropic(params, ids=[m.id for m in messages])
    assert model.request_body(ModelRequest(again)) == model.request_body(ModelRequest(messages))
    with pytest.raises(ConversionError, match=r"source.replay_state \(an Anthropic compaction block"):
        to_chat_messages(messages)
    anthropic = pytest.importorskip("anthropic")
    from pydantic import TypeAdapter

    TypeAdapter(list[anthropic.types.beta.BetaMessageParam]).validate_python(params, strict=True)


def test_a_pause_after_compaction_ends_the_turn_and_the_block_goes_back_with_the_next(loopback: Any, anthropic_wire: Any, tmp_path: Path) -> None:
    model = make(loopback)
    loopback.reply(
        reply(anthropic_wire, START, *compaction_events(0), *stop("compaction")),
        anthropic_wire.sse_reply(anthropic_wire.answer("Go on then.", message_id="msg_c2")),
    )
    agent_run(model, tmp_path / "log.jsonl", "Summarise first.", "Continue.")
    _, second = loopback.received
    assert second.json["messages"][1:] == [{"role": "assistant", "content": [COMPACTED]}, {"role": "user", "content": [{"type": "text", "text": "Continue."}]}]
    with Session.open(tmp_path / "log.jsonl", read_only=True) as session:
        paused = session.messages()[1]
        assert paused.role == "assistant" and paused.content == ({"type": "reasoning", "text": SUMMARY},)
        assert [e.data["reason"] for e in session.events if e.type == "turn/end"][0] == {"kind": "completed"}


@pytest.mark.parametrize(
    "entry",
    [
        {"type": "compaction", "length": 2, "block": {"type": "text", "text": "hi"}},  # no compaction block
        {"type": "compaction", "length": 2, "block": {"type": "compaction", "content": "other"}},  # the summary was edited
        {"type": "compaction", "length": -1, "block": {"type": "compaction", "content": ""}},
    ],
)
def test_a_compaction_entry_that_does_not_fit_the_content_is_not_used(entry: dict[str, Any]) -> None:
    state = {"api": "anthropic-messages", "blocks": [entry, {"type": "text", "length": 2}]}
    message = create_assistant_message([{"type": "reasoning", "text": "ok"}, {"type": "text", "text": "hi"}], provider="anthropic", model="m", replay_state=state)
    body = json.loads(AnthropicModel("m", Provider("https://api.anthropic.com", api_key="k")).request_body(ModelRequest((message,))))
    assert body["messages"] == [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]


def test_the_converters_keep_a_failed_compaction_and_refuse_a_bad_one() -> None:
    failed = {"type": "compaction", "content": None, "encrypted_content": ENCRYPTED}
    transcript = [{"role": "user", "content": [{"type": "text", "text": "Go on."}]}, {"role": "assistant", "content": [failed, {"type": "text", "text": "Done."}]}]
    imported = from_anthropic(transcript)
    assert imported[1].to_dict()["content"] == [{"type": "text", "text": "Done."}]  # nothing to show
    assert imported[1].source["replay_state"]["blocks"][0] == {"type": "compaction", "length": 0, "block": failed}
    assert to_anthropic(imported) == (None, transcript)
    with pytest.raises(ConversionError, match=r"Anthropic item 0 content\[0\]: a compaction block's 'content' must be a str or null"):
        from_anthropic([{"role": "assistant", "content": [{"type": "compaction", "content": 42}]}])
