"""Anthropic Messages API params <-> dshkit messages.

`to_anthropic` gives ``(system, messages)`` for ``client.messages.create(system=..., messages=...)``
(plain dicts that validate as the ``anthropic`` package's ``MessageParam``); `from_anthropic`
imports them. Anthropic messages have no id field: the dshkit id is not written on export, and an
import mints ids unless ``ids=`` gives them.

- Assistant turns use the replay state `dshkit.models.AnthropicModel` uses (one representation):
  an imported assistant message gets ``source.replay_state`` from
  `dshkit.models.anthropic.replay.block_entry` (thinking signatures, ``redacted_thinking`` data,
  the block order, extra block keys such as ``citations``), and an assistant message whose state
  fits its content is exported by `dshkit.models.anthropic_projection.replayed_blocks`, exactly
  as the model sends it. So a transcript imported here goes back to the API byte for byte
  through either path, and a message the model produced exports with its signatures.
- ``thinking`` is a dshkit ``reasoning`` block (its signature in the state); ``redacted_thinking``
  has no block (only the state); ``compaction`` (context management's summary) is kept whole in
  the state, its summary a ``reasoning`` block. Reasoning without a fitting state cannot be
  sent: refused.
- ``tool_use`` is a ``tool_call`` (its ``input`` object dumped to JSON text, and parsed back);
  ``tool_result`` blocks become one dshkit tool-result message each, and a run of consecutive
  tool-result messages is merged back into one user message.
- Keys a user block carries beyond those (``cache_control``, ...) are kept in the dshkit block
  under ``"anthropic"`` and written back.
No SDK is needed: the dicts are built directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dshkit.interop.blocks import (
    ConversionError,
    IdsArgument,
    ItemIds,
    MessageBuilder,
    Refusal,
    arguments_object,
    extras,
    model_source,
    system_source,
    text_block,
    tool_result_block,
    tool_result_parts,
    tool_source,
    user_source,
)
from dshkit.llm import Message, thaw
from dshkit.session.attachments import Attachments, inline_attachments
from dshkit.models.anthropic.projection import replayed_blocks
from dshkit.models.anthropic.replay import ASSISTANT_BLOCKS, MAPPED_KEYS, block_entry, replay_state
from dshkit.models.projection_parts import UnsupportedContentError

__all__ = ["from_anthropic", "native_replay_state", "to_anthropic"]

FORMAT = "anthropic"
EXTRA = "anthropic"  # the dshkit block key holding a block's other Anthropic keys


# -- export --------------------------------------------------------------------------------


def to_anthropic(
    messages: Iterable[Message], *, lossy: bool = False, attachments: Attachments | None = None
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """``(system, messages)``: leading system messages become `system` (a str, or text blocks).

    Attachment blocks go inline (base64 sources), their bytes read from `attachments`."""
    refuse = Refusal("Anthropic", lossy)
    messages = inline_attachments(messages, attachments)
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    merging_results = False
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"message {index}: expected a dshkit Message, not {type(message).__name__}")
        if message.role == "system":
            if out:
                refuse(index, message.id, "(a system message after the conversation started: Anthropic has one system prompt)")
                continue
            system.extend(_block(index, message, position, block, refuse, allowed=("text",)) or {} for position, block in enumerate(message.content))
            continue
        if message.role == "assistant":
            out.append({"role": "assistant", "content": _assistant_content(index, message, refuse)})
            merging_results = False
            continue
        blocks = [_block(index, message, p, b, refuse, allowed=("text", "image", "tool_result")) for p, b in enumerate(message.content)]
        content = [block for block in blocks if block]
        is_result = message.source.get("kind") == "tool"
        if is_result and merging_results:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": "user", "content": content})
        merging_results = is_result
    system = [block for block in system if block]
    if not system:
        return None, out
    if len(system) == 1 and set(system[0]) == {"type", "text"}:
        return system[0]["text"], out
    return system, out


def _assistant_content(index: int, message: Message, refuse: Refusal) -> list[dict[str, Any]]:
    """The blocks `AnthropicModel` would send when the replay state fits, else block by block."""
    known = [block for block in message.content if block.get("type") in ("text", "reasoning", "tool_call")]
    if len(known) < len(message.content):  # blocks no replay state describes (the projection would skip them)
        for position, block in enumerate(message.content):
            if block.get("type") not in ("text", "reasoning", "tool_call"):
                refuse(index, message.id, f"content[{position}] ({block.get('type')!r} in an assistant message)")
        message = message.with_content(known)
    try:
        replayed = replayed_blocks(message)
    except UnsupportedContentError:
        replayed = None  # e.g. edited arguments that are no JSON object: refused block by block below
    if replayed is not None:
        return replayed
    blocks = [_block(index, message, p, b, refuse, allowed=("text", "reasoning", "tool_call")) for p, b in enumerate(message.content)]
    return [block for block in blocks if block]


def _image(block: Mapping[str, Any]) -> dict[str, Any] | None:
    if isinstance(block.get("url"), str):
        return {"type": "url", "url": block["url"]}
    if isinstance(block.get("media_type"), str) and isinstance(block.get("data"), str):
        return {"type": "base64", "media_type": block["media_type"], "data": block["data"]}
    return None


def _block(
    index: int, message: Message, position: int, block: Mapping[str, Any], refuse: Refusal, *, allowed: Sequence[str]
) -> dict[str, Any] | None:
    kind = block.get("type")
    where = f"content[{position}]"
    out: dict[str, Any] | None = None
    if kind not in allowed:
        refuse(index, message.id, f"{where} ({kind!r} in a {message.role} message)")
        return None
    if kind == "text":
        out = {"type": "text", "text": block["text"]}
    elif kind == "image":
        source = _image(block)
        if source is None:
            refuse(index, message.id, f"{where} (an image without url or media_type + data)")
            return None
        out = {"type": "image", "source": source}
    elif kind == "reasoning":
        # Reached only when the message has no Anthropic replay state that fits its content.
        refuse(index, message.id, f"{where} (reasoning without the signature Anthropic requires: no fitting source.replay_state)")
        return None
    elif kind == "tool_call":
        arguments = arguments_object(block["arguments"])
        if arguments is None:
            refuse(index, message.id, f"{where} (tool call arguments that are not a JSON object)")
            arguments = {}
        out = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": arguments}
    elif kind == "tool_result":
        inner = [_block(index, message, position, part, refuse, allowed=("text", "image")) for part in tool_result_parts(block)]
        out = {"type": "tool_result", "tool_use_id": block["tool_call_id"], "content": [part for part in inner if part]}
        if block.get("is_error"):
            out["is_error"] = True
    kept = block.get(EXTRA)
    if kept:
        out = {**thaw(kept), **out}  # type: ignore[dict-item]
    return out


# -- import --------------------------------------------------------------------------------

_MAPPED = {
    "text": frozenset(("type", "text")),
    "image": frozenset(("type", "source")),
    "tool_result": frozenset(("type", "tool_use_id", "content", "is_error")),
}


def from_anthropic(
    messages: Iterable[Mapping[str, Any]],
    *,
    system: str | Sequence[Mapping[str, Any]] | None = None,
    ids: IdsArgument = None,
    lossy: bool = False,
) -> tuple[Message, ...]:
    """Import Anthropic message params; a `system` prompt becomes a leading system message."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    if system is not None:
        blocks = [text_block(system)] if isinstance(system, str) else [_import_block(-1, p, b, refuse) for p, b in enumerate(system)]
        builder.add(ItemIds(builder, system, -1).take(), "system", [b for b in blocks if b], system_source(FORMAT))
    for index, raw in enumerate(messages):
        item = raw if isinstance(raw, Mapping) else getattr(raw, "model_dump", lambda **_: None)(exclude_none=True)
        if not isinstance(item, Mapping):
            raise TypeError(f"Anthropic item {index}: expected a mapping, not {type(raw).__name__}")
        content = item.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        item_ids = ItemIds(builder, raw, index)
        role = item.get("role")
        if role == "assistant":
            content, state = _import_assistant(index, parts, refuse)
            builder.add(item_ids.take(), "assistant", content, model_source(FORMAT, None, state))
        elif role == "user":
            _import_user(builder, item_ids, index, parts, refuse)
        else:
            raise ConversionError(f"Anthropic item {index}: role {role!r} cannot be imported (user, assistant)")
    return tuple(builder.messages)


def _import_assistant(index: int, parts: list[Any], refuse: Refusal) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Content and replay state (`block_entry`, as the model records them); the state only when
    it holds something the blocks do not (a signature, redacted thinking, a compaction block,
    extra keys)."""
    content: list[dict[str, Any]] = []
    layout: list[dict[str, Any]] = []
    for position, raw in enumerate(parts):
        part = _mapping(raw)
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind not in ASSISTANT_BLOCKS:
            refuse.foreign(index, f"content[{position}] ({kind!r} block in an assistant message)")
            continue
        try:
            block, entry = block_entry(part)
        except ValueError as error:
            raise ConversionError(f"Anthropic item {index} content[{position}]: {error}") from None
        if block is not None:
            content.append(block)
        layout.append(entry)
    needed = any(entry["type"] in ("thinking", "redacted_thinking", "compaction") or "extra" in entry for entry in layout)
    return content, replay_state(layout) if needed else None


def native_replay_state(blocks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The Anthropic replay state of an assistant turn that another library keeps as native
    Messages API blocks (langchain-anthropic's content, pydantic-ai's parts), or `None` when they
    hold no thinking or not only such blocks. Keys beyond Anthropic's are the holder's (langchain's
    ``index``), not the API's: they are not kept."""
    entries = []
    for block in blocks:
        if block.get("type") not in MAPPED_KEYS:
            return None
        try:
            _, entry = block_entry(block)
        except ValueError:
            return None
        entry.pop("extra", None)
        entries.append(entry)
    if not any(entry["type"] in ("thinking", "redacted_thinking") for entry in entries):
        return None
    return replay_state(entries)


def _mapping(part: Any) -> Any:
    return part.model_dump(exclude_none=True) if not isinstance(part, Mapping) and hasattr(part, "model_dump") else part


def _import_user(builder: MessageBuilder, item_ids: ItemIds, index: int, parts: list[Any], refuse: Refusal) -> None:
    others: list[dict[str, Any]] = []
    for position, part in enumerate(parts):
        block = _import_block(index, position, part, refuse)
        if block is None:
            continue
        if block["type"] == "tool_result":
            if others:  # a text before the results stays before them
                builder.add(item_ids.take(), "user", others, user_source())
                others = []
            builder.add(item_ids.take(), "user", [block], tool_source(block["tool_call_id"]))
        else:
            others.append(block)
    if others or not parts:
        builder.add(item_ids.take(), "user", others, user_source())


def _import_block(index: int, position: int, part: Any, refuse: Refusal) -> dict[str, Any] | None:
    part = _mapping(part)
    kind = part.get("type") if isinstance(part, Mapping) else None
    mapped = _MAPPED.get(kind)  # type: ignore[arg-type]
    if mapped is None:
        refuse.foreign(index, f"content[{position}] ({kind!r} block)")
        return None
    kept = extras(part, mapped)
    extra = {EXTRA: kept} if kept else {}
    if kind == "text":
        return text_block(part["text"], **extra)
    if kind == "image":
        source = part["source"]
        if source.get("type") == "base64":
            return {"type": "image", "media_type": source["media_type"], "data": source["data"], **extra}
        if source.get("type") == "url":
            return {"type": "image", "url": source["url"], **extra}
        refuse.foreign(index, f"content[{position}] (an image source of type {source.get('type')!r})")
        return None
    inner = part.get("content", ())
    inner_parts = [{"type": "text", "text": inner}] if isinstance(inner, str) else list(inner or ())
    blocks = [_import_block(index, position, p, refuse) for p in inner_parts]
    return tool_result_block(part["tool_use_id"], [b for b in blocks if b], bool(part.get("is_error", False)), **extra)
