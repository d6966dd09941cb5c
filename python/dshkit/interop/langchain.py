"""langchain-core messages <-> dshkit messages (needs ``dshkit[langchain]``).

`to_langchain` gives ``SystemMessage``, ``HumanMessage``, ``AIMessage`` (with ``tool_calls``) and
``ToolMessage`` objects; `from_langchain` imports them. The message ``id`` field carries the
dshkit id both ways (a langchain message without an id gets one minted, or from ``ids=``).

- content is a str when it is one plain text block, else a list of standard content blocks:
  ``text``, ``reasoning`` (its text in ``reasoning``) and ``image`` (``base64`` + ``mime_type``,
  or ``url``); a dshkit block's other keys ride in the block's ``extras``, the message's
  ``source.replay_state`` in ``response_metadata["dshkit_replay_state"]``. An ``AIMessage`` in
  langchain-anthropic's native form (``thinking`` blocks with a ``signature``,
  ``redacted_thinking``) is imported with the Anthropic replay state built from those blocks, as
  `dshkit.models.AnthropicModel` records it.
- tool calls with a JSON-object argument text go to ``tool_calls`` (args as a dict); any other
  argument text goes to ``invalid_tool_calls`` with the raw text, so nothing is lost.
  Extra keys of a tool_call block ride in ``additional_kwargs["dshkit_tool_call_extras"]``.
- an erroring tool result is a ``ToolMessage`` with ``status="error"``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dshkit.interop.blocks import (
    ConversionError,
    IdsArgument,
    ItemIds,
    MessageBuilder,
    Refusal,
    arguments_object,
    image_block_from_url,
    model_source,
    system_source,
    text_block,
    tool_call_block,
    tool_result_block,
    tool_result_parts,
    tool_source,
    user_source,
)
from dshkit.interop.anthropic import native_replay_state
from dshkit.llm import Message, thaw
from dshkit.session.attachments import Attachments, inline_attachments

__all__ = ["from_langchain", "to_langchain"]

FORMAT = "langchain"
CALL_EXTRAS = "dshkit_tool_call_extras"
STATE_KEY = "dshkit_replay_state"
_MAPPED = {"text": ("type", "text"), "reasoning": ("type", "text"), "image": ("type", "url", "media_type", "data")}


def _messages_module() -> Any:
    try:
        import langchain_core.messages as messages
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("dshkit.interop.langchain needs langchain-core: pip install 'dshkit[langchain]'") from error
    return messages


# -- export --------------------------------------------------------------------------------


def to_langchain(messages: Iterable[Message], *, lossy: bool = False, attachments: Attachments | None = None) -> list[Any]:
    """langchain-core message objects for `messages`; each carries its dshkit id as ``id``
    (attachment blocks inline, their bytes read from `attachments`)."""
    lc = _messages_module()
    refuse = Refusal("langchain", lossy)
    messages = inline_attachments(messages, attachments)
    out: list[Any] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"message {index}: expected a dshkit Message, not {type(message).__name__}")
        if message.role == "assistant":
            out.append(_ai_message(lc, index, message, refuse))
        elif message.role == "system":
            out.append(lc.SystemMessage(content=_content(index, message, message.content, refuse, ("text",)), id=message.id))
        else:
            _user(lc, index, message, refuse, out)
    return out


def _extras(block: Mapping[str, Any], kind: str) -> dict[str, Any]:
    return {key: thaw(value) for key, value in block.items() if key not in _MAPPED.get(kind, ("type",))}


def _content_block(index: int, message: Message, where: str, block: Mapping[str, Any], refuse: Refusal, allowed: tuple[str, ...]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind not in allowed:
        refuse(index, message.id, f"{where} ({kind!r} in a {message.role} message)")
        return None
    if kind == "text":
        out: dict[str, Any] = {"type": "text", "text": block["text"]}
    elif kind == "reasoning":
        out = {"type": "reasoning", "reasoning": block.get("text", "")}
    elif isinstance(block.get("url"), str):
        out = {"type": "image", "url": block["url"]}
    else:
        out = {"type": "image", "base64": block["data"], "mime_type": block["media_type"]}
    extra = _extras(block, kind)
    if extra:
        out["extras"] = extra
    return out


def _content(index: int, message: Message, blocks: Iterable[Mapping[str, Any]], refuse: Refusal, allowed: tuple[str, ...]) -> str | list[Any]:
    parts = [_content_block(index, message, f"content[{p}]", b, refuse, allowed) for p, b in enumerate(blocks)]
    kept = [part for part in parts if part is not None]
    if len(kept) == 1 and set(kept[0]) == {"type", "text"}:
        return kept[0]["text"]  # type: ignore[no-any-return]
    return kept


def _user(lc: Any, index: int, message: Message, refuse: Refusal, out: list[Any]) -> None:
    others = []
    count = 0
    for position, block in enumerate(message.content):
        if block.get("type") != "tool_result":
            others.append(block)
            continue
        content = _content(index, message, tool_result_parts(block), refuse, ("text", "image"))
        message_id = message.id if count == 0 else f"{message.id}.{count}"
        count += 1
        status = "error" if block.get("is_error") else "success"
        out.append(lc.ToolMessage(content=content, tool_call_id=block["tool_call_id"], status=status, id=message_id))
    if others or not message.content:
        message_id = message.id if count == 0 else f"{message.id}.{count}"
        out.append(lc.HumanMessage(content=_content(index, message, others, refuse, ("text", "image")), id=message_id))


def _ai_message(lc: Any, index: int, message: Message, refuse: Refusal) -> Any:
    blocks = [block for block in message.content if block.get("type") != "tool_call"]
    tool_calls, invalid, call_extras = [], [], {}
    for block in message.content:
        if block.get("type") != "tool_call":
            continue
        args = arguments_object(block["arguments"])
        if args is None:
            invalid.append({"id": block["id"], "name": block["name"], "args": block["arguments"], "error": None, "type": "invalid_tool_call"})
        else:
            tool_calls.append({"id": block["id"], "name": block["name"], "args": args, "type": "tool_call"})
        extra = {key: thaw(value) for key, value in block.items() if key not in ("type", "id", "name", "arguments")}
        if extra:
            call_extras[block["id"]] = extra
    content = _content(index, message, blocks, refuse, ("text", "reasoning"))
    if content == "":  # "" is how langchain says "no content": one empty text goes as a block
        content = [{"type": "text", "text": ""}]
    metadata = {"model_provider": message.source.get("provider"), "model_name": message.source.get("model")}
    kwargs = {CALL_EXTRAS: call_extras} if call_extras else {}
    response_metadata: dict[str, Any] = {key: value for key, value in metadata.items() if isinstance(value, str)}
    if message.source.get("replay_state") is not None:
        response_metadata[STATE_KEY] = thaw(message.source["replay_state"])
    return lc.AIMessage(
        content=content if blocks else "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid,
        id=message.id,
        response_metadata=response_metadata,
        additional_kwargs=kwargs,
    )


# -- import --------------------------------------------------------------------------------


def from_langchain(messages: Iterable[Any], *, ids: IdsArgument = None, lossy: bool = False) -> tuple[Message, ...]:
    """Import langchain-core messages; a message's ``id`` becomes the dshkit id verbatim."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    for index, item in enumerate(messages):
        kind = getattr(item, "type", None)
        item_ids = ItemIds(builder, item, index, getattr(item, "id", None))
        if kind == "system":
            builder.add(item_ids.take(), "system", _blocks(item.content, index, refuse), system_source(FORMAT))
        elif kind == "human":
            builder.add(item_ids.take(), "user", _blocks(item.content, index, refuse), user_source())
        elif kind == "ai":
            builder.add(item_ids.take(), "assistant", _ai_blocks(item, index, refuse), _ai_source(item))
        elif kind == "tool":
            inner = _blocks(item.content, index, refuse)
            block = tool_result_block(item.tool_call_id, inner, getattr(item, "status", "success") == "error")
            builder.add(item_ids.take(), "user", [block], tool_source(item.tool_call_id))
        else:
            raise ConversionError(f"langchain item {index}: a {type(item).__name__} (type {kind!r}) cannot be imported")
    return tuple(builder.messages)


def _ai_source(item: Any) -> dict[str, Any]:
    metadata = getattr(item, "response_metadata", None) or {}
    state = metadata.get(STATE_KEY)
    if state is None and isinstance(item.content, list):
        parts = [{"type": "text", "text": part} if isinstance(part, str) else part for part in item.content]
        state = native_replay_state(parts)
    return model_source(metadata.get("model_provider") or FORMAT, metadata.get("model_name"), state)


def _blocks(content: Any, index: int, refuse: Refusal, skip_calls: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text_block(content)]
    blocks: list[dict[str, Any]] = []
    for position, part in enumerate(content):
        if isinstance(part, str):
            blocks.append(text_block(part))
            continue
        kind = part.get("type")
        extra = dict(part.get("extras") or {})
        if kind == "text":
            blocks.append(text_block(part["text"], **extra))
        elif kind == "reasoning":
            blocks.append({"type": "reasoning", "text": part.get("reasoning", ""), **extra})
        elif kind == "thinking":  # langchain-anthropic's native form (the signature: in the replay state)
            blocks.append({"type": "reasoning", "text": part.get("thinking", "")})
        elif kind == "redacted_thinking":
            continue  # no text: in the replay state only
        elif kind == "image" and isinstance(part.get("url"), str):
            blocks.append({"type": "image", "url": part["url"], **extra})
        elif kind == "image" and isinstance(part.get("base64"), str):
            blocks.append({"type": "image", "media_type": part.get("mime_type", "application/octet-stream"), "data": part["base64"], **extra})
        elif kind == "image_url":
            url = part["image_url"] if isinstance(part["image_url"], str) else part["image_url"]["url"]
            blocks.append(image_block_from_url(url))
        elif kind in ("tool_use", "tool_call") and part.get("id") in skip_calls:
            continue  # the same call, also listed in tool_calls
        else:
            refuse.foreign(index, f"content[{position}] ({kind!r} block)")
    return blocks


def _ai_blocks(item: Any, index: int, refuse: Refusal) -> list[dict[str, Any]]:
    calls = list(item.tool_calls or ()) + list(getattr(item, "invalid_tool_calls", None) or ())
    # An AIMessage with only tool calls has content "" (langchain's default): no text block.
    content = item.content if item.content != "" else []
    blocks = _blocks(content, index, refuse, frozenset(call.get("id") for call in calls))
    call_extras = (getattr(item, "additional_kwargs", None) or {}).get(CALL_EXTRAS) or {}
    for position, call in enumerate(calls):
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ConversionError(f"langchain item {index}: tool call {position} has no id (dshkit tool calls need one)")
        blocks.append(tool_call_block(call_id, call.get("name") or "", call.get("args"), **call_extras.get(call_id, {})))
    return blocks
