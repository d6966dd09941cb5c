"""The bounds a served app keeps: body size, message size, open streams per principal."""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from dshkit.serve.errors import ApiError


@dataclass(frozen=True)
class Limits:
    """`max_body_bytes` (413 beyond), `max_message_chars` (413 beyond), `max_streams_per_principal`
    (429 beyond: a client may retry once one of its streams closes)."""

    max_body_bytes: int = 256 * 1024
    max_message_chars: int = 64 * 1024
    max_streams_per_principal: int = 8


async def read_json_object(request: Request, limits: Limits) -> dict[str, Any]:
    """The request body as a JSON object: 413 when too large, 400 when not a JSON object."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body_bytes:
        raise ApiError(413, "body_too_large", f"the body has {declared} bytes; at most {limits.max_body_bytes} are accepted")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limits.max_body_bytes:
            raise ApiError(413, "body_too_large", f"the body exceeds {limits.max_body_bytes} bytes")
    if not body:
        return {}
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ApiError(400, "malformed_json", f"the body must be a JSON object, not {type(value).__name__}")
    return value


class StreamCounter:
    """Open event streams per principal (one process's count; each API process bounds its own)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def acquire(self, principal: str) -> None:
        """Count one more open stream, or refuse with 429."""
        with self._lock:
            if self._open[principal] >= self._limit:
                raise ApiError(429, "too_many_streams", f"at most {self._limit} event streams may be open at once per principal")
            self._open[principal] += 1

    def release(self, principal: str) -> None:
        """One stream closed."""
        with self._lock:
            self._open[principal] -= 1
            if self._open[principal] <= 0:
                del self._open[principal]
