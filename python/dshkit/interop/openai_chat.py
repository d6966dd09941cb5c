"""OpenAI Chat Completions message params <-> dshkit messages.

`to_chat_messages` gives the ``messages`` array of a Chat Completions request (plain dicts that
validate as the ``openai`` package's ``ChatCompletionMessageParam``); `from_chat_messages` imports
one. Chat messages have no id field: the dshkit id is not written on export, and an import mints
ids unless ``ids=`` gives them. Reasoning travels in ``reasoning_content`` (the DeepSeek field).
Tool results are ``role: "tool"`` messages; tool-call arguments stay the raw JSON text.
Replay state only another API takes back (a thinking signature, redacted thinking, a compaction
block, encrypted reasoning in ``source.replay_state``) is refused unless ``lossy=True``; item ids
are dropped.
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
    data_url,
    image_block_from_url,
    model_source,
    opaque_replay_state,
    system_source,
    text_block,
    tool_call_block,
    tool_result_block,
    tool_result_parts,
    tool_source,
    user_source,
)
from dshkit.llm import Message
from dshkit.session.attachments import Attachments, inline_attachments

__all__ = ["from_chat_messages", "to_chat_messages"]

FORMAT = "openai_chat"
REASONING_FIELD = "reasoning_content"


# -- export --------------------------------------------------------------------------------


def to_chat_messages(
    messages: Iterable[Message], *, system: str | None = None, lossy: bool = False, attachments: Attachments | None = None
) -> list[dict[str, Any]]:
    """Chat Completions message params for `messages`, after an optional `system` prompt.

    Attachment blocks go inline (base64), their bytes read from `attachments` (a session's
    `attachments`); `AttachmentError` names one that cannot be read."""
    refuse = Refusal("Chat Completions", lossy)
    messages = inline_attachments(messages, attachments)
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"message {index}: expected a dshkit Message, not {type(message).__name__}")
        if message.role == "assistant":
            out.append(_assistant(index, message, refuse))
        elif message.role == "system":
            out.append(_system(index, message, refuse))
        else:
            _user(index, message, refuse, out)
    return out


def _named(message: Message, item: dict[str, Any]) -> dict[str, Any]:
    name = message.source.get("name")
    if isinstance(name, str):
        item["name"] = name
    return item


def _system(index: int, message: Message, refuse: Refusal) -> dict[str, Any]:
    texts = []
    for position, block in enumerate(message.content):
        if block.get("type") == "text":
            texts.append(block["text"])
        else:
            refuse(index, message.id, f"content[{position}] ({block.get('type')!r} in a system message)")
    role = "developer" if message.source.get("chat_role") == "developer" else "system"
    content: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
    return _named(message, {"role": role, "content": content})


def _user_part(index: int, message: Message, position: int, block: Mapping[str, Any], refuse: Refusal) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        url = data_url(block)
        if url is not None:
            image: dict[str, Any] = {"url": url}
            if isinstance(block.get("detail"), str):
                image["detail"] = block["detail"]
            return {"type": "image_url", "image_url": image}
    refuse(index, message.id, f"content[{position}] ({kind!r} in a user message)")
    return None


def _user(index: int, message: Message, refuse: Refusal, out: list[dict[str, Any]]) -> None:
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        if block.get("type") != "tool_result":
            part = _user_part(index, message, position, block, refuse)
            if part is not None:
                parts.append(part)
            continue
        if block.get("is_error"):
            refuse(index, message.id, f"content[{position}] (a tool result's is_error flag)")
        texts = []
        for inner_position, inner in enumerate(tool_result_parts(block)):
            if inner.get("type") == "text":
                texts.append(inner["text"])
            else:
                refuse(index, message.id, f"content[{position}].content[{inner_position}] ({inner.get('type')!r} in a tool result)")
        content: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": text} for text in texts]
        out.append({"role": "tool", "tool_call_id": block["tool_call_id"], "content": content})
    if parts or not message.content:
        single_text = len(parts) == 1 and parts[0]["type"] == "text"
        out.append(_named(message, {"role": "user", "content": parts[0]["text"] if single_text else parts}))


_ORDER = {"reasoning": 0, "text": 1, "tool_call": 2}


def _assistant(index: int, message: Message, refuse: Refusal) -> dict[str, Any]:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    rank = 0
    for position, block in enumerate(message.content):
        kind = block.get("type")
        if kind not in _ORDER:
            refuse(index, message.id, f"content[{position}] ({kind!r} in an assistant message)")
            continue
        if _ORDER[kind] < rank:
            refuse(index, message.id, f"content[{position}] ({kind!r} after a later kind of block: Chat fixes the order reasoning, text, tool calls)")
        rank = max(rank, _ORDER[kind])
        if kind == "text":
            texts.append(block["text"])
        elif kind == "reasoning":
            for key in ("signature", "encrypted_content", "redacted_data"):
                if key in block:
                    refuse(index, message.id, f"content[{position}] (a reasoning block's {key!r})")
            reasoning.append(block.get("text", ""))
        else:
            calls.append({"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": block["arguments"]}})
    opaque = opaque_replay_state(message)
    if opaque is not None:
        refuse(index, message.id, f"source.replay_state ({opaque}, which only its own API takes back)")
    item: dict[str, Any] = {"role": "assistant"}
    if len(texts) == 1:
        item["content"] = texts[0]
    elif texts:
        item["content"] = [{"type": "text", "text": text} for text in texts]
    else:
        item["content"] = None
    if reasoning:
        if len(reasoning) > 1:
            refuse(index, message.id, "(several reasoning blocks: Chat has one reasoning_content string)")
        item[REASONING_FIELD] = "".join(reasoning)
    if calls:
        item["tool_calls"] = calls
    return _named(message, item)


# -- import --------------------------------------------------------------------------------


def from_chat_messages(
    items: Iterable[Mapping[str, Any]], *, ids: IdsArgument = None, lossy: bool = False
) -> tuple[Message, ...]:
    """Import Chat Completions messages (dicts or the openai SDK's message objects)."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    for index, raw in enumerate(items):
        item = _as_dict(raw, index)
        role = item.get("role")
        item_ids = ItemIds(builder, raw, index)
        extra = {"name": item["name"]} if isinstance(item.get("name"), str) else {}
        if role in ("system", "developer"):
            content = _content_blocks(item.get("content"), index, refuse, images=False)
            source = system_source(FORMAT, **extra, **({"chat_role": "developer"} if role == "developer" else {}))
            builder.add(item_ids.take(), "system", content, source)
        elif role == "user":
            builder.add(item_ids.take(), "user", _content_blocks(item.get("content"), index, refuse, images=True), user_source(**extra))
        elif role == "assistant":
            builder.add(item_ids.take(), "assistant", _assistant_blocks(item, index, refuse), {**model_source(FORMAT, None), **extra})
        elif role == "tool":
            call_id = item.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise ConversionError(f"Chat item {index}: a tool message needs a non-empty 'tool_call_id'")
            inner = _content_blocks(item.get("content"), index, refuse, images=False)
            builder.add(item_ids.take(), "user", [tool_result_block(call_id, inner, False)], tool_source(call_id))
        else:
            raise ConversionError(f"Chat item {index}: role {role!r} cannot be imported (system, developer, user, assistant, tool)")
    return tuple(builder.messages)


def _as_dict(raw: Any, index: int) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return raw
    dump = getattr(raw, "model_dump", None)
    if dump is not None:
        return dump(exclude_none=True)  # type: ignore[no-any-return]
    raise TypeError(f"Chat item {index}: expected a mapping, not {type(raw).__name__}")


def _content_blocks(content: Any, index: int, refuse: Refusal, *, images: bool) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_block(content)]
    if not isinstance(content, Sequence):
        raise ConversionError(f"Chat item {index}: content must be a str or a list of parts, not {type(content).__name__}")
    blocks = []
    for position, part in enumerate(content):
        kind = part.get("type")
        if kind == "text":
            blocks.append(text_block(part["text"]))
        elif kind == "image_url" and images:
            image = part["image_url"]
            extra = {"detail": image["detail"]} if isinstance(image.get("detail"), str) else {}
            blocks.append(image_block_from_url(image["url"], **extra))
        else:
            refuse.foreign(index, f"content[{position}] ({kind!r} part)")
    return blocks


def _assistant_blocks(item: Mapping[str, Any], index: int, refuse: Refusal) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    reasoning = item.get(REASONING_FIELD)
    if isinstance(reasoning, str):
        blocks.append({"type": "reasoning", "text": reasoning})
    if item.get("refusal"):
        refuse.foreign(index, "(a refusal)")
    blocks.extend(_content_blocks(item.get("content"), index, refuse, images=False))
    for position, call in enumerate(item.get("tool_calls") or ()):
        if call.get("type", "function") != "function":
            refuse.foreign(index, f"tool_calls[{position}] ({call.get('type')!r} call)")
            continue
        function = call["function"]
        blocks.append(tool_call_block(call["id"], function["name"], function.get("arguments", "")))
    return blocks
