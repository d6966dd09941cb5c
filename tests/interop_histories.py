"""Hypothesis strategies for the interop tests: dshkit histories a converter must carry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

import dshkit

SOURCE_KEYS = ("openai_item", "openai_part", "anthropic")

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
names = st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True)
json_objects = st.dictionaries(names, st.one_of(st.integers(-1000, 1000), texts, st.booleans(), st.none()), max_size=3)


@st.composite
def histories(draw: st.DrawFn, *, reasoning: str | None = "plain", signed: bool = False, responses_items: bool = False, images: bool = True) -> list[dshkit.Message]:
    """A valid conversation: system, then turns of user text, assistant blocks, tool results.

    `reasoning`: ``None`` (none), ``"plain"`` (one block); `signed` gives an assistant message
    with reasoning the Anthropic replay state the model records (its signature); `responses_items`
    the Responses replay state (item ids, encrypted reasoning) it needs to replay.
    """
    messages: list[dshkit.Message] = []
    if draw(st.booleans()):
        messages.append(dshkit.create_message(role="system", content=draw(texts), source={"kind": "plugin", "plugin": "t"}))
    counter = 0
    for _turn in range(draw(st.integers(1, 3))):
        user_blocks: list[dict[str, Any]] = [{"type": "text", "text": draw(texts)} for _ in range(draw(st.integers(1, 2)))]
        if images and draw(st.booleans()):
            user_blocks.append({"type": "image", "media_type": "image/png", "data": "aGk="})
        messages.append(dshkit.create_user_message(user_blocks, source={"kind": "user"}))
        blocks: list[dict[str, Any]] = []
        if reasoning and draw(st.booleans()):
            blocks.append({"type": "reasoning", "text": draw(texts)})
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(texts)})
        calls = []
        for _ in range(draw(st.integers(0 if blocks else 1, 2))):
            counter += 1
            call_id = f"call_{counter}"
            calls.append(call_id)
            blocks.append({"type": "tool_call", "id": call_id, "name": draw(names), "arguments": json.dumps(draw(json_objects))})
        state = None
        if blocks[0]["type"] == "reasoning" and signed:
            # As AnthropicModel records a response: it never yields an empty text block.
            blocks = [b for b in blocks if b["type"] != "text" or b["text"]]
            state = {"api": "anthropic-messages", "blocks": [_anthropic_entry(b, draw(texts)) for b in blocks]}
        elif blocks[0]["type"] == "reasoning" and responses_items:
            counter += 1
            state = {"api": "openai-responses", "id": f"resp_{counter}", "items": [_responses_entry(b, counter, draw(texts)) for b in blocks]}
        messages.append(dshkit.create_assistant_message(blocks, provider="p", model="m", replay_state=state))
        for call_id in calls:
            messages.append(dshkit.create_tool_result_message(call_id, [{"type": "text", "text": draw(texts)}], is_error=False))
    return messages


def _anthropic_entry(block: Mapping[str, Any], signature: str) -> dict[str, Any]:
    if block["type"] == "reasoning":
        return {"type": "thinking", "length": len(block["text"]), "signature": signature}
    if block["type"] == "text":
        return {"type": "text", "length": len(block["text"])}
    return {"type": "tool_use", "id": block["id"]}


def _responses_entry(block: Mapping[str, Any], number: int, encrypted: str) -> dict[str, Any]:
    if block["type"] == "reasoning":
        return {"type": "reasoning", "id": f"rs_{number}", "summary": [len(block["text"])], "encrypted_content": encrypted}
    if block["type"] == "text":
        return {"type": "message", "id": f"msg_{number}", "parts": [{"type": "output_text", "length": len(block["text"])}]}
    return {"type": "function_call", "id": f"fc_{block['id']}", "call_id": block["id"]}


def essence(message: dshkit.Message) -> tuple[Any, ...]:
    """What every round trip keeps: id, role, and each block without format-specific extras."""
    return (message.id, message.role, tuple(_block(block) for block in message.content))


def _block(block: Mapping[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in block.items() if key not in SOURCE_KEYS}
    if "content" in kept and not isinstance(kept["content"], str):
        kept["content"] = tuple(_block(inner) for inner in kept["content"])
    return kept
