"""`FunctionModel`: a model whose every answer is computed by a function of the request."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from dshkit.models.protocol import CancelSignal, Chunk
from dshkit.models.replies import check_reply, reply_chunks
from dshkit.models.scripted import OfflineModel, replay

if TYPE_CHECKING:
    from dshkit.session import ModelRequest


class FunctionModel(OfflineModel):
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
        OfflineModel.__init__(self, "FunctionModel", provider, model if model is not None else getattr(fn, "__name__", "function"), native_output)
        self._fn = fn

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the reply `fn(request)` gives."""
        return self._answer(request, cancel, self._record(request))

    async def _answer(self, request: ModelRequest, cancel: CancelSignal | None, number: int) -> AsyncIterator[Chunk]:
        reply = self._fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        checked = check_reply(reply, f"FunctionModel {self._model}() reply to call {number}")
        async for chunk in replay(reply_chunks(checked, request, native=self.native_output, number=number), cancel):
            yield chunk


__all__ = ["FunctionModel"]
