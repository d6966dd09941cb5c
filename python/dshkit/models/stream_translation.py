"""What the stream translators of every wire format share (chat completions, Messages, Responses).

Each `StreamTranslator` reads its own event types, but parses an event's JSON, words a malformed
event or a provider's error, maps a finish reason, reads usage and closes a response (usage, then
finish) the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from dshkit.models.errors import MalformedResponseError, ProviderStreamError, is_context_overflow, provider_error_fields
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, Chunk, FinishChunk, ModelErrorInfo

__all__ = [
    "closing_chunks",
    "event_object",
    "excerpt",
    "malformed_stream_error",
    "map_finish_reason",
    "provider_stream_error",
    "usage_summary",
]

_EXCERPT_CHARS = 200


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """`text` shortened for an error message (what was received, recognisably)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def malformed_stream_error(stream: str, what: str, data: str, *, status: int | None, request_id: str | None) -> MalformedResponseError:
    """The error for an event of a `stream` (e.g. ``"Anthropic stream"``) that breaks its format."""
    return MalformedResponseError(
        f"malformed {stream}: {what}; received {excerpt(data)!r}",
        received=data,
        status=status,
        request_id=request_id,
    )


def provider_stream_error(
    data: str, error: object, *, status: int | None, request_id: str | None, transient: frozenset[str] = frozenset()
) -> ProviderStreamError:
    """The error for a provider's error event: its message and code, or the event's excerpt;
    retryable when the code is one of the provider's `transient` kinds."""
    message, code = provider_error_fields(error)
    failure = ProviderStreamError(
        message or f"the provider reported an error in the stream: {excerpt(data)}",
        status=status,
        request_id=request_id,
        provider_code=code,
        retryable=code in transient,
    )
    if is_context_overflow(code, message):
        failure.code = CONTEXT_WINDOW_EXCEEDED
    return failure


def event_object(data: str, events: int, malformed: Callable[[str, str], MalformedResponseError]) -> dict[str, Any]:
    """Event number `events` parsed as a JSON object; `malformed(what, data)` words the error if not."""
    try:
        payload = json.loads(data)
    except ValueError as error:
        raise malformed(f"event {events} is not JSON ({error})", data) from None
    if not isinstance(payload, dict):
        raise malformed(f"event {events} is JSON {type(payload).__name__}, expected an object", data)
    return payload


def closing_chunks(usage: Mapping[str, Any] | None, finish: FinishChunk) -> list[Chunk]:
    """The chunks that close a response: the usage (when the stream gave one), then the finish."""
    chunks: list[Chunk] = []
    if usage is not None:
        chunks.append({"type": "usage", "usage": usage})
    chunks.append(finish)
    return chunks


# Provider finish reasons that end a response normally, by protocol reason.
_FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "model_length": "max_tokens",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
}
_ABORTED = frozenset(("abort", "aborted", "cancelled", "canceled"))


def map_finish_reason(reason: str, *, saw_tool_calls: bool) -> FinishChunk:
    """The protocol finish chunk for a provider's ``finish_reason``.

    A ``stop`` after streamed tool calls is a ``tool_calls`` finish (some servers always say
    ``stop``). Content filtering, a provider abort and unknown reasons finish with ``error``.
    """
    mapped = _FINISH_REASONS.get(reason)
    if mapped == "stop" and saw_tool_calls:
        mapped = "tool_calls"
    if mapped is not None:
        return {"type": "finish", "reason": mapped}  # type: ignore[typeddict-item]
    error: ModelErrorInfo
    if reason in _ABORTED:
        error = {"code": "ABORTED", "message": f"the provider aborted the response ({reason})"}
    elif reason == "content_filter":
        error = {"code": "content_filter", "message": "the provider's content filter stopped the response"}
    else:
        error = {"code": "finish_reason", "message": f"the response finished with reason {reason!r}"}
    return {"type": "finish", "reason": "error", "error": error}


def usage_summary(usage: Mapping[str, Any]) -> dict[str, int]:
    """Normalised token counts of a usage mapping from any of the three APIs (keys only when known).

    ``input_tokens`` (all prompt tokens, cached ones included), ``cached_input_tokens`` (OpenAI
    ``prompt_tokens_details.cached_tokens`` / ``input_tokens_details.cached_tokens``, DeepSeek
    ``prompt_cache_hit_tokens``, Anthropic ``cache_read_input_tokens``), ``cache_write_tokens``
    (Anthropic ``cache_creation_input_tokens``), ``output_tokens``, ``reasoning_tokens`` and
    ``total_tokens``.
    """
    summary: dict[str, int] = {}

    def number(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def put(name: str, value: object) -> None:
        if number(value) is not None and name not in summary:
            summary[name] = value  # type: ignore[assignment]

    def detail(key: str, inner: str) -> object:
        details = usage.get(key)
        return details.get(inner) if isinstance(details, Mapping) else None

    put("input_tokens", usage.get("prompt_tokens"))
    put("cached_input_tokens", detail("prompt_tokens_details", "cached_tokens"))
    put("cached_input_tokens", detail("input_tokens_details", "cached_tokens"))
    put("cached_input_tokens", usage.get("prompt_cache_hit_tokens"))
    cache_read, cache_write = number(usage.get("cache_read_input_tokens")), number(usage.get("cache_creation_input_tokens"))
    if "prompt_tokens" not in usage and (cache_read is not None or cache_write is not None):
        # Anthropic counts cache reads and writes apart from input_tokens.
        put("input_tokens", (number(usage.get("input_tokens")) or 0) + (cache_read or 0) + (cache_write or 0))
    put("cached_input_tokens", cache_read)
    put("cache_write_tokens", cache_write)
    put("input_tokens", usage.get("input_tokens"))
    put("output_tokens", usage.get("completion_tokens"))
    put("output_tokens", usage.get("output_tokens"))
    put("reasoning_tokens", detail("completion_tokens_details", "reasoning_tokens"))
    put("reasoning_tokens", detail("output_tokens_details", "reasoning_tokens"))
    put("total_tokens", usage.get("total_tokens"))
    return summary
