"""The Anthropic replay state: its format, and how whole content blocks become it.

An assistant message's ``source.replay_state`` holds what the Messages API needs back and the
dshkit blocks do not say::

    {"api": "anthropic-messages", "id"?: "msg_...", "blocks": [entry, ...]}   # the provider's order

    {"type": "thinking", "length": n, "signature": str}     # n characters of the reasoning text
    {"type": "redacted_thinking", "data": str}
    {"type": "text", "length": n}                            # n characters of the text
    {"type": "tool_use", "id": call_id}
    {"type": "compaction", "length": n, "block": {...}}     # the whole block, as the API sent it

Any entry may carry ``"extra"``: the block's other keys (``cache_control``, ``citations``), sent
back as they were. A ``compaction`` block (context management: the server's summary of the
context before it, ``content``, and its ``encrypted_content``) is kept whole, its keys in their
order, and goes back unchanged; its summary is also n characters of the reasoning text (shown,
and checked to still fit before the block is sent back). `AnthropicStreamTranslator` writes
the state from a stream; `block_entry` one whole block of a response or a transcript
(`dshkit.interop.anthropic` imports with it);
`dshkit.models.anthropic_projection.replayed_blocks` rebuilds the blocks from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dshkit.models.anthropic.projection import REPLAY_API

__all__ = ["ASSISTANT_BLOCKS", "MAPPED_KEYS", "REPLAY_API", "block_entry", "compaction_block", "replay_state"]

MAPPED_KEYS = {
    "thinking": frozenset(("type", "thinking", "signature")),
    "redacted_thinking": frozenset(("type", "data")),
    "text": frozenset(("type", "text")),
    "tool_use": frozenset(("type", "id", "name", "input")),
}
"""Per assistant block type, the keys the dshkit block or the entry holds; others go to ``extra``."""

ASSISTANT_BLOCKS = frozenset((*MAPPED_KEYS, "compaction"))
"""Every assistant content block type the replay state can hold (``compaction`` kept whole)."""


def block_entry(block: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """One whole assistant content block as ``(dshkit block or None, replay entry)``.

    ``redacted_thinking`` has no dshkit block (it has no text), nor has a ``compaction`` block
    without a summary (its summary is a ``reasoning`` block); a ``tool_use`` input object is
    dumped with `json.dumps` (its arguments text). `ValueError` names what is wrong.
    """
    kind = block.get("type")
    if kind == "compaction":
        whole = compaction_block(block)
        summary = whole.get("content") or ""
        return ({"type": "reasoning", "text": summary} if summary else None), {"type": kind, "length": len(summary), "block": whole}
    if kind not in MAPPED_KEYS:
        raise ValueError(f"{kind!r} is not an assistant content block (thinking, redacted_thinking, text, tool_use, compaction)")
    dshkit_block: dict[str, Any] | None
    if kind == "thinking":
        thinking, signature = block.get("thinking"), block.get("signature")
        if not isinstance(thinking, str) or not isinstance(signature, str):
            raise ValueError("a thinking block needs a str 'thinking' and a str 'signature'")
        dshkit_block = {"type": "reasoning", "text": thinking}
        entry: dict[str, Any] = {"type": "thinking", "length": len(thinking), "signature": signature}
    elif kind == "redacted_thinking":
        if not isinstance(block.get("data"), str):
            raise ValueError("a redacted_thinking block needs a str 'data'")
        dshkit_block, entry = None, {"type": "redacted_thinking", "data": block["data"]}
    elif kind == "text":
        if not isinstance(block.get("text"), str):
            raise ValueError("a text block needs a str 'text'")
        dshkit_block, entry = {"type": "text", "text": block["text"]}, {"type": "text", "length": len(block["text"])}
    else:
        call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise ValueError("a tool_use block needs a non-empty str 'id' and 'name'")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise ValueError("a tool_use 'input' must be a JSON object")
        text = json.dumps(dict(arguments) if arguments is not None else {})
        dshkit_block = {"type": "tool_call", "id": call_id, "name": name, "arguments": text}
        entry = {"type": "tool_use", "id": call_id}
    extra = {key: value for key, value in block.items() if key not in MAPPED_KEYS[kind]}
    if extra:
        entry["extra"] = extra
    return dshkit_block, entry


def compaction_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A ``compaction`` block checked (``content`` and ``encrypted_content`` a str or null when
    present) and copied whole, its keys in their order."""
    for key in ("content", "encrypted_content"):
        if block.get(key) is not None and not isinstance(block[key], str):
            raise ValueError(f"a compaction block's {key!r} must be a str or null")
    return dict(block)


def replay_state(layout: list[dict[str, Any]], *, message_id: str | None = None) -> dict[str, Any]:
    """The ``source.replay_state`` mapping for block entries in the provider's order."""
    state: dict[str, Any] = {"api": REPLAY_API}
    if message_id is not None:
        state["id"] = message_id
    state["blocks"] = layout
    return state
