"""`FunctionModel`: a model whose every answer is computed by a function of the request."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from dshkit.models.protocol import CancelSignal, Chunk
from dshkit.models.replies import check_reply, reply_chunks
from dshkit.models.scripted import replay

if TYPE_CHECKING:
    from dshkit.session import ModelRequest


class FunctionModel:
    """A model answering each request with ``fn(request)`` (a plain function or a coroutine function).

    `fn` returns a reply as `ScriptedModel` takes them (`dshkit.models.replies`): a `str`,
    `call(...)` or a list of calls, `output(value)`, an exception, or a list of chunks. It sees
    the whole `ModelRequest` (messages, tools, ``config["output_schema"]``), so a test can answer
    by what the agent sent. Every request is kept in `requests`.
    """

    def __init__(
        self, fn: Callable[[ModelRequest], Any], *, provider: str = "function", model: str | None = None,
        native_output: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"FunctionModel fn: expected a callable taking the request, got {type(fn).__name__}")
        name = model if model is not None else getattr(fn, "__name__", "function")
        if not isinstance(provider, str) or not provider or not isinstance(name, str) or not name:
            raise TypeError("FunctionModel provider and model: expected non-empty strs")
        self._fn = fn
        self._provider = provider
        self._model = name
        self.native_output = bool(native_output)
        self.requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        """Provider name recorded in the assistant messages' source."""
        return self._provider

    @property
    def model(self) -> str:
        """Model name recorded in the assistant messages' source (the function's name by default)."""
        return self._model

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the reply `fn(request)` gives."""
        number = len(self.requests)
        self.requests.append(request)
        return self._answer(request, cancel, number)

    async def _answer(self, request: ModelRequest, cancel: CancelSignal | None, number: int) -> AsyncIterator[Chunk]:
        reply = self._fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        checked = check_reply(reply, f"FunctionModel {self._model}() reply to call {number}")
        async for chunk in replay(reply_chunks(checked, request, native=self.native_output, number=number), cancel):
            yield chunk


__all__ = ["FunctionModel"]
