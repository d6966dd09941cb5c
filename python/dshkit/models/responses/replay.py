"""The OpenAI Responses replay state: its format, and how whole output items become it.

An assistant message's ``source.replay_state`` holds what the Responses API needs back::

    {"api": "openai-responses", "id"?: "resp_...", "items": [entry, ...]}   # the output order

    {"type": "reasoning", "id": "rs_...", "summary": [n, ...], "content"?: [n, ...],
     "encrypted_content"?: str}                      # lengths of the reasoning text's pieces
    {"type": "message", "id": "msg_...", "parts": [{"type": "output_text" | "refusal", "length": n}, ...]}
    {"type": "function_call", "id"?: "fc_...", "call_id": str}

An item entry or a message part may carry ``"extra"``: the item's or part's other keys (a
``status`` other than ``completed``, non-empty ``annotations``, ``logprobs``), sent back as they
were. `ResponsesStreamTranslator` writes the state from a stream; `item_entry` from one whole
output item (`dshkit.interop.openai_responses` imports with it);
`dshkit.models.responses_projection.replayed_items` rebuilds the items from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.models.responses.projection import REPLAY_API

__all__ = ["ASSISTANT_ITEMS", "REPLAY_API", "item_entry", "replay_state"]

ASSISTANT_ITEMS = frozenset(("reasoning", "message", "function_call"))

_MAPPED = {
    "reasoning": frozenset(("type", "id", "summary", "content", "encrypted_content")),
    "message": frozenset(("type", "id", "role", "content")),
    "function_call": frozenset(("type", "id", "call_id", "name", "arguments")),
}
# What the projection writes by itself: equal values are not kept as extra.
_DEFAULTS: dict[str, dict[str, Any]] = {"message": {"status": "completed"}, "output_text": {"annotations": []}}


def item_entry(item: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One whole output item as ``(dshkit blocks, replay entry)``: a reasoning block per summary
    (and reasoning-text) part, a text block per message part, one tool call. `ValueError` names
    what is wrong."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind not in _MAPPED:
        raise ValueError(f"{kind!r} is not an assistant output item (reasoning, message, function_call)")
    item_id = item.get("id")
    if item_id is not None and not isinstance(item_id, str):
        raise ValueError("the item 'id' must be a str")
    blocks: list[dict[str, Any]] = []
    entry: dict[str, Any] = {"type": kind, "id": item_id}
    if kind == "reasoning":
        contents = _texts(item.get("content"), "content", "text")
        summaries = _texts(item.get("summary"), "summary", "text")
        blocks = [{"type": "reasoning", "text": text} for text in (*contents, *summaries)]
        entry["summary"] = [len(text) for text in summaries]
        if item.get("content"):
            entry["content"] = [len(text) for text in contents]
        if item.get("encrypted_content") is not None:
            entry["encrypted_content"] = item["encrypted_content"]
    elif kind == "message":
        if item.get("role", "assistant") != "assistant":
            raise ValueError(f"a message item of role {item.get('role')!r} is not assistant output")
        content = item.get("content")
        parts = [{"type": "output_text", "text": content}] if isinstance(content, str) else list(content or ())
        entry["parts"] = []
        for position, part in enumerate(parts):
            part_kind = part.get("type") if isinstance(part, Mapping) else None
            key = "refusal" if part_kind == "refusal" else "text"
            if part_kind not in ("output_text", "refusal") or not isinstance(part.get(key), str):
                raise ValueError(f"content[{position}]: expected an output_text or refusal part with a str {key!r}")
            blocks.append({"type": "text", "text": part[key]})
            recorded: dict[str, Any] = {"type": part_kind, "length": len(part[key])}
            _keep_extra(recorded, part, frozenset(("type", key)), _DEFAULTS.get(part_kind, {}))
            entry["parts"].append(recorded)
    else:
        call_id, name, arguments = item.get("call_id"), item.get("name"), item.get("arguments", "")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise ValueError("a function_call needs a non-empty str 'call_id' and 'name'")
        if not isinstance(arguments, str):
            raise ValueError("a function_call's 'arguments' must be the JSON text (str)")
        blocks = [{"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}]
        entry["call_id"] = call_id
        if item_id is None:
            del entry["id"]
    _keep_extra(entry, item, _MAPPED[kind], _DEFAULTS.get(kind, {}))
    return blocks, entry


def replay_state(layout: list[dict[str, Any]], *, response_id: str | None = None) -> dict[str, Any]:
    """The ``source.replay_state`` mapping for item entries in output order."""
    state: dict[str, Any] = {"api": REPLAY_API}
    if response_id is not None:
        state["id"] = response_id
    state["items"] = layout
    return state


def _texts(parts: Any, where: str, key: str) -> list[str]:
    texts = []
    for position, part in enumerate(parts or ()):
        if not isinstance(part, Mapping) or not isinstance(part.get(key), str):
            raise ValueError(f"{where}[{position}]: a part without a str {key!r}")
        texts.append(part[key])
    return texts


def _keep_extra(entry: dict[str, Any], source: Mapping[str, Any], mapped: frozenset[str], defaults: Mapping[str, Any]) -> None:
    extra = {k: v for k, v in source.items() if k not in mapped and not (k in defaults and v == defaults[k])}
    if extra:
        entry["extra"] = extra
