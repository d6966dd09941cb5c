"""What the stream translators of every wire format share (chat completions, Messages, Responses).

Each `StreamTranslator` reads its own event types, but parses an event's JSON, words a malformed
event or a provider's error, and closes a response (usage, then finish) the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from dshkit.models.errors import MalformedResponseError, ProviderStreamError, provider_error_fields
from dshkit.models.protocol import Chunk, FinishChunk

__all__ = ["closing_chunks", "event_object", "excerpt", "malformed_stream_error", "provider_stream_error"]

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
    return ProviderStreamError(
        message or f"the provider reported an error in the stream: {excerpt(data)}",
        status=status,
        request_id=request_id,
        provider_code=code,
        retryable=code in transient,
    )


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
