"""pydantic-ai message history <-> dshkit messages (needs ``dshkit[pydantic-ai]``).

`to_pydantic_ai` gives one ``ModelRequest`` or ``ModelResponse`` per dshkit message, its dshkit id
in ``metadata["dshkit_id"]`` (the only place pydantic-ai keeps for it); `from_pydantic_ai`
reads that id back and mints one (or takes it from ``ids=``) where it is missing.

- system text: ``SystemPromptPart`` (one per text block); user content: one ``UserPromptPart``
  (``str``, ``ImageUrl``, ``BinaryContent``); tool results: ``ToolReturnPart``, or
  ``RetryPromptPart`` when ``is_error`` (the tool name is looked up from the earlier call).
- assistant: ``ThinkingPart``, ``TextPart``, ``ToolCallPart`` (``args`` is the raw JSON text); a
  block's other keys ride in the part's ``provider_details["dshkit"]``, the message's
  ``source.replay_state`` in ``metadata["dshkit_replay_state"]``. A response pydantic-ai made
  with Anthropic thinking signatures (``ThinkingPart.signature``; redacted thinking is the part
  with id ``redacted_thinking``) is imported with the Anthropic replay state built from them, as
  `dshkit.models.AnthropicModel` records it; a signature from another provider is refused
  unless ``lossy=True``.
- a request holding several parts becomes several dshkit messages (consecutive system parts
  stay one message); the k-th after the first gets ``<id>.<k>``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from typing import Any

from dshkit.interop.blocks import (
    ConversionError,
    IdsArgument,
    ItemIds,
    MessageBuilder,
    Refusal,
    arguments_object,
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

__all__ = ["from_pydantic_ai", "to_pydantic_ai"]

FORMAT = "pydantic_ai"
ID_KEY = "dshkit_id"
STATE_KEY = "dshkit_replay_state"
REDACTED_ID = "redacted_thinking"  # pydantic-ai's id for a ThinkingPart holding redacted thinking


def _messages_module() -> Any:
    try:
        import pydantic_ai.messages as messages
    except ImportError as error:  # pragma: no cover - exercised only without the extra
        raise ImportError("dshkit.interop.pydantic_ai needs pydantic-ai: pip install 'dshkit[pydantic-ai]'") from error
    return messages


def _details(block: Mapping[str, Any], mapped: tuple[str, ...]) -> dict[str, Any] | None:
    rest = {key: thaw(value) for key, value in block.items() if key not in mapped}
    return {"dshkit": rest} if rest else None


# -- export --------------------------------------------------------------------------------


def to_pydantic_ai(messages: Iterable[Message], *, lossy: bool = False, attachments: Attachments | None = None) -> list[Any]:
    """pydantic-ai ``ModelRequest``/``ModelResponse`` objects, one per dshkit message
    (attachment blocks inline, their bytes read from `attachments`)."""
    pa = _messages_module()
    refuse = Refusal("pydantic-ai", lossy)
    messages = inline_attachments(messages, attachments)
    out: list[Any] = []
    tool_names: dict[str, str] = {}
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"message {index}: expected a dshkit Message, not {type(message).__name__}")
        metadata = {ID_KEY: message.id}
        if message.role == "assistant":
            parts = [_response_part(pa, index, message, p, b, refuse, tool_names) for p, b in enumerate(message.content)]
            source = message.source
            if source.get("replay_state") is not None:
                metadata[STATE_KEY] = thaw(source["replay_state"])
            out.append(pa.ModelResponse(
                parts=[part for part in parts if part is not None],
                model_name=source.get("model"),
                provider_name=source.get("provider"),
                metadata=metadata,
            ))
        elif message.role == "system":
            parts = []
            for position, block in enumerate(message.content):
                if block.get("type") == "text":
                    parts.append(pa.SystemPromptPart(content=block["text"]))
                else:
                    refuse(index, message.id, f"content[{position}] ({block.get('type')!r} in a system message)")
            out.append(pa.ModelRequest(parts=parts, metadata=metadata))
        else:
            out.append(pa.ModelRequest(parts=_request_parts(pa, index, message, refuse, tool_names), metadata=metadata))
    return out


def _user_content(pa: Any, index: int, message: Message, where: str, block: Mapping[str, Any], refuse: Refusal) -> Any:
    kind = block.get("type")
    if kind == "text":
        return block["text"]
    if kind == "image" and isinstance(block.get("url"), str):
        return pa.ImageUrl(url=block["url"])
    if kind == "image" and isinstance(block.get("data"), str):
        return pa.BinaryContent(data=base64.b64decode(block["data"]), media_type=block["media_type"])
    refuse(index, message.id, f"{where} ({kind!r} in a {message.role} message)")
    return None


def _request_parts(pa: Any, index: int, message: Message, refuse: Refusal, tool_names: dict[str, str]) -> list[Any]:
    parts: list[Any] = []
    user: list[Any] = []
    for position, block in enumerate(message.content):
        where = f"content[{position}]"
        if block.get("type") != "tool_result":
            item = _user_content(pa, index, message, where, block, refuse)
            if item is not None:
                user.append(item)
            continue
        call_id = block["tool_call_id"]
        name = tool_names.get(call_id)
        if name is None:
            refuse(index, message.id, f"{where} (a result for call {call_id!r}, whose tool name no earlier message gives)")
            name = ""
        inner = [_user_content(pa, index, message, f"{where}.content[{p}]", b, refuse) for p, b in enumerate(tool_result_parts(block))]
        inner = [item for item in inner if item is not None]
        content: Any = inner[0] if len(inner) == 1 and isinstance(inner[0], str) else inner
        if block.get("is_error"):
            if not isinstance(content, str):
                refuse(index, message.id, f"{where} (an error result that is not one text)")
                content = "".join(item for item in inner if isinstance(item, str))
            parts.append(pa.RetryPromptPart(content=content, tool_name=name, tool_call_id=call_id))
        else:
            parts.append(pa.ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id))
    if user or not message.content:
        parts.append(pa.UserPromptPart(content=user[0] if len(user) == 1 and isinstance(user[0], str) else user))
    return parts


def _response_part(pa: Any, index: int, message: Message, position: int, block: Mapping[str, Any], refuse: Refusal, tool_names: dict[str, str]) -> Any:
    kind = block.get("type")
    if kind == "text":
        return pa.TextPart(content=block["text"], provider_details=_details(block, ("type", "text")))
    if kind == "reasoning":
        return pa.ThinkingPart(
            content=block.get("text", ""),
            signature=block.get("signature"),
            provider_details=_details(block, ("type", "text", "signature")),
        )
    if kind == "tool_call":
        tool_names[block["id"]] = block["name"]
        return pa.ToolCallPart(
            tool_name=block["name"],
            args=block["arguments"],
            tool_call_id=block["id"],
            provider_details=_details(block, ("type", "id", "name", "arguments")),
        )
    refuse(index, message.id, f"content[{position}] ({kind!r} in an assistant message)")
    return None


# -- import --------------------------------------------------------------------------------


def from_pydantic_ai(messages: Iterable[Any], *, ids: IdsArgument = None, lossy: bool = False) -> tuple[Message, ...]:
    """Import a pydantic-ai message history (``ModelRequest``/``ModelResponse`` objects)."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    for index, item in enumerate(messages):
        metadata = getattr(item, "metadata", None) or {}
        item_ids = ItemIds(builder, item, index, metadata.get(ID_KEY))
        kind = getattr(item, "kind", None)
        if kind == "response":
            blocks = [_response_block(index, part, refuse) for part in item.parts]
            state = metadata.get(STATE_KEY) or _signed_state(index, item, refuse)
            source = model_source(item.provider_name or FORMAT, item.model_name, state)
            builder.add(item_ids.take(), "assistant", [b for b in blocks if b], source)
        elif kind == "request":
            _import_request(builder, item_ids, index, item, refuse)
        else:
            raise ConversionError(f"pydantic-ai item {index}: a {type(item).__name__} is no ModelRequest or ModelResponse")
    return tuple(builder.messages)


def _user_block(index: int, item: Any, refuse: Refusal) -> dict[str, Any] | None:
    if isinstance(item, str):
        return text_block(item)
    kind = getattr(item, "kind", None)
    if kind == "image-url":
        return {"type": "image", "url": item.url}
    if kind == "binary" and item.is_image:
        return {"type": "image", "media_type": item.media_type, "data": base64.b64encode(item.data).decode("ascii")}
    refuse.foreign(index, f"(user content of kind {kind!r})")
    return None


def _user_blocks(index: int, content: Any, refuse: Refusal) -> list[dict[str, Any]]:
    items = [content] if isinstance(content, str) else list(content)
    return [block for block in (_user_block(index, item, refuse) for item in items) if block]


def _import_request(builder: MessageBuilder, item_ids: ItemIds, index: int, request: Any, refuse: Refusal) -> None:
    system: list[dict[str, Any]] = []

    def flush_system() -> None:
        if system:
            builder.add(item_ids.take(), "system", list(system), system_source(FORMAT))
            system.clear()

    for part in request.parts:
        kind = part.part_kind
        if kind == "system-prompt":
            system.append(text_block(part.content))
            continue
        flush_system()
        if kind == "user-prompt":
            builder.add(item_ids.take(), "user", _user_blocks(index, part.content, refuse), user_source())
        elif kind in ("tool-return", "retry-prompt") and (kind == "tool-return" or part.tool_name is not None):
            content = part.content
            if kind == "retry-prompt" and not isinstance(content, str):
                content = json.dumps(content, default=str)
            if isinstance(content, (str, list)):
                inner = _user_blocks(index, content, refuse)
            else:
                inner = [text_block(json.dumps(content, default=str))]
            block = tool_result_block(part.tool_call_id, inner, kind == "retry-prompt")
            builder.add(item_ids.take(), "user", [block], tool_source(part.tool_call_id))
        else:
            refuse.foreign(index, f"(a {kind!r} part)")
    flush_system()


def _response_block(index: int, part: Any, refuse: Refusal) -> dict[str, Any] | None:
    kind = part.part_kind
    extra = (part.provider_details or {}).get("dshkit") or {} if hasattr(part, "provider_details") else {}
    if kind == "text":
        return text_block(part.content, **extra)
    if kind == "thinking":
        if getattr(part, "id", None) == REDACTED_ID:
            return None  # no text: it lives in the replay state only
        return {"type": "reasoning", "text": part.content, **extra}
    if kind == "tool-call":
        return tool_call_block(part.tool_call_id, part.tool_name, part.args, **extra)
    refuse.foreign(index, f"(a {kind!r} part)")
    return None


def _signed_state(index: int, item: Any, refuse: Refusal) -> dict[str, Any] | None:
    """The Anthropic replay state of a response whose thinking parts carry signatures."""
    signed = [p for p in item.parts if p.part_kind == "thinking" and p.signature is not None]
    if not signed:
        return None
    providers = {getattr(p, "provider_name", None) or item.provider_name for p in signed}
    state = native_replay_state(_anthropic_blocks(item.parts)) if providers <= {"anthropic", None} else None
    if state is None:
        refuse.foreign(index, f"(thinking signatures of {sorted(map(str, providers))}: dshkit keeps only Anthropic's, in source.replay_state)")
    return state


def _anthropic_blocks(parts: Iterable[Any]) -> list[dict[str, Any]]:
    """Response parts as the Messages API blocks pydantic-ai made them from."""
    native: list[dict[str, Any]] = []
    for part in parts:
        if part.part_kind == "thinking" and getattr(part, "id", None) == REDACTED_ID:
            native.append({"type": "redacted_thinking", "data": part.signature})
        elif part.part_kind == "thinking":
            native.append({"type": "thinking", "thinking": part.content, "signature": part.signature})
        elif part.part_kind == "text":
            native.append({"type": "text", "text": part.content})
        elif part.part_kind == "tool-call":
            args = arguments_object(part.args) if isinstance(part.args, str) and part.args.strip() else part.args
            native.append({"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name, "input": args or {}})
        else:
            native.append({"type": part.part_kind})  # not Anthropic's: no state
    return native
