"""From an OpenAI Responses event stream to the chunks of the model protocol.

`ResponsesStreamTranslator` is fed the server-sent events of one response, in order (pure):

- ``response.output_item.added`` opens an output item by ``output_index``: a ``reasoning``
  item, an assistant ``message`` or a ``function_call`` (whose ``call_id`` and name become the
  first ``tool_call_delta`` of that call).
- ``response.output_text.delta`` / ``response.refusal.delta`` are ``text_delta``;
  ``response.reasoning_summary_text.delta`` and ``response.reasoning_text.delta`` are
  ``reasoning_delta``; ``response.function_call_arguments.delta`` the call's arguments (a call
  whose arguments only come whole, in ``.done`` or ``output_item.done``, gets them there).
- ``response.content_part.added`` opens a part of a message (``output_text`` / ``refusal``) or,
  where the reasoning itself is streamed (DeepSeek, open-weight servers), a ``reasoning_text``
  part of a reasoning item.
- ``response.output_item.done`` of a reasoning item brings its ``encrypted_content`` (and its
  text, as ``reasoning_delta``, when none of it streamed).
- ``response.completed`` / ``response.incomplete`` end the response with its ``usage``;
  ``response.failed`` and ``error`` events raise `ProviderStreamError`.

The finish chunk's ``replay_state`` (format: `dshkit.models.responses.replay`) holds per output
item its id, kind, the lengths of its text parts (a reasoning item's ``reasoning_text`` parts
and summary parts apart), its ``call_id`` and its ``encrypted_content``,
from which `dshkit.models.responses.projection` rebuilds the items.
"""

from __future__ import annotations

from typing import Any

from dshkit.models.stream_translation import map_finish_reason
from dshkit.models.errors import IncompleteStreamError, MalformedResponseError
from dshkit.models.protocol import Chunk, FinishChunk
from dshkit.models.responses.replay import replay_state
from dshkit.models.http.sse import ServerSentEvent
from dshkit.models.stream_translation import closing_chunks, event_object, malformed_stream_error, provider_stream_error

__all__ = ["ResponsesStreamTranslator", "TRANSIENT_ERRORS"]

TRANSIENT_ERRORS = frozenset(("server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down"))
_INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


class ResponsesStreamTranslator:
    """Translates the events of one streamed Responses API call into protocol chunks."""

    def __init__(self, *, status: int | None = None, request_id: str | None = None) -> None:
        self._status = status
        self._request_id = request_id
        self._items: dict[int, dict[str, Any]] = {}  # output_index -> replay entry
        self._tool_index: dict[int, int] = {}  # output_index -> tool call index
        self._streamed_arguments: set[int] = set()
        self._usage: dict[str, Any] | None = None
        self._response_id: str | None = None
        self._end: str | None = None  # "stop", "max_tokens", "content_filter", ...
        self._events = 0

    @property
    def done(self) -> bool:
        """Whether ``response.completed`` or ``response.incomplete`` arrived."""
        return self._end is not None

    @property
    def finished(self) -> bool:
        """Same as `done`: the Responses API has no separate end marker."""
        return self._end is not None

    def feed(self, event: ServerSentEvent) -> list[Chunk]:
        """The protocol chunks carried by one server-sent event."""
        if self._end is not None:
            return []
        self._events += 1
        data = event.data
        if not data.strip() or data.strip() == "[DONE]":
            return []
        payload = event_object(data, self._events, self._malformed)
        kind = payload.get("type", event.event)
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # in_progress, *.done of parts and text, events added after this was written
        return handler(self, payload, data)

    def finish(self) -> list[Chunk]:
        """The usage and finish chunks once the body ended (`IncompleteStreamError` if cut off)."""
        if self._end is None:
            raise IncompleteStreamError(
                f"the stream ended after {self._events} events without response.completed",
                status=self._status,
                request_id=self._request_id,
            )
        finish: FinishChunk = map_finish_reason(self._end, saw_tool_calls=bool(self._tool_index))
        finish["replay_state"] = replay_state([self._items[index] for index in sorted(self._items)], response_id=self._response_id)
        return closing_chunks(self._usage, finish)

    # -- events -------------------------------------------------------------------------------------

    def _created(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        response = payload.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str) and self._response_id is None:
            self._response_id = response["id"]
        return []

    def _item_added(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index, item = self._index(payload, data), payload.get("item")
        if not isinstance(item, dict):
            raise self._malformed(f"event {self._events}: output_item.added without an 'item'", data)
        kind, item_id = item.get("type"), item.get("id")
        if kind == "reasoning":
            self._items[index] = {"type": "reasoning", "id": item_id, "summary": []}
        elif kind == "message":
            self._items[index] = {"type": "message", "id": item_id, "parts": []}
        elif kind == "function_call":
            call_id, name = item.get("call_id"), item.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise self._malformed(f"event {self._events}: function_call without a str 'call_id' and 'name'", data)
            self._items[index] = {"type": "function_call", "id": item_id, "call_id": call_id}
            self._tool_index[index] = len(self._tool_index)
            arguments = item.get("arguments") or ""
            if arguments:
                self._streamed_arguments.add(index)
            return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": call_id, "name": name, "arguments": arguments}]
        else:
            raise self._malformed(f"event {self._events}: output item type {kind!r} is not supported", data)
        return []

    def _part_added(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        part = payload.get("part")
        kind = part.get("type") if isinstance(part, dict) else None
        entry = self._items.get(self._index(payload, data))
        if entry is not None and entry["type"] == "reasoning":
            # DeepSeek and open-weight servers stream the reasoning itself as content parts.
            if kind != "reasoning_text":
                raise self._malformed(f"event {self._events}: a {kind!r} content part in a reasoning item (expected reasoning_text)", data)
            self._content_slot(entry, payload)
            return []
        entry = self._entry(payload, data, "message")
        entry["parts"].append({"type": "refusal" if kind == "refusal" else "output_text", "length": 0})
        return []

    def _text_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        entry = self._entry(payload, data, "message")
        text = self._delta(payload, data)
        parts, position = entry["parts"], payload.get("content_index")
        if not parts:
            parts.append({"type": "output_text", "length": 0})
        valid = isinstance(position, int) and not isinstance(position, bool) and 0 <= position < len(parts)
        parts[position if valid else -1]["length"] += len(text)
        return [{"type": "text_delta", "text": text}] if text else []

    def _summary_part_added(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        self._entry(payload, data, "reasoning")["summary"].append(0)
        return []

    def _summary_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        entry = self._entry(payload, data, "reasoning")
        text = self._delta(payload, data)
        if not entry["summary"]:
            entry["summary"].append(0)
        entry["summary"][-1] += len(text)
        return [{"type": "reasoning_delta", "text": text}] if text else []

    def _reasoning_text_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        entry = self._entry(payload, data, "reasoning")
        text = self._delta(payload, data)
        slot = self._content_slot(entry, payload)
        entry["content"][slot] += len(text)
        return [{"type": "reasoning_delta", "text": text}] if text else []

    def _arguments_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index = self._index(payload, data)
        self._entry(payload, data, "function_call")
        text = self._delta(payload, data)
        if not text:
            return []
        self._streamed_arguments.add(index)
        return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": None, "name": None, "arguments": text}]

    def _arguments_whole(self, payload: dict[str, Any], data: str, arguments: object) -> list[Chunk]:
        index = self._index(payload, data)
        if index in self._streamed_arguments or not isinstance(arguments, str) or not arguments:
            return []
        self._streamed_arguments.add(index)
        return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": None, "name": None, "arguments": arguments}]

    def _arguments_done(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        self._entry(payload, data, "function_call")
        return self._arguments_whole(payload, data, payload.get("arguments"))

    def _item_done(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index, item = self._index(payload, data), payload.get("item")
        entry = self._items.get(index)
        if entry is None or not isinstance(item, dict):
            raise self._malformed(f"event {self._events}: output_item.done for item {index}, which was never added", data)
        if entry["type"] == "reasoning":
            if item.get("encrypted_content") is not None:
                entry["encrypted_content"] = item["encrypted_content"]
            return self._reasoning_whole(entry, item, data)
        if entry["type"] == "function_call":
            return self._arguments_whole(payload, data, item.get("arguments"))
        return []

    def _completed(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        response = payload.get("response")
        if not isinstance(response, dict):
            raise self._malformed(f"event {self._events}: {payload.get('type')} without a 'response'", data)
        self._created(payload, data)
        usage = response.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self._malformed(f"event {self._events}: 'usage' is not an object", data)
            self._usage = usage
        if payload.get("type") == "response.incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self._end = _INCOMPLETE.get(str(reason), str(reason))
        else:
            self._end = "stop"
        return []

    def _failed(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        response = payload.get("response")
        error = response.get("error") if isinstance(response, dict) else None
        self._raise_error(data, error if error is not None else payload)
        return []

    def _error(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        self._raise_error(data, payload.get("error", payload))
        return []

    def _reasoning_whole(self, entry: dict[str, Any], item: dict[str, Any], data: str) -> list[Chunk]:
        """A reasoning item whose text streamed not at all brings it whole in its done item: the
        reasoning text, then the summary (the order `replayed_items` reads them back in)."""
        if entry["summary"] or entry.get("content"):
            return []
        chunks: list[Chunk] = []
        for key in ("content", "summary"):
            parts = item.get(key)
            if not parts:
                continue
            if not isinstance(parts, list) or not all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts):
                raise self._malformed(f"event {self._events}: reasoning item {key!r} is not a list of parts with a str 'text'", data)
            entry[key] = [len(part["text"]) for part in parts]
            chunks += [{"type": "reasoning_delta", "text": part["text"]} for part in parts if part["text"]]
        return chunks

    # -- helpers --------------------------------------------------------------------------------

    def _content_slot(self, entry: dict[str, Any], payload: dict[str, Any]) -> int:
        """The reasoning item's content part at the event's ``content_index`` (made when new; the
        last, or a first, when the index is missing or not a non-negative integer)."""
        content: list[int] = entry.setdefault("content", [])
        position = payload.get("content_index")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            if not content:
                content.append(0)
            return len(content) - 1
        while len(content) <= position:
            content.append(0)
        return position


    def _index(self, payload: dict[str, Any], data: str) -> int:
        index = payload.get("output_index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise self._malformed(f"event {self._events}: 'output_index' is not a non-negative integer", data)
        return index

    def _entry(self, payload: dict[str, Any], data: str, kind: str) -> dict[str, Any]:
        index = self._index(payload, data)
        entry = self._items.get(index)
        if entry is None or entry["type"] != kind:
            raise self._malformed(f"event {self._events}: {payload.get('type')} for output item {index}, which is not a {kind}", data)
        return entry

    def _delta(self, payload: dict[str, Any], data: str) -> str:
        delta = payload.get("delta")
        if not isinstance(delta, str):
            raise self._malformed(f"event {self._events}: 'delta' is not a string", data)
        return delta

    def _malformed(self, what: str, data: str) -> MalformedResponseError:
        return malformed_stream_error("Responses stream", what, data, status=self._status, request_id=self._request_id)

    def _raise_error(self, data: str, error: object) -> None:
        raise provider_stream_error(data, error, status=self._status, request_id=self._request_id, transient=TRANSIENT_ERRORS)


_HANDLERS = {
    "response.created": ResponsesStreamTranslator._created,
    "response.output_item.added": ResponsesStreamTranslator._item_added,
    "response.content_part.added": ResponsesStreamTranslator._part_added,
    "response.output_text.delta": ResponsesStreamTranslator._text_delta,
    "response.refusal.delta": ResponsesStreamTranslator._text_delta,
    "response.reasoning_summary_part.added": ResponsesStreamTranslator._summary_part_added,
    "response.reasoning_summary_text.delta": ResponsesStreamTranslator._summary_delta,
    "response.reasoning_text.delta": ResponsesStreamTranslator._reasoning_text_delta,
    "response.function_call_arguments.delta": ResponsesStreamTranslator._arguments_delta,
    "response.function_call_arguments.done": ResponsesStreamTranslator._arguments_done,
    "response.output_item.done": ResponsesStreamTranslator._item_done,
    "response.completed": ResponsesStreamTranslator._completed,
    "response.incomplete": ResponsesStreamTranslator._completed,
    "response.failed": ResponsesStreamTranslator._failed,
    "error": ResponsesStreamTranslator._error,
}
