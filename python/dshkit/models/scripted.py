"""`ScriptedModel`: replays scripted responses, offline and deterministically."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from dshkit.models.protocol import CancelSignal, Chunk, ModelError
from dshkit.models.replies import Call, Output, check_reply, reply_chunks

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

ScriptedResponse = Union[str, Call, Output, BaseException, Sequence[Union[Mapping[str, Any], BaseException, Call]]]


class OfflineModel:
    """What the offline models share (`ScriptedModel`, `FunctionModel`, `TestModel`): the names
    recorded in their answers' source, and every request received, in order."""

    def __init__(self, kind: str, provider: str, model: str, native_output: bool) -> None:
        if not isinstance(provider, str) or not provider:
            raise TypeError(f"{kind} provider: expected a non-empty str")
        if not isinstance(model, str) or not model:
            raise TypeError(f"{kind} model: expected a non-empty str")
        self._provider = provider
        self._model = model
        self.native_output = bool(native_output)
        self._requests: list[ModelRequest] = []

    @property
    def provider(self) -> str:
        """Provider name recorded in the assistant messages' source."""
        return self._provider

    @property
    def model(self) -> str:
        """Model name recorded in the assistant messages' source."""
        return self._model

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """Every request received so far, in order."""
        return tuple(self._requests)

    def _record(self, request: ModelRequest) -> int:
        """Keep `request`; its number (0 for the first call)."""
        self._requests.append(request)
        return len(self._requests) - 1


class ScriptedModel(OfflineModel):
    """A model that answers call *n* with ``responses[n]``.

    A response is a plain reply (`dshkit.models.replies`): a `str` (a text answer, streamed word
    by word, then a ``stop`` finish), `call("add", a=2, b=3)` or a list of calls, `output(value)`
    (the run's structured output), an exception (the call fails), or a list of chunks (mappings,
    see `dshkit.models.protocol`) replayed as given, where an exception instance is raised at
    that point of the stream (a transport failure). `delay` seconds are slept between chunks so
    that tests can cancel mid-stream. Every request received is kept, in order, in `requests`.
    A call beyond the script raises `ModelError` with code ``"script_exhausted"``.
    `native_output=True` makes `output(...)` answer as text JSON, as a model with native
    structured output does.
    """

    def __init__(
        self,
        responses: Sequence[ScriptedResponse],
        *,
        provider: str = "scripted",
        model: str = "scripted",
        delay: float = 0.0,
        native_output: bool = False,
    ) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError(
                f"ScriptedModel responses: expected a list of responses, got {type(responses).__name__}"
            )
        OfflineModel.__init__(self, "ScriptedModel", provider, model, native_output)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise ValueError(f"ScriptedModel delay: expected a number >= 0, got {delay!r}")
        self._script = [check_reply(response, f"ScriptedModel responses[{index}]") for index, response in enumerate(responses)]
        self.delay = float(delay)

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._script) - len(self._requests)

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the next scripted response (the request is recorded at call time)."""
        number = self._record(request)
        if number >= len(self._script):
            return _exhausted(number, len(self._script))
        return replay(reply_chunks(self._script[number], request, native=self.native_output, number=number), cancel, self.delay)


async def _exhausted(number: int, scripted: int) -> AsyncIterator[Chunk]:
    """A stream that fails when read: call `number` is beyond a script of `scripted` responses."""
    raise ModelError(f"ScriptedModel: no response scripted for call {number} (the script has {scripted})", code="script_exhausted")
    yield  # an async generator: the error comes when the stream is read, as a model's would


async def replay(script: list[Any], cancel: CancelSignal | None, delay: float = 0.0) -> AsyncIterator[Chunk]:
    """Stream `script`'s chunks (fresh dicts), raising its exceptions where they stand."""
    for position, item in enumerate(script):
        if position and delay:
            await asyncio.sleep(delay)
        if cancel is not None and cancel.cancelled:
            return
        if isinstance(item, BaseException):
            raise item
        yield dict(item)  # type: ignore[misc]  # a fresh dict: consumers cannot edit the script


__all__ = ["ScriptedModel", "ScriptedResponse", "replay"]
