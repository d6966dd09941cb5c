"""`FallbackModel`: the first of several models that answers.

A request goes to the first model; when it fails before its first chunk (an HTTP error status, a
refused connection, a timeout, a context window too small, any `ModelError`, or a first chunk
that is an error finish) the next model is tried with the same request, and so on. Once a model
has streamed a chunk it is the answer: a later failure is raised as it is (the caller has seen
output, so another model's answer would not be the same response). The last model's failure is
raised when every model failed.

Which model answered is what `provider` and `model` name once its first chunk came, so the
agent records it in the assistant message's source; each fallback is logged (logger
``dshkit.models``, a warning per failed model) and `last_failures` holds the failures of the
latest request.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from dshkit.models.protocol import CancelSignal, Chunk, Model, ModelError, supports_native_output

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["FallbackModel", "falls_back_on"]

_log = logging.getLogger("dshkit.models")


def falls_back_on(error: BaseException) -> bool:
    """The default rule: every `ModelError` (status, connection, timeout, context overflow, ...)
    moves on to the next model; anything else (a bug, bad input) is raised at once."""
    return isinstance(error, ModelError)


class FallbackModel:
    """Tries `models` in order until one starts answering (see the module docstring).

    `fall_back_on(error)` says whether a failure moves on to the next model (default
    `falls_back_on`). It is native for structured output (`supports_native_output`) only when
    every model is, and its `context_window` is the first model's (the one compaction should
    keep requests fitting).
    """

    def __init__(self, models: Sequence[Model], *, fall_back_on: Callable[[BaseException], bool] = falls_back_on) -> None:
        if isinstance(models, (str, bytes)) or not isinstance(models, Sequence) or not models:
            raise TypeError("FallbackModel models: expected a non-empty list of models")
        for position, model in enumerate(models):
            if not callable(getattr(model, "stream", None)):
                raise TypeError(f"FallbackModel models[{position}]: expected a model, got {type(model).__name__}")
        if not callable(fall_back_on):
            raise TypeError("FallbackModel fall_back_on: expected a callable taking the error")
        self.models: tuple[Model, ...] = tuple(models)
        self.fall_back_on = fall_back_on
        self.native_output = all(supports_native_output(model) for model in self.models)
        self.last_failures: list[tuple[Model, BaseException]] = []
        self._answered: Model = self.models[0]

    @property
    def provider(self) -> str:
        """The provider of the model that answered the latest request (before any: the first's)."""
        return self._answered.provider

    @property
    def model(self) -> str:
        """The name of the model that answered the latest request (before any: the first's)."""
        return self._answered.model

    @property
    def context_window(self) -> int | None:
        """The first model's context window (what `Compaction` measures against by default)."""
        return getattr(self.models[0], "context_window", None)

    def __repr__(self) -> str:
        return f"FallbackModel([{', '.join(f'{m.provider}:{m.model}' for m in self.models)}])"

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the response of the first model that starts answering `request`."""
        return self._stream(request, cancel)

    async def _stream(self, request: ModelRequest, cancel: CancelSignal | None) -> AsyncIterator[Chunk]:
        self.last_failures = []
        last = len(self.models) - 1
        for position, model in enumerate(self.models):
            stream: Any = None
            try:
                stream = model.stream(request, cast(CancelSignal, cancel)).__aiter__()  # None: never cancelled, as HTTP models take it
                first = await stream.__anext__()
            except StopAsyncIteration:
                self._answered = model  # an empty stream is a normal stop: this model answered
                return
            except Exception as error:
                await _close(stream)
                if position == last or not self.fall_back_on(error) or (cancel is not None and cancel.cancelled):
                    raise
                self._failed(model, error)
                continue
            if position < last and first.get("type") == "finish" and first.get("reason") == "error":
                await _close(stream)
                info = first.get("error") or {}
                self._failed(model, ModelError(str(info.get("message", "model error")), code=str(info.get("code", "model_error"))))
                continue
            self._answered = model
            if self.last_failures:
                _log.info("FallbackModel: %s/%s answered after %d failed", model.provider, model.model, len(self.last_failures))
            try:
                yield first
                async for chunk in stream:
                    yield chunk
            finally:
                await _close(stream)
            return

    def _failed(self, model: Model, error: BaseException) -> None:
        self.last_failures.append((model, error))
        _log.warning("FallbackModel: %s/%s failed before answering (%s); trying the next model", model.provider, model.model, error)

    async def aclose(self) -> None:
        """Close every model that holds connections (``aclose``)."""
        for model in self.models:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()

    async def __aenter__(self) -> FallbackModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _close(stream: Any) -> None:
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
