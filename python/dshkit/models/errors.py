"""Typed failures of HTTP models, all `ModelError`s (see `dshkit.models.protocol`).

Every error carries what a user needs to act on it: `status` (HTTP status, when there was a
response), `message` (the provider's own words when it gave any), `request_id` (the provider's
request id header, to quote to its support), `code` (short and machine-readable) and `retryable`
(whether repeating the same request may succeed; the model itself already retried those it could).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, ModelError

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "IncompleteStreamError",
    "MalformedResponseError",
    "ModelConnectionError",
    "ModelHTTPError",
    "ModelTimeoutError",
    "ProviderStreamError",
    "RateLimitError",
    "ServerError",
    "http_error_for_status",
    "is_context_overflow",
    "provider_error_fields",
]


class ModelHTTPError(ModelError):
    """The endpoint answered with an HTTP error status.

    `body` is the start of the response body as received (for errors whose body is not the usual
    JSON ``{"error": {...}}``); `retry_after` is the server's ``Retry-After`` in seconds, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        request_id: str | None = None,
        retryable: bool = False,
        body: str = "",
        retry_after: float | None = None,
        provider_code: str | None = None,
    ) -> None:
        super().__init__(
            message, code=f"http_{status}", status=status, request_id=request_id, retryable=retryable
        )
        self.body = body
        self.retry_after = retry_after
        self.provider_code = provider_code

    def __str__(self) -> str:
        where = f" (request id {self.request_id})" if self.request_id else ""
        return f"HTTP {self.status}: {self.message}{where}"


class AuthenticationError(ModelHTTPError):
    """401 or 403: the key is missing, wrong or not allowed. Never retried."""


class RateLimitError(ModelHTTPError):
    """429: too many requests or tokens. Retried, honouring ``Retry-After``."""


class ServerError(ModelHTTPError):
    """5xx: the provider failed. Retried with backoff."""


class BadRequestError(ModelHTTPError):
    """Any other 4xx (bad body, unknown model, context too long). Never retried."""


class ModelConnectionError(ModelError):
    """No HTTP response: connection refused or reset, DNS failure, TLS failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="connection_error", retryable=True)


class ModelTimeoutError(ModelError):
    """The endpoint did not connect, answer or send the next bytes within the timeout."""

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message, code="timeout", request_id=request_id, retryable=True)


class MalformedResponseError(ModelError):
    """The response is not a valid chat completion stream; `received` is what came instead."""

    def __init__(
        self, message: str, *, received: str = "", status: int | None = None, request_id: str | None = None
    ) -> None:
        super().__init__(message, code="malformed_response", status=status, request_id=request_id)
        self.received = received


class IncompleteStreamError(ModelError):
    """The stream ended (connection closed) before the response said it was finished."""

    def __init__(self, message: str, *, status: int | None = None, request_id: str | None = None) -> None:
        super().__init__(
            message, code="incomplete_stream", status=status, request_id=request_id, retryable=True
        )


class ProviderStreamError(ModelError):
    """The provider reported an error inside an already started (HTTP 200) stream.

    `provider_code` is the provider's own name for it (``overloaded_error``, ``server_error``);
    `retryable` is set for the transient kinds (retried only before any output was streamed).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        request_id: str | None = None,
        provider_code: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message, code="provider_error", status=status, request_id=request_id, retryable=retryable)
        self.provider_code = provider_code


# How providers word "the request does not fit the context window" (lowercase): OpenAI's and
# vLLM's "maximum context length", Anthropic's "prompt is too long: N tokens > M maximum".
_OVERFLOW_CODES = frozenset({"context_length_exceeded", "context_window_exceeded", "string_above_max_length"})
_OVERFLOW_WORDS = ("prompt is too long", "maximum context length", "context length exceeded", "exceeds the context window")


def is_context_overflow(provider_code: str | None, message: str | None) -> bool:
    """Whether a provider's error (its code and message) says the request is too large for the window.

    The one mapping behind `CONTEXT_WINDOW_EXCEEDED` for every API: Chat Completions and
    Responses send the code ``context_length_exceeded`` (as an HTTP 400 or a ``response.failed``
    event), Anthropic an ``invalid_request_error`` whose message begins "prompt is too long".
    """
    if provider_code is not None and provider_code.lower() in _OVERFLOW_CODES:
        return True
    text = (message or "").lower()
    return any(words in text for words in _OVERFLOW_WORDS)


def http_error_for_status(
    status: int,
    message: str,
    *,
    request_id: str | None = None,
    body: str = "",
    retry_after: float | None = None,
    provider_code: str | None = None,
) -> ModelHTTPError:
    """The typed error for an HTTP error status (retryable: 408, 409, 429 and 5xx)."""
    kind: type[ModelHTTPError]
    if status in (401, 403):
        kind, retryable = AuthenticationError, False
    elif status == 429:
        kind, retryable = RateLimitError, True
    elif status >= 500:
        kind, retryable = ServerError, True
    else:
        # 408 (request timeout) and 409 (lock conflict) are transient by definition.
        kind, retryable = BadRequestError, status in (408, 409)
    error = kind(
        message,
        status=status,
        request_id=request_id,
        retryable=retryable,
        body=body,
        retry_after=retry_after,
        provider_code=provider_code,
    )
    if status in (400, 413) and is_context_overflow(provider_code, message):
        error.code = CONTEXT_WINDOW_EXCEEDED
    return error


def provider_error_fields(error: object) -> tuple[str | None, str | None]:
    """The ``(message, code)`` of a provider's ``{"error": ...}`` value (either may be missing)."""
    if isinstance(error, str):
        return error or None, None
    if not isinstance(error, Mapping):
        return None, None
    message: Any = error.get("message")
    code: Any = error.get("code")
    if code is None:
        code = error.get("type")
    return (
        message if isinstance(message, str) and message else None,
        str(code) if isinstance(code, (str, int)) and not isinstance(code, bool) else None,
    )
