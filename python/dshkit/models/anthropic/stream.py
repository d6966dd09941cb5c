"""From an Anthropic Messages event stream to the chunks of the model protocol.

`AnthropicStreamTranslator` is fed the server-sent events of one response, in order (pure, no
I/O, like `dshkit.models.chat.stream.ChatStreamTranslator`):

- ``message_start`` carries the message id and the first usage (input tokens, cache reads and
  writes); ``message_delta`` the ``stop_reason`` and the cumulative output usage. One ``usage``
  chunk (the merged mapping, provider field names kept) comes just before the finish.
- ``content_block_start`` / ``content_block_delta`` / ``content_block_stop`` by block ``index``:
  ``text_delta`` becomes ``text_delta``, ``thinking_delta`` ``reasoning_delta``,
  ``input_json_delta`` the arguments of a ``tool_call_delta`` (a call whose input never streamed
  gets ``{}``); the input of the structured output's forced tool (`output_tool`) becomes
  ``text_delta`` instead, and the message holds it as text. A ``compaction`` block (context management: the server's summary of the
  context before it) is read like the official SDK reads it, each ``compaction_delta``
  replacing its ``content`` and ``encrypted_content``; at its ``content_block_stop`` the summary
  becomes one ``reasoning_delta`` (the model's note on the conversation, not its answer).
  ``signature_delta``, ``redacted_thinking`` data and the compaction block itself are not
  chunks: they go, with the block layout, into the finish chunk's ``replay_state`` (format:
  `dshkit.models.anthropic.replay`), from which `dshkit.models.anthropic.projection` rebuilds
  the exact blocks for the next request.
- ``stop_reason`` ``compaction`` (a pause after compacting) ends the turn like ``pause_turn``.
- ``ping`` is ignored; an ``error`` event raises `ProviderStreamError` (transient kinds such as
  ``overloaded_error`` are retryable); ``message_stop`` ends the stream.
"""

from __future__ import annotations

import json
from typing import Any

from dshkit.models.anthropic.replay import compaction_block, replay_state
from dshkit.models.stream_translation import map_finish_reason
from dshkit.models.errors import IncompleteStreamError, MalformedResponseError
from dshkit.models.protocol import Chunk, FinishChunk
from dshkit.models.http.sse import ServerSentEvent
from dshkit.models.stream_translation import closing_chunks, malformed_stream_error, provider_stream_error

__all__ = ["AnthropicStreamTranslator", "TRANSIENT_ERRORS"]

TRANSIENT_ERRORS = frozenset(("overloaded_error", "api_error", "rate_limit_error", "timeout_error"))
_STOP_REASONS = {"pause_turn": "stop", "compaction": "stop", "model_context_window_exceeded": "max_tokens"}


class AnthropicStreamTranslator:
    """Translates the events of one streamed Messages API response into protocol chunks."""

    def __init__(self, *, status: int | None = None, request_id: str | None = None, output_tool: str | None = None) -> None:
        self._status = status
        self._output_tool = output_tool  # the forced tool of a structured output: its input is the answer text
        self._output_blocks: set[int] = set()
        self._request_id = request_id
        self._layout: dict[int, dict[str, Any]] = {}  # block index -> its replay entry
        self._tool_index: dict[int, int] = {}  # block index -> tool call index
        self._tool_arguments: dict[int, bool] = {}  # block index -> any input streamed
        self._usage: dict[str, Any] | None = None
        self._stop_reason: str | None = None
        self._message_id: str | None = None
        self._done = False
        self._events = 0

    @property
    def done(self) -> bool:
        """Whether ``message_stop`` was received."""
        return self._done

    @property
    def finished(self) -> bool:
        """Whether the response said it was finished (``message_stop`` or a ``stop_reason``)."""
        return self._done or self._stop_reason is not None

    def feed(self, event: ServerSentEvent) -> list[Chunk]:
        """The protocol chunks carried by one server-sent event."""
        if self._done:
            return []
        self._events += 1
        data = event.data
        if not data.strip():
            return []
        try:
            payload = json.loads(data)
        except ValueError as error:
            if event.event == "error":
                self._raise_error(data)
            raise self._malformed(f"event {self._events} is not JSON ({error})", data) from None
        if not isinstance(payload, dict):
            raise self._malformed(f"event {self._events} is JSON {type(payload).__name__}, expected an object", data)
        kind = payload.get("type", event.event)
        if kind == "error" or event.event == "error":
            self._raise_error(data, payload.get("error", payload))
        handler = _HANDLERS.get(kind)
        if handler is None:
            return []  # ping, and event types added after this was written
        return handler(self, payload, data)

    def finish(self) -> list[Chunk]:
        """The usage and finish chunks once the body ended (`IncompleteStreamError` if cut off)."""
        if not self.finished:
            raise IncompleteStreamError(
                f"the stream ended after {self._events} events without a stop_reason or message_stop",
                status=self._status,
                request_id=self._request_id,
            )
        reason = self._stop_reason or "end_turn"
        if reason == "tool_use" and self._output_blocks and not self._tool_index:
            reason = "end_turn"  # the forced output tool answered: to the agent that is text, not a call
        finish: FinishChunk
        if reason == "refusal":
            finish = {"type": "finish", "reason": "error", "error": {"code": "refusal", "message": "the model refused to answer"}}
        else:
            finish = map_finish_reason(_STOP_REASONS.get(reason, reason), saw_tool_calls=bool(self._tool_index))
        finish["replay_state"] = replay_state([self._layout[index] for index in sorted(self._layout)], message_id=self._message_id)
        return closing_chunks(self._usage, finish)

    # -- events -------------------------------------------------------------------------------------

    def _message_start(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        message = payload.get("message")
        if not isinstance(message, dict):
            raise self._malformed(f"event {self._events}: message_start without a 'message' object", data)
        if isinstance(message.get("id"), str):
            self._message_id = message["id"]
        self._merge_usage(message.get("usage"), data)
        return []

    def _block_start(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index = self._index(payload, data)
        block = payload.get("content_block")
        if not isinstance(block, dict):
            raise self._malformed(f"event {self._events}: content_block_start without a 'content_block'", data)
        kind = block.get("type")
        if kind == "text":
            self._layout[index] = {"type": "text", "length": 0}
            return self._text(index, block.get("text"), "text_delta", data)
        if kind == "thinking":
            self._layout[index] = {"type": "thinking", "length": 0, "signature": ""}
            if isinstance(block.get("signature"), str):
                self._layout[index]["signature"] = block["signature"]
            return self._text(index, block.get("thinking"), "reasoning_delta", data)
        if kind == "redacted_thinking":
            if not isinstance(block.get("data"), str):
                raise self._malformed(f"event {self._events}: redacted_thinking without a str 'data'", data)
            self._layout[index] = {"type": "redacted_thinking", "data": block["data"]}
            return []
        if kind == "tool_use" and self._output_tool is not None and block.get("name") == self._output_tool:
            return self._output_start(index, block, data)
        if kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise self._malformed(f"event {self._events}: tool_use without a str 'id' and 'name'", data)
            self._layout[index] = {"type": "tool_use", "id": call_id}
            self._tool_index[index] = len(self._tool_index)
            initial = block.get("input")
            arguments = json.dumps(initial, ensure_ascii=False, separators=(",", ":")) if initial else ""
            self._tool_arguments[index] = bool(arguments)
            return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": call_id, "name": name, "arguments": arguments}]
        if kind == "compaction":
            self._layout[index] = {"type": "compaction", "length": 0, "block": self._compaction(block, data)}
            return []
        raise self._malformed(f"event {self._events}: content block type {kind!r} is not supported", data)

    def _block_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index = self._index(payload, data)
        entry = self._layout.get(index)
        delta = payload.get("delta")
        if entry is None or not isinstance(delta, dict):
            raise self._malformed(f"event {self._events}: content_block_delta for block {index}, which never started", data)
        kind = delta.get("type")
        if kind == "text_delta" and entry["type"] == "text":
            return self._text(index, delta.get("text"), "text_delta", data)
        if kind == "thinking_delta" and entry["type"] == "thinking":
            return self._text(index, delta.get("thinking"), "reasoning_delta", data)
        if kind == "signature_delta" and entry["type"] in ("thinking", "compaction"):
            signature = delta.get("signature")
            if not isinstance(signature, str):
                raise self._malformed(f"event {self._events}: signature_delta without a str 'signature'", data)
            if entry["type"] == "thinking":
                entry["signature"] += signature
            else:
                entry["block"]["signature"] = (entry["block"].get("signature") or "") + signature
            return []
        if kind == "compaction_delta" and entry["type"] == "compaction":
            # The delta's summary and encrypted content replace the block's (as the SDK reads them).
            fields = {key: delta[key] for key in ("content", "encrypted_content") if key in delta}
            entry["block"] = self._compaction({**entry["block"], **fields}, data)
            return []
        if kind == "input_json_delta" and index in self._output_blocks:
            return self._text(index, delta.get("partial_json"), "text_delta", data)
        if kind == "input_json_delta" and entry["type"] == "tool_use":
            partial = delta.get("partial_json")
            if not isinstance(partial, str):
                raise self._malformed(f"event {self._events}: input_json_delta without a str 'partial_json'", data)
            if not partial:
                return []
            self._tool_arguments[index] = True
            return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": None, "name": None, "arguments": partial}]
        if kind == "citations_delta":
            return []
        raise self._malformed(f"event {self._events}: delta {kind!r} does not fit block {index} ({entry['type']})", data)

    def _block_stop(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        index = self._index(payload, data)
        entry = self._layout.get(index)
        if entry is not None and entry["type"] == "compaction" and not entry["length"]:
            # The summary is whole only now (each delta replaces it): shown as reasoning, once.
            return self._text(index, entry["block"].get("content"), "reasoning_delta", data)
        if index in self._output_blocks and entry is not None and not entry["length"]:
            return self._text(index, "{}", "text_delta", data)  # an output without input is still a JSON object
        if index in self._tool_index and not self._tool_arguments.get(index):
            self._tool_arguments[index] = True  # a call without input still has a JSON object
            return [{"type": "tool_call_delta", "index": self._tool_index[index], "id": None, "name": None, "arguments": "{}"}]
        return []

    def _message_delta(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        delta = payload.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason") is not None:
            if not isinstance(delta["stop_reason"], str):
                raise self._malformed(f"event {self._events}: 'stop_reason' is not a string", data)
            self._stop_reason = delta["stop_reason"]
        self._merge_usage(payload.get("usage"), data)
        return []

    def _message_stop(self, payload: dict[str, Any], data: str) -> list[Chunk]:
        self._done = True
        return []

    # -- helpers --------------------------------------------------------------------------------

    def _output_start(self, index: int, block: dict[str, Any], data: str) -> list[Chunk]:
        """The structured output's forced tool call starts: its input streams as the answer text."""
        self._layout[index] = {"type": "text", "length": 0}
        self._output_blocks.add(index)
        initial = block.get("input")
        return self._text(index, json.dumps(initial, ensure_ascii=False, separators=(",", ":")) if initial else "", "text_delta", data)

    def _text(self, index: int, text: object, kind: str, data: str) -> list[Chunk]:
        if text is None or text == "":
            return []
        if not isinstance(text, str):
            raise self._malformed(f"event {self._events}: block {index} text is not a string", data)
        self._layout[index]["length"] += len(text)
        chunk: Chunk = {"type": "text_delta", "text": text} if kind == "text_delta" else {"type": "reasoning_delta", "text": text}
        return [chunk]

    def _compaction(self, block: dict[str, Any], data: str) -> dict[str, Any]:
        try:
            return compaction_block(block)
        except ValueError as error:
            raise self._malformed(f"event {self._events}: {error}", data) from None

    def _merge_usage(self, usage: object, data: str) -> None:
        if usage is None:
            return
        if not isinstance(usage, dict):
            raise self._malformed(f"event {self._events}: 'usage' is not an object", data)
        # message_delta repeats the counts cumulatively; a null there does not erase a number.
        self._usage = {**(self._usage or {}), **{k: v for k, v in usage.items() if v is not None}}

    def _index(self, payload: dict[str, Any], data: str) -> int:
        index = payload.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise self._malformed(f"event {self._events}: 'index' is not a non-negative integer", data)
        return index

    def _malformed(self, what: str, data: str) -> MalformedResponseError:
        return malformed_stream_error("Anthropic stream", what, data, status=self._status, request_id=self._request_id)

    def _raise_error(self, data: str, error: object = None) -> None:
        error = error if error is not None else data
        raise provider_stream_error(data, error, status=self._status, request_id=self._request_id, transient=TRANSIENT_ERRORS)


_HANDLERS = {
    "message_start": AnthropicStreamTranslator._message_start,
    "content_block_start": AnthropicStreamTranslator._block_start,
    "content_block_delta": AnthropicStreamTranslator._block_delta,
    "content_block_stop": AnthropicStreamTranslator._block_stop,
    "message_delta": AnthropicStreamTranslator._message_delta,
    "message_stop": AnthropicStreamTranslator._message_stop,
}
