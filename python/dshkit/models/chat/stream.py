"""From a chat-completions event stream to the chunks of the model protocol.

`ChatStreamTranslator` is fed the server-sent events of one response, in order, and returns the
protocol chunks each one carries; `finish()` returns the closing usage and finish chunks. It is
pure (no I/O), so every provider quirk it tolerates is unit-tested on recorded shapes:

- text comes as ``delta.content``; reasoning as ``delta.reasoning_content`` (DeepSeek, vLLM),
  ``delta.reasoning`` (OpenRouter, Groq, Ollama, newer vLLM) or ``delta.reasoning_details``
  (Snowflake Cortex; OpenRouter sends it beside ``reasoning``): the first of these carrying text
  wins, so reasoning is never counted twice. Mistral's magistral sends ``delta.content`` as a
  list of ``thinking`` and ``text`` parts. A ``delta.refusal`` is shown as text.
- tool calls come as ``delta.tool_calls[]`` keyed by ``index``; ids and names arrive once,
  arguments in pieces. A server that omits ``index`` (whole calls, one per chunk) gets one index
  per new call id; so does a new call id under an index already taken by another call (Ollama
  labels every call of a parallel batch ``0``). Arguments sent as a JSON object instead of text
  are serialised compactly.
- usage may come on any chunk (usually a last chunk with no choices); the last one wins and is
  passed on verbatim, provider field names included (``prompt_tokens_details.cached_tokens``,
  DeepSeek's ``prompt_cache_hit_tokens``); `stream_translation.usage_summary` normalises it.
- ``finish_reason`` is mapped to the protocol's reasons; the finish chunk is held back until the
  stream ends (``[DONE]`` or end of body) because usage follows it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dshkit.models.errors import IncompleteStreamError, MalformedResponseError
from dshkit.models.protocol import Chunk, FinishChunk
from dshkit.models.http.sse import ServerSentEvent
from dshkit.models.stream_translation import (
    closing_chunks,
    event_object,
    malformed_stream_error,
    map_finish_reason,
    provider_stream_error,
)

__all__ = ["ChatStreamTranslator", "DONE"]

DONE = "[DONE]"

class _ToolCall:
    __slots__ = ("id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None


class ChatStreamTranslator:
    """Translates the events of one streamed chat completion into protocol chunks.

    `status` and `request_id` are only copied into the errors raised, so that a failure names the
    response it came from.
    """

    def __init__(self, *, status: int | None = None, request_id: str | None = None) -> None:
        self._status = status
        self._request_id = request_id
        self._tool_calls: dict[int, _ToolCall] = {}  # by the index the chunks carry
        self._tool_index_by_id: dict[str, int] = {}
        self._tool_index_by_wire_index: dict[int, int] = {}  # the server's index -> ours
        self._last_tool_index: int | None = None
        self._finish_reason: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._response_id: str | None = None
        self._done = False
        self._events = 0

    @property
    def done(self) -> bool:
        """Whether ``[DONE]`` was received (later events are ignored)."""
        return self._done

    @property
    def finished(self) -> bool:
        """Whether the response said it was finished (``[DONE]`` or a ``finish_reason``)."""
        return self._done or self._finish_reason is not None

    def feed(self, event: ServerSentEvent) -> list[Chunk]:
        """The protocol chunks carried by one server-sent event (often exactly one)."""
        if self._done:
            return []
        self._events += 1
        data = event.data
        if event.event == "error":
            self._raise_provider_error(data)
        if data.strip() == DONE:
            self._done = True
            return []
        if not data.strip():
            return []  # an empty keep-alive event
        payload = event_object(data, self._events, self._malformed)
        if payload.get("error") is not None:
            self._raise_provider_error(data, payload["error"])
        return self._translate(payload, data)

    def finish(self) -> list[Chunk]:
        """The closing chunks once the body ended: the usage (if any), then the finish.

        A body that ends with neither ``[DONE]`` nor a ``finish_reason`` was cut off:
        `IncompleteStreamError`.
        """
        if not self.finished:
            raise IncompleteStreamError(
                f"the stream ended after {self._events} events without a finish_reason or [DONE]",
                status=self._status,
                request_id=self._request_id,
            )
        finish = map_finish_reason(
            self._finish_reason if self._finish_reason is not None else "stop",
            saw_tool_calls=bool(self._tool_calls),
        )
        if self._response_id is not None:
            finish["replay_state"] = {"response_id": self._response_id}
        return closing_chunks(self._usage, finish)

    def _translate(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        response_id = payload.get("id")
        if isinstance(response_id, str) and response_id and self._response_id is None:
            self._response_id = response_id
        usage = payload.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self._malformed(f"event {self._events}: 'usage' is not an object", data)
            self._usage = usage
        choices = payload.get("choices")
        if choices is None:
            return []
        if not isinstance(choices, list):
            raise self._malformed(f"event {self._events}: 'choices' is not a list", data)
        chunks: list[Chunk] = []
        for position, choice in enumerate(choices):
            if not isinstance(choice, dict):
                raise self._malformed(f"event {self._events}: choices[{position}] is not an object", data)
            if choice.get("index", 0) != 0:
                continue  # only the first choice is followed (n > 1 is not supported)
            self._translate_choice(choice, position, data, chunks)
        return chunks

    def _translate_choice(self, choice: dict[str, Any], position: int, data: str, chunks: list[Chunk]) -> None:
        where = f"event {self._events}: choices[{position}]"
        delta = choice.get("delta")
        if delta is not None:
            if not isinstance(delta, dict):
                raise self._malformed(f"{where}.delta is not an object", data)
            self._reasoning(delta, where, data, chunks)
            content = delta.get("content")
            if isinstance(content, list):
                self._content_parts(content, f"{where}.delta.content", data, chunks)
            elif content is not None:
                if not isinstance(content, str):
                    raise self._malformed(f"{where}.delta.content is not a string or a list of parts", data)
                if content:
                    chunks.append({"type": "text_delta", "text": content})
            refusal = delta.get("refusal")
            if refusal is not None:
                if not isinstance(refusal, str):
                    raise self._malformed(f"{where}.delta.refusal is not a string", data)
                if refusal:
                    chunks.append({"type": "text_delta", "text": refusal})
            tool_calls = delta.get("tool_calls")
            if tool_calls is not None:
                if not isinstance(tool_calls, list):
                    raise self._malformed(f"{where}.delta.tool_calls is not a list", data)
                for number, call in enumerate(tool_calls):
                    chunk = self._tool_call_delta(call, f"{where}.delta.tool_calls[{number}]", data)
                    if chunk is not None:
                        chunks.append(chunk)
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None:
            if not isinstance(finish_reason, str):
                raise self._malformed(f"{where}.finish_reason is not a string", data)
            self._finish_reason = finish_reason

    def _reasoning(self, delta: dict[str, Any], where: str, data: str, chunks: list[Chunk]) -> None:
        """Reasoning from the first field that carries it: one field's text is never counted twice
        (OpenRouter sends the same text as ``reasoning`` and ``reasoning_details``)."""
        for field in ("reasoning_content", "reasoning"):
            reasoning = delta.get(field)
            if reasoning is None:
                continue
            if not isinstance(reasoning, str):
                raise self._malformed(f"{where}.delta.{field} is not a string", data)
            if reasoning:
                chunks.append({"type": "reasoning_delta", "text": reasoning})
                return
        details = delta.get("reasoning_details")
        if details is None:
            return
        if not isinstance(details, list):
            raise self._malformed(f"{where}.delta.reasoning_details is not a list", data)
        for number, detail in enumerate(details):
            if not isinstance(detail, dict):
                raise self._malformed(f"{where}.delta.reasoning_details[{number}] is not an object", data)
            # reasoning.text carries `text`, reasoning.summary `summary`; reasoning.encrypted no text.
            text = detail.get("text") if detail.get("type") != "reasoning.summary" else detail.get("summary")
            if text is None:
                continue
            if not isinstance(text, str):
                raise self._malformed(f"{where}.delta.reasoning_details[{number}] text is not a string", data)
            if text:
                chunks.append({"type": "reasoning_delta", "text": text})

    def _content_parts(self, parts: list[Any], where: str, data: str, chunks: list[Chunk]) -> None:
        """List-valued content (Mistral's magistral): ``text`` parts are answer text, ``thinking``
        parts (a list of text parts, or a string) are reasoning; parts without text are skipped."""
        for number, part in enumerate(parts):
            if not isinstance(part, dict):
                raise self._malformed(f"{where}[{number}] is not an object", data)
            kind = part.get("type")
            if kind == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise self._malformed(f"{where}[{number}].text is not a string", data)
                if text:
                    chunks.append({"type": "text_delta", "text": text})
            elif kind == "thinking":
                thinking = part.get("thinking")
                pieces = [thinking] if isinstance(thinking, str) else thinking
                if not isinstance(pieces, list):
                    raise self._malformed(f"{where}[{number}].thinking is not a string or a list", data)
                for inner, piece in enumerate(pieces):
                    text = piece.get("text") if isinstance(piece, dict) else piece
                    if not isinstance(text, str):
                        raise self._malformed(f"{where}[{number}].thinking[{inner}] has no text", data)
                    if text:
                        chunks.append({"type": "reasoning_delta", "text": text})

    def _tool_call_delta(self, call: object, where: str, data: str) -> Chunk | None:
        if not isinstance(call, dict):
            raise self._malformed(f"{where} is not an object", data)
        call_id = call.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise self._malformed(f"{where}.id is not a string", data)
        function = call.get("function")
        if function is None:
            function = {}
        elif not isinstance(function, dict):
            raise self._malformed(f"{where}.function is not an object", data)
        name = function.get("name")
        if name is not None and not isinstance(name, str):
            raise self._malformed(f"{where}.function.name is not a string", data)
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, (dict, list)):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        elif not isinstance(arguments, str):
            raise self._malformed(f"{where}.function.arguments is not a string", data)
        index = self._tool_index(call.get("index"), call_id or None, where, data)
        state = self._tool_calls.get(index)
        if state is None:
            state = self._tool_calls[index] = _ToolCall()
        # Ids and names are passed on the first time they are seen; a repeat is not news.
        new_id = call_id if call_id and state.id is None else None
        new_name = name if name and state.name is None else None
        if new_id is not None:
            state.id = new_id
            self._tool_index_by_id[new_id] = index
        if new_name is not None:
            state.name = new_name
        if new_id is None and new_name is None and not arguments:
            return None
        return {"type": "tool_call_delta", "index": index, "id": new_id, "name": new_name, "arguments": arguments}

    def _tool_index(self, wire_index: object, call_id: str | None, where: str, data: str) -> int:
        """Our index for a call delta: the server's `index`, unless it is missing or reused."""
        if wire_index is not None and (isinstance(wire_index, bool) or not isinstance(wire_index, int) or wire_index < 0):
            raise self._malformed(f"{where}.index is not a non-negative integer", data)
        index = self._tool_index_by_id.get(call_id) if call_id is not None else None
        if index is None and wire_index is not None:
            index = self._tool_index_by_wire_index.get(wire_index)
            if index is not None and call_id is not None and self._tool_calls[index].id not in (None, call_id):
                index = None  # another call under the same index: a new call, not more of the last
        if index is None:
            if wire_index is None and call_id is None:
                if self._last_tool_index is None:
                    raise self._malformed(f"{where} has neither an index nor an id", data)
                return self._last_tool_index
            fresh = max(self._tool_calls, default=-1) + 1
            index = wire_index if wire_index is not None and wire_index not in self._tool_calls else fresh
        if wire_index is not None:
            self._tool_index_by_wire_index[wire_index] = index
        self._last_tool_index = index
        return index

    def _malformed(self, what: str, data: str) -> MalformedResponseError:
        return malformed_stream_error("chat completion stream", what, data, status=self._status, request_id=self._request_id)

    def _raise_provider_error(self, data: str, error: object = None) -> None:
        if error is None:
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = data
            error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        raise provider_stream_error(data, error, status=self._status, request_id=self._request_id)
