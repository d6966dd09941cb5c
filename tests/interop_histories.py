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

    `reasoning`: ``None`` (none), ``"plain"`` (one block); `signed` adds an Anthropic signature;
    `responses_items` gives reasoning the Responses item it needs to replay.
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
            block: dict[str, Any] = {"type": "reasoning", "text": draw(texts)}
            if signed:
                block["signature"] = draw(texts)
            if responses_items:
                counter += 1
                block["openai_item"] = {"type": "reasoning", "id": f"rs_{counter}", "encrypted_content": draw(texts)}
                block["openai_part"] = {"type": "summary_text"}
            blocks.append(block)
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(texts)})
        calls = []
        for _ in range(draw(st.integers(0 if blocks else 1, 2))):
            counter += 1
            call_id = f"call_{counter}"
            calls.append(call_id)
            blocks.append({"type": "tool_call", "id": call_id, "name": draw(names), "arguments": json.dumps(draw(json_objects))})
        messages.append(dshkit.create_assistant_message(blocks, provider="p", model="m"))
        for call_id in calls:
            messages.append(dshkit.create_tool_result_message(call_id, [{"type": "text", "text": draw(texts)}], is_error=False))
    return messages


def essence(message: dshkit.Message) -> tuple[Any, ...]:
    """What every round trip keeps: id, role, and each block without format-specific extras."""
    return (message.id, message.role, tuple(_block(block) for block in message.content))


def _block(block: Mapping[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in block.items() if key not in SOURCE_KEYS}
    if "content" in kept and not isinstance(kept["content"], str):
        kept["content"] = tuple(_block(inner) for inner in kept["content"])
    return kept
