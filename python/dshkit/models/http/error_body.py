"""Reading what an HTTP response says besides its stream: error bodies, JSON answers, the
request id and ``Retry-After`` (shared by every HTTP model, `dshkit.models.http.model`)."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import httpx

from dshkit.models.stream_translation import excerpt
from dshkit.models.errors import (
    MalformedResponseError,
    ModelHTTPError,
    ProviderStreamError,
    http_error_for_status,
    provider_error_fields,
)

__all__ = ["http_error", "read_bounded", "read_error_text", "read_json", "request_id_of", "retry_after_seconds"]

_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-trace-id", "trace-id")
_ERROR_BODY_LIMIT = 64 * 1024  # read at most this much of an error body


async def read_bounded(response: httpx.Response, limit: int = _ERROR_BODY_LIMIT) -> bytes:
    """At most the first `limit` bytes of the body, or `limit` + 1 when it is longer; then the
    response is closed (the rest is never read, however large the server makes it)."""
    raw = bytearray()
    try:
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) > limit:
                break
    finally:
        await response.aclose()
    return bytes(raw[: limit + 1])


async def read_error_text(response: httpx.Response) -> str:
    """The start of an error body (at most 64 KiB) as text; the rest is never read."""
    return (await read_bounded(response))[:_ERROR_BODY_LIMIT].decode("utf-8", "replace")


async def read_json(response: httpx.Response, request_id: str | None, limit: int, owner: str) -> dict[str, Any]:
    """The JSON object of a whole (non-streamed) answer of at most `limit` bytes (the model's
    `max_event_bytes`: the answer is its one event); an error object raises `ProviderStreamError`."""
    raw = await read_bounded(response, limit)
    if len(raw) > limit:
        raise MalformedResponseError(
            f"the JSON response is larger than the limit of {limit} bytes (max_event_bytes); "
            f"if the provider really sends answers this large, pass a larger max_event_bytes to the Provider of {owner}",
            received=raw[:_ERROR_BODY_LIMIT].decode("utf-8", "replace"),
            status=response.status_code,
            request_id=request_id,
        )
    text = raw.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        raise MalformedResponseError(
            f"the response is application/json but not a JSON object: {excerpt(text)!r}",
            received=text,
            status=response.status_code,
            request_id=request_id,
        )
    if payload.get("error") is not None:
        message, code = provider_error_fields(payload["error"])
        raise ProviderStreamError(
            message or f"the provider reported an error: {excerpt(text)}",
            status=response.status_code,
            request_id=request_id,
            provider_code=code,
        )
    return payload


async def http_error(response: httpx.Response, request_id: str | None) -> ModelHTTPError:
    text = await read_error_text(response)
    message: str | None = None
    code: str | None = None
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        if payload.get("error") is not None:
            message, code = provider_error_fields(payload["error"])
        if message is None:
            # vLLM / FastAPI shapes: {"object": "error", "message": ...} or {"detail": ...}.
            message, code = provider_error_fields(payload)
            if message is None and isinstance(payload.get("detail"), str):
                message = payload["detail"]
    if message is None:
        message = excerpt(text.strip()) or response.reason_phrase or "no message"
    return http_error_for_status(
        response.status_code,
        message,
        request_id=request_id,
        body=text,
        retry_after=retry_after_seconds(response.headers),
        provider_code=code,
    )


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, or ``Retry-After`` (seconds or a date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    text = headers.get("retry-after")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return value if value >= 0 and value == value and value != float("inf") else None


def request_id_of(headers: httpx.Headers) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        value: str | None = headers.get(name)
        if value:
            return value
    return None
