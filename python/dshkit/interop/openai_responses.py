"""OpenAI Responses API input items <-> dshkit messages.

`from_response_items` imports a list of Responses input items (``message``, ``reasoning``,
``function_call``, ``function_call_output``); `to_response_items` gives them back so they can be
replayed as ``input=``. Grouping: a run of assistant-side items (reasoning, assistant messages,
function calls) is one dshkit assistant message; each user/system/developer message is one
message; each ``function_call_output`` is one tool-result message.

Where the Responses state lives (so it replays byte for byte):

- assistant-side items use the replay state `dshkit.models.OpenAIResponsesModel` uses (one
  representation): the run's ``source.replay_state`` comes from
  `dshkit.models.responses.replay.item_entry` (item ids ``rs_…``/``msg_…``/``fc_…``,
  ``encrypted_content``, the part layout, other item and part keys), and an assistant message
  whose state fits its content is exported by
  `dshkit.models.responses_projection.replayed_items`, exactly as the model sends it. A run gets
  the state when its items carry ids (every reasoning and message item one); without it, text goes
  out as id-less assistant messages, calls as id-less function calls, and reasoning is refused.
- user-side items (input messages, ``function_call_output``) are no model output: their own
  fields ride in the blocks, the item's under ``"openai_item"`` and a content part's under
  ``"openai_part"``.
- the dshkit message id of an imported group is the id of its first item, if it has one.

The dshkit message id is never written on export: the API mints item ids itself, with typed
prefixes it checks on replay, so a message made elsewhere goes out as id-less items.
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
    tool_result_block,
    tool_result_parts,
    tool_source,
    user_source,
)
from dshkit.llm import Message, thaw
from dshkit.session.attachments import Attachments, inline_attachments
from dshkit.models.projection_parts import UnsupportedContentError
from dshkit.models.responses.projection import REPLAY_API, replayed_items
from dshkit.models.responses.replay import ASSISTANT_ITEMS, item_entry, replay_state

__all__ = ["from_response_items", "item_ids_of", "to_response_items"]

FORMAT = "openai_responses"
ITEM = "openai_item"
PART = "openai_part"


# -- export --------------------------------------------------------------------------------


def to_response_items(
    messages: Iterable[Message], *, lossy: bool = False, attachments: Attachments | None = None
) -> list[dict[str, Any]]:
    """Responses API input items for `messages`, in order (attachment blocks inline, their bytes
    read from `attachments`)."""
    refuse = Refusal("the Responses API", lossy)
    messages = inline_attachments(messages, attachments)
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
    return thaw(kept) if kept else {}


def _part(block: Mapping[str, Any], default_type: str) -> dict[str, Any]:
    kept = block.get(PART)
    part = thaw(kept) if kept else {"type": default_type}
    part["text"] = block.get("text", "")
    return part


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
            return image
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
    """The items `OpenAIResponsesModel` would send when the replay state fits, else block by block."""
    known = [block for block in message.content if block.get("type") in ("text", "reasoning", "tool_call")]
    if len(known) < len(message.content):  # blocks no replay state describes (the projection would skip them)
        for position, block in enumerate(message.content):
            if block.get("type") not in ("text", "reasoning", "tool_call"):
                refuse(index, message.id, f"content[{position}] ({block.get('type')!r} in an assistant message)")
        message = message.with_content(known)
    try:
        replayed = replayed_items(message)
    except UnsupportedContentError:
        replayed = None  # refused block by block below
    if replayed is not None:
        return replayed
    items: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            items.append({"type": "message", "role": "assistant", "content": block["text"]})
        elif kind == "tool_call":
            items.append({"type": "function_call", "call_id": block["id"], "name": block["name"], "arguments": block["arguments"]})
        elif kind == "reasoning":
            refuse(index, message.id, f"content[{position}] (reasoning without the Responses item id it needs to replay: no fitting source.replay_state)")
        else:
            refuse(index, message.id, f"content[{position}] ({kind!r} in an assistant message)")
    return items


# -- import --------------------------------------------------------------------------------

_CONTENT_KEYS = {  # user-side items: the keys the blocks hold; the others ride in "openai_item"
    "message": frozenset(("content",)),
    "function_call_output": frozenset(("call_id", "output")),
}


def item_ids_of(message: Message) -> list[str]:
    """The Responses item ids a message was made from (its replay state's, else its blocks')."""
    state = message.source.get("replay_state")
    if isinstance(state, Mapping) and state.get("api") == REPLAY_API:
        candidates = [entry.get("id") for entry in state.get("items", ()) if isinstance(entry, Mapping)]
    else:
        candidates = [(block.get(ITEM) or {}).get("id") for block in message.content]
    seen: list[str] = []
    for item_id in candidates:
        if isinstance(item_id, str) and item_id not in seen:
            seen.append(item_id)
    return seen


def _kind(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind


def from_response_items(
    items: Iterable[Mapping[str, Any]], *, ids: IdsArgument = None, lossy: bool = False
) -> tuple[Message, ...]:
    """Import Responses input items (dicts, or the openai SDK's item objects)."""
    builder = MessageBuilder(FORMAT, ids)
    refuse = Refusal(FORMAT, lossy)
    run = _AssistantRun()

    for index, raw in enumerate(items):
        item = raw if isinstance(raw, Mapping) else _dump(raw, index)
        kind = _kind(item)
        if kind == "message" and item.get("role") == "assistant" or kind in ASSISTANT_ITEMS - {"message"}:
            if run.ids is None:
                run.ids, run.start = ItemIds(builder, raw, index, item.get("id")), index
            run.add(index, item, refuse)
            continue
        run.flush(builder, refuse)
        kept = extras(item, _CONTENT_KEYS.get(kind, frozenset()))  # type: ignore[arg-type]
        marks = {ITEM: kept} if kept else {}
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
    run.flush(builder, refuse)
    return tuple(builder.messages)


class _AssistantRun:
    """Consecutive assistant-side items: one dshkit assistant message, its state by `item_entry`."""

    __slots__ = ("content", "ids", "layout", "start")

    def __init__(self) -> None:
        self.start = 0  # the index of the run's first item
        self.ids: ItemIds | None = None
        self.content: list[dict[str, Any]] = []
        self.layout: list[dict[str, Any]] = []

    def add(self, index: int, item: Mapping[str, Any], refuse: Refusal) -> None:
        try:
            blocks, entry = item_entry(item)
        except ValueError as error:
            refuse.foreign(index, f"({error})")
            return
        self.content.extend(blocks)
        self.layout.append(entry)

    def flush(self, builder: MessageBuilder, refuse: Refusal) -> None:
        if self.ids is not None and (self.content or self.layout):
            identified = any(entry.get("id") for entry in self.layout)
            complete = all(entry.get("id") for entry in self.layout if entry["type"] != "function_call")
            state = replay_state(self.layout) if identified and complete else None
            if state is None and any("encrypted_content" in entry for entry in self.layout):
                refuse.foreign(self.start, "(encrypted reasoning in a run of items that do not all have ids: it cannot be replayed)")
            builder.add(self.ids.take(), "assistant", self.content, model_source(FORMAT, None, state))
        self.ids, self.content, self.layout = None, [], []


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
