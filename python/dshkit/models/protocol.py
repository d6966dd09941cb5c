"""The one streaming model protocol every model implements (scripted, HTTP, ...).

A model has `provider` and `model` names and a `stream(request, cancel)` method returning an
async iterator of chunks. A chunk is a plain mapping with a ``"type"``:

- ``{"type": "text_delta", "text": str}``
- ``{"type": "reasoning_delta", "text": str}``
- ``{"type": "tool_call_delta", "index": int, "id": str | None, "name": str | None,
  "arguments": str}``: `id` and `name` may be ``None`` after the first delta of a call;
  `arguments` is the next piece of the raw JSON text the model writes.
- ``{"type": "usage", "usage": {...}}``: token counts (later usage chunks update earlier keys).
- ``{"type": "finish", "reason": "stop" | "tool_calls" | "max_tokens" | "error",
  "replay_state"?: JSON, "error"?: {"code": str, "message": str, ...}}``: last.

A stream that ends without a finish chunk is a normal stop. A model reports failure either by
finishing with reason ``"error"`` or by raising (preferably a `ModelError`); either way the agent
discards the partial output and ends the turn with the error. A stream may stop early when
`cancel.cancelled` becomes true; the agent also stops reading and closes the iterator
(``aclose()``) on cancellation, so a model that ignores the signal is still cancelled promptly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Optional, Protocol, TypedDict, Union, runtime_checkable

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

FinishReason = Literal["stop", "tool_calls", "max_tokens", "error"]
FINISH_REASONS: frozenset[str] = frozenset(("stop", "tool_calls", "max_tokens", "error"))


class TextDelta(TypedDict):
    """The next piece of the answer text."""

    type: Literal["text_delta"]
    text: str


class ReasoningDelta(TypedDict):
    """The next piece of the model's reasoning text."""

    type: Literal["reasoning_delta"]
    text: str


class ToolCallDelta(TypedDict):
    """The next piece of tool call number `index` (ids and names usually arrive once)."""

    type: Literal["tool_call_delta"]
    index: int
    id: Optional[str]
    name: Optional[str]
    arguments: str


class UsageChunk(TypedDict):
    """Token usage reported by the provider (e.g. ``prompt_tokens``, ``completion_tokens``)."""

    type: Literal["usage"]
    usage: Mapping[str, Any]


class ModelErrorInfo(TypedDict, total=False):
    """What a finish chunk with reason ``"error"`` carries under ``"error"``."""

    code: str
    message: str
    status: int
    request_id: str
    retryable: bool


class _FinishRequired(TypedDict):
    type: Literal["finish"]
    reason: FinishReason


class FinishChunk(_FinishRequired, total=False):
    """The last chunk: why the response ended, plus provider state needed to replay it."""

    replay_state: Any
    error: ModelErrorInfo


Chunk = Union[TextDelta, ReasoningDelta, ToolCallDelta, UsageChunk, FinishChunk]


class ToolSpec(TypedDict):
    """A tool as the model sees it (in the request header): name, description, JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@runtime_checkable
class CancelSignal(Protocol):
    """Read side of a cancellation token, handed to `Model.stream` and to tools."""

    @property
    def cancelled(self) -> bool:
        """True once cancellation was requested."""
        ...

    @property
    def cause(self) -> str | None:
        """The first cause given to cancel (``None`` while not cancelled)."""
        ...

    async def wait(self) -> None:
        """Return once cancellation was requested (immediately if it already was)."""
        ...


@runtime_checkable
class Model(Protocol):
    """A streaming chat model."""

    @property
    def provider(self) -> str:
        """Provider name, recorded in each assistant message's source."""
        ...

    @property
    def model(self) -> str:
        """Model name, recorded in each assistant message's source."""
        ...

    def stream(self, request: ModelRequest, cancel: CancelSignal) -> AsyncIterator[Chunk]:
        """Stream one response to `request` as chunks (usually an async generator)."""
        ...


def supports_native_output(model: object) -> bool:
    """Whether `model` sends a request's ``config["output_schema"]`` as its API's native structured output."""
    return getattr(model, "native_output", False) is True


CONTEXT_WINDOW_EXCEEDED = "context_window_exceeded"
"""The `ModelError.code` (and finish-chunk error code) of a request too large for the model's
context window, whichever API said so: the agent compacts and retries the step once on it."""


class ModelError(Exception):
    """A model call failed. Models may raise it (or a subclass) from `stream`.

    `code` is a short machine-readable kind (``"http_429"``, ``"timeout"``, ``"ABORTED"``, ...);
    `status` and `request_id` are the HTTP facts when there are any; `retryable` says whether
    repeating the same request may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "model_error",
        status: int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.request_id = request_id
        self.retryable = retryable

    def to_info(self) -> ModelErrorInfo:
        """The error as the JSON mapping logged in ``turn/end`` and finish chunks."""
        info: ModelErrorInfo = {"code": self.code, "message": self.message}
        if self.status is not None:
            info["status"] = self.status
        if self.request_id is not None:
            info["request_id"] = self.request_id
        if self.retryable:
            info["retryable"] = True
        return info


__all__ = [
    "CONTEXT_WINDOW_EXCEEDED",
    "FINISH_REASONS",
    "CancelSignal",
    "Chunk",
    "FinishChunk",
    "FinishReason",
    "Model",
    "ModelError",
    "ModelErrorInfo",
    "ReasoningDelta",
    "TextDelta",
    "ToolCallDelta",
    "ToolSpec",
    "UsageChunk",
    "supports_native_output",
]
