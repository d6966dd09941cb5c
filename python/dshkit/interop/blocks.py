"""What every converter shares: ids, sources, block builders, and the "cannot say this" errors.

A converter walks foreign items and builds dshkit messages through `MessageBuilder`, or walks
dshkit messages and asks `Refusal` what to do with a block the target format has no place for.
The rules (see ``docs/interop.md``):

- Ids: a foreign id is kept verbatim; a foreign item without one gets an id from ``ids=`` (a
  sequence giving one id per dshkit message made, in order, or a function of the foreign item) or
  a newly minted ULID. When one foreign item becomes several dshkit messages, the first takes the
  item's id (or the function's) and the k-th after it ``<id>.<k>``.
- A block or field the target cannot carry raises `ConversionError` (a `ValueError`) naming the
  message (index and id) and block, unless the caller passed ``lossy=True``: then it is dropped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Union

from dshkit.llm import FrozenDict, Message, freeze_message, new_message_id, thaw
from dshkit.models.anthropic.projection import REPLAY_API as ANTHROPIC
from dshkit.models.responses.projection import REPLAY_API as RESPONSES

__all__ = [
    "ConversionError",
    "IdsArgument",
    "MessageBuilder",
    "Refusal",
    "arguments_object",
    "arguments_text",
    "data_url",
    "extras",
    "image_block_from_url",
    "model_source",
    "opaque_replay_state",
    "system_source",
    "text_block",
    "tool_call_block",
    "tool_result_block",
    "tool_result_parts",
    "tool_source",
    "user_source",
]

IdsArgument = Union[Sequence[str], Callable[[Any], str], None]
"""``ids=``: a sequence of ids taken in order, or a function of the foreign item."""


class ConversionError(ValueError):
    """A message or block that the target format cannot express (pass ``lossy=True`` to drop it)."""


# -- ids and messages ----------------------------------------------------------------------


class MessageBuilder:
    """Collects imported messages, giving each the id the rules in the module docstring say."""

    __slots__ = ("_ids", "_next", "fmt", "messages")

    def __init__(self, fmt: str, ids: IdsArgument) -> None:
        self.fmt = fmt
        self.messages: list[Message] = []
        self._ids = ids
        self._next: Iterator[str] | None = None
        if ids is not None and not callable(ids):
            if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
                raise TypeError(f"ids= must be a sequence of str or a function of the item, not {type(ids).__name__}")
            self._next = iter(ids)

    @property
    def sequenced(self) -> bool:
        """True when ``ids=`` is a sequence: then it gives one id per dshkit message made."""
        return self._next is not None

    def base_id(self, item: object, index: int, foreign_id: object) -> str:
        """The id for the first message made from `item` (call once per foreign item)."""
        if isinstance(foreign_id, str) and foreign_id:
            return foreign_id
        if self._next is not None:
            chosen = next(self._next, None)
            if chosen is None:
                raise ValueError(f"ids=: the sequence ran out at {self.fmt} item {index}")
        elif self._ids is not None:
            chosen = self._ids(item)  # type: ignore[operator]
        else:
            return new_message_id()
        if not isinstance(chosen, str) or not chosen:
            raise ValueError(f"ids=: the id for {self.fmt} item {index} must be a non-empty str, not {chosen!r}")
        return chosen

    def add(self, message_id: str, role: str, content: Sequence[Mapping[str, Any]], source: Mapping[str, Any]) -> Message:
        """Import one message (`freeze_message`: the id is kept as given)."""
        message = freeze_message({"id": message_id, "role": role, "content": content, "source": source})
        self.messages.append(message)
        return message


class ItemIds:
    """The ids of the messages made from one foreign item: `<id>`, then `<id>.1`, `<id>.2`, ..."""

    __slots__ = ("_base", "_count", "_builder", "_item", "_index", "_foreign")

    def __init__(self, builder: MessageBuilder, item: object, index: int, foreign_id: object = None) -> None:
        self._builder, self._item, self._index, self._foreign = builder, item, index, foreign_id
        self._base: str | None = None
        self._count = 0

    def take(self) -> str:
        if self._builder.sequenced and not self._foreign:
            return self._builder.base_id(self._item, self._index, None)  # a sequence gives one id per message
        if self._base is None:
            self._base = self._builder.base_id(self._item, self._index, self._foreign)
        count, self._count = self._count, self._count + 1
        return self._base if count == 0 else f"{self._base}.{count}"


class Refusal:
    """Raises (or, with ``lossy=True``, allows dropping) what the target format cannot say."""

    __slots__ = ("fmt", "lossy")

    def __init__(self, fmt: str, lossy: bool) -> None:
        self.fmt = fmt
        self.lossy = lossy

    def __call__(self, index: int, message_id: str, what: str) -> None:
        """Raise unless lossy; a caller that returns goes on without the thing named."""
        if not self.lossy:
            raise ConversionError(f"message {index} (id {message_id}) {what}: {self.fmt} cannot express this (lossy=True drops it)")

    def foreign(self, index: int, what: str) -> None:
        """Same for an import: the foreign item at `index` holds something dshkit has no block for."""
        if not self.lossy:
            raise ConversionError(f"{self.fmt} item {index} {what}: no dshkit block holds this (lossy=True drops it)")


# -- sources -------------------------------------------------------------------------------


def user_source(**extra: Any) -> dict[str, Any]:
    return {"kind": "user", **extra}


def system_source(fmt: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "plugin", "plugin": fmt, "form": "instructions", **extra}


def model_source(provider: str | None, model: str | None, replay_state: Any = None) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "model", "provider": provider or "unknown", "model": model or "unknown"}
    if replay_state is not None:
        source["replay_state"] = replay_state
    return source


def opaque_replay_state(message: Message) -> str | None:
    """What the message's ``source.replay_state`` holds that only its own API takes back
    (thinking signatures, redacted thinking, compaction blocks, encrypted reasoning), or `None`.
    Item ids and block layout alone are not named: a format without them loses no content."""
    state = message.source.get("replay_state")
    if not isinstance(state, Mapping):
        return None
    if state.get("api") == ANTHROPIC:
        entries = [e for e in state.get("blocks", ()) if isinstance(e, Mapping)]
        if any(e.get("type") == "redacted_thinking" for e in entries):
            return "Anthropic redacted thinking"
        if any(e.get("type") == "compaction" for e in entries):
            return "an Anthropic compaction block"
        if any(e.get("type") == "thinking" and e.get("signature") for e in entries):
            return "an Anthropic thinking signature"
    if state.get("api") == RESPONSES:
        if any(isinstance(e, Mapping) and e.get("encrypted_content") is not None for e in state.get("items", ())):
            return "encrypted Responses reasoning"
    return None


def tool_source(call_id: str) -> dict[str, Any]:
    return {"kind": "tool", "call_id": call_id}


# -- blocks --------------------------------------------------------------------------------


def text_block(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, **extra}


def tool_call_block(call_id: str, name: str, arguments: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments_text(arguments), **extra}


def tool_result_block(call_id: str, content: Sequence[Mapping[str, Any]], is_error: bool, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_call_id": call_id, "content": list(content), "is_error": bool(is_error), **extra}


def tool_result_parts(block: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """The inner blocks of a tool_result (a plain str is one text block)."""
    inner = block.get("content", ())
    if isinstance(inner, str):
        return ({"type": "text", "text": inner},)
    return tuple(inner)


def extras(mapping: Mapping[str, Any], mapped: frozenset[str] | set[str]) -> dict[str, Any] | None:
    """The keys of a foreign dict that no dshkit field carries (kept so an export gives them back)."""
    rest = {key: value for key, value in mapping.items() if key not in mapped}
    return rest or None


def arguments_text(arguments: Any) -> str:
    """Raw JSON text of tool arguments (dicts, as Anthropic and langchain hold them, are dumped)."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    if isinstance(arguments, FrozenDict):
        arguments = thaw(arguments)
    return json.dumps(arguments)  # the text `json.dumps` gives: an argument text in that form comes back exact


def arguments_object(text: str) -> dict[str, Any] | None:
    """The argument text as a JSON object, or `None` if it is not one (formats that need a dict)."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def data_url(block: Mapping[str, Any]) -> str | None:
    """An image block as a URL (a ``data:`` URL for base64 data); `None` if it has neither."""
    url = block.get("url")
    if isinstance(url, str):
        return url
    media_type, data = block.get("media_type"), block.get("data")
    if isinstance(media_type, str) and isinstance(data, str):
        return f"data:{media_type};base64,{data}"
    return None


def image_block_from_url(url: str, **extra: Any) -> dict[str, Any]:
    """A dshkit image block from a URL: base64 ``data:`` URLs become media_type + data."""
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {"type": "image", "media_type": media_type, "data": data, **extra}
    return {"type": "image", "url": url, **extra}


def image_bytes(block: Mapping[str, Any]) -> bytes:
    return base64.b64decode(block["data"])
