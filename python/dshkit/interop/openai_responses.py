"""OpenAI Responses API input items <-> dshkit messages.

`from_response_items` imports a list of Responses input items (``message``, ``reasoning``,
``function_call``, ``function_call_output``); `to_response_items` gives them back so they can be
replayed as ``input=``. Grouping: a run of assistant-side items (reasoning, assistant messages,
function calls) is one dshkit assistant message; each user/system/developer message is one
message; each ``function_call_output`` is one tool-result message.

Where the Responses state lives (so it replays byte for byte):

- every dshkit block made from an item carries ``"openai_item"``: the item's own fields other
  than its content (``id`` such as ``msg_…``/``fc_…``/``rs_…``, ``type``, ``role``, ``status``,
  ``encrypted_content``, ...). Blocks of one item share it; export regroups consecutive blocks
  whose ``openai_item`` has the same ``id``.
- a block made from a content part (``output_text``, ``summary_text``, ...) carries
  ``"openai_part"``: the part's fields other than its text (``type``, ``annotations``, ...).
- the dshkit message id of an imported group is the id of its first item that has one.

Export writes item ids only from ``openai_item``: the API mints item ids itself, with typed
prefixes it checks on replay, so a message made elsewhere goes out as id-less items (message,
function call) and its dshkit id is not written. Reasoning needs its Responses item to replay.
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
    extras,
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
from dshkit.llm import Message, thaw

__all__ = ["from_response_items", "item_ids_of", "to_response_items"]

FORMAT = "openai_responses"
ITEM = "openai_item"
PART = "openai_part"


# -- export --------------------------------------------------------------------------------


def to_response_items(messages: Iterable[Message], *, lossy: bool = False) -> list[dict[str, Any]]:
    """Responses API input items for `messages`, in order."""
    refuse = Refusal("the Responses API", lossy)
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(f"message {index}: expected a dshkit Message, not {type(message).__name__}")
        if message.role == "assistant":
            out.extend(_assistant_items(index, message, refuse))
        else:
            out.extend(_input_items(index, message, refuse))
    return out


def _item_extras(block: Mapping[str, Any]) -> dict[str, Any]:
    kept = block.get(ITEM)
    return thaw(kept) if kept else {}  # type: ignore[no-any-return]


def _part(block: Mapping[str, Any], default_type: str) -> dict[str, Any]:
    kept = block.get(PART)
    part = thaw(kept) if kept else {"type": default_type}
    part["text"] = block.get("text", "")
    return part  # type: ignore[no-any-return]


def _input_part(index: int, message: Message, where: str, block: Mapping[str, Any], refuse: Refusal) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return _part(block, "input_text")
    if kind == "image":
        url = data_url(block)
        if url is not None:
            kept = block.get(PART)
            image = thaw(kept) if kept else {"type": "input_image"}
            image["image_url"] = url
            image.setdefault("detail", block.get("detail", "auto"))
            return image  # type: ignore[no-any-return]
    refuse(index, message.id, f"{where} ({kind!r} in a {message.role} message)")
    return None


def _content(blocks: Sequence[Mapping[str, Any]], parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A str when the item held a plain string (one text block with no part record)."""
    if len(blocks) == 1 and blocks[0].get("type") == "text" and PART not in blocks[0]:
        return blocks[0]["text"]  # type: ignore[no-any-return]
    return parts


def _input_items(index: int, message: Message, refuse: Refusal) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    others: list[Mapping[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        if block.get("type") != "tool_result":
            part = _input_part(index, message, f"content[{position}]", block, refuse)
            if part is not None:
                others.append(block)
                parts.append(part)
            continue
        if block.get("is_error"):
            refuse(index, message.id, f"content[{position}] (a tool result's is_error flag)")
        inner = tool_result_parts(block)
        inner_parts = [_input_part(index, message, f"content[{position}].content[{p}]", b, refuse) for p, b in enumerate(inner)]
        output = _content(inner, [part for part in inner_parts if part])
        item = {"type": "function_call_output", **_item_extras(block), "call_id": block["tool_call_id"], "output": output}
        items.append(item)
    if others or not message.content:
        extra = _item_extras(others[0]) if others else {}
        if not extra:  # made elsewhere: the explicit message form
            extra = {"type": "message", "role": "developer" if message.source.get("chat_role") == "developer" else message.role}
        items.append({**extra, "content": _content(others, parts)})
    return items


def _assistant_items(index: int, message: Message, refuse: Refusal) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    group: list[Mapping[str, Any]] = []

    def flush() -> None:
        if group:
            items.append(_assistant_item(index, message, group, refuse))
            group.clear()

    for position, block in enumerate(message.content):
        kind = block.get("type")
        if kind not in ("text", "reasoning", "tool_call"):
            refuse(index, message.id, f"content[{position}] ({kind!r} in an assistant message)")
            continue
        if kind == "reasoning" and not (block.get(ITEM) or {}).get("id"):
            refuse(index, message.id, f"content[{position}] (reasoning without the Responses item id it needs to replay)")
            continue
        if group:
            last = group[-1]
            same_id = (last.get(ITEM) or {}).get("id")
            if kind == "tool_call" or last.get("type") != kind or not same_id or (block.get(ITEM) or {}).get("id") != same_id:
                flush()
        group.append(block)
    flush()
    return items


def _assistant_item(index: int, message: Message, group: Sequence[Mapping[str, Any]], refuse: Refusal) -> dict[str, Any]:
    first = group[0]
    kind = first["type"]
    extra = _item_extras(first)
    if kind == "tool_call":
        return {"type": "function_call", **extra, "call_id": first["id"], "name": first["name"], "arguments": first["arguments"]}
    if kind == "reasoning":
        summary = [_part(block, "summary_text") for block in group if PART in block]
        return {"type": "reasoning", **extra, "summary": summary}
    parts = [_part(block, "output_text") for block in group]
    for part in parts:
        if part["type"] == "output_text":
            part.setdefault("annotations", [])
    return {"type": "message", "role": "assistant", **extra, "content": _content(group, parts)}


# -- import --------------------------------------------------------------------------------

_CONTENT_KEYS = {
    "message": frozenset(("content",)),
    "reasoning": frozenset(("summary",)),
    "function_call": frozenset(("call_id", "name", "arguments")),
    "function_call_output": frozenset(("call_id", "output")),
}


def item_ids_of(message: Message) -> list[str]:
    """The Responses item ids a message's blocks were imported from (in order, no repeats)."""
    seen: list[str] = []
    for block in message.content:
        item_id = (block.get(ITEM) or {}).get("id")
        if isinstance(item_id, str) and item_id not in seen:
            seen.append(item_id)
    return seen


def _kind(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind  # type: ignore[no-any-return]


def from_response_items(
    items: Iterable[Mapping[str, Any]], *, ids: IdsArgument = None, lossy: bool = False
) -> tuple[Message, ...]:
    """Import Responses input items (dicts, or the openai SDK's item objects)."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    group: list[dict[str, Any]] = []
    group_ids: ItemIds | None = None

    def flush() -> None:
        nonlocal group_ids
        if group_ids is not None:
            builder.add(group_ids.take(), "assistant", list(group), model_source(FORMAT, None))
            group.clear()
            group_ids = None

    for index, raw in enumerate(items):
        item = raw if isinstance(raw, Mapping) else _dump(raw, index)
        kind = _kind(item)
        kept = extras(item, _CONTENT_KEYS.get(kind, frozenset()))  # type: ignore[arg-type]
        marks = {ITEM: kept} if kept else {}
        if kind == "message" and item.get("role") == "assistant" or kind in ("reasoning", "function_call"):
            if group_ids is None:
                group_ids = ItemIds(builder, raw, index, item.get("id"))
            group.extend(_assistant_blocks(item, kind, index, marks, refuse))  # type: ignore[arg-type]
            continue
        flush()
        item_ids = ItemIds(builder, raw, index, item.get("id"))
        if kind == "message":
            role = item.get("role")
            blocks = _parts(item.get("content"), index, marks, refuse)
            if role == "user":
                builder.add(item_ids.take(), "user", blocks, user_source())
            elif role in ("system", "developer"):
                builder.add(item_ids.take(), "system", blocks, system_source(FORMAT))
            else:
                raise ConversionError(f"Responses item {index}: message role {role!r} cannot be imported")
        elif kind == "function_call_output":
            call_id = item["call_id"]
            inner = _parts(item.get("output"), index, {}, refuse)
            builder.add(item_ids.take(), "user", [tool_result_block(call_id, inner, False, **marks)], tool_source(call_id))
        else:
            refuse.foreign(index, f"(an item of type {kind!r})")
    flush()
    return tuple(builder.messages)


def _dump(raw: Any, index: int) -> Mapping[str, Any]:
    dump = getattr(raw, "model_dump", None)
    if dump is None:
        raise TypeError(f"Responses item {index}: expected a mapping, not {type(raw).__name__}")
    return dump(exclude_none=True)  # type: ignore[no-any-return]


def _parts(content: Any, index: int, marks: Mapping[str, Any], refuse: Refusal) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [text_block(content, **marks)]
    blocks: list[dict[str, Any]] = []
    for position, part in enumerate(content):
        kind = part.get("type")
        if kind in ("input_text", "output_text", "summary_text", "text"):
            kept = extras(part, {"text"})
            blocks.append(text_block(part["text"], **marks, **({PART: kept} if kept else {})))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            kept = extras(part, {"image_url", "detail"})
            detail = part.get("detail")
            extra = {"detail": detail} if isinstance(detail, str) and detail != "auto" else {}
            blocks.append(image_block_from_url(part["image_url"], **extra, **marks, **({PART: kept} if kept else {})))
        else:
            refuse.foreign(index, f"content[{position}] ({kind!r} part)")
    return blocks


def _assistant_blocks(item: Mapping[str, Any], kind: str, index: int, marks: Mapping[str, Any], refuse: Refusal) -> list[dict[str, Any]]:
    if kind == "function_call":
        return [tool_call_block(item["call_id"], item["name"], item.get("arguments", ""), **marks)]
    if kind == "reasoning":
        summary = item.get("summary") or ()
        if not summary:
            return [{"type": "reasoning", "text": "", **marks}]
        blocks = []
        for part in summary:
            kept = extras(part, {"text"})
            blocks.append({"type": "reasoning", "text": part["text"], **marks, **({PART: kept} if kept else {})})
        return blocks
    if item.get("refusal") is not None:
        refuse.foreign(index, "(a refusal)")
    return _parts(item.get("content"), index, marks, refuse)
