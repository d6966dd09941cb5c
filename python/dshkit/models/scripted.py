"""`ScriptedModel`: replays scripted responses, offline and deterministically."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from dshkit import FrozenDict, freeze, thaw
from dshkit.models.protocol import CancelSignal, Chunk, ModelError
from dshkit.models.replies import Call, Output, check_reply, reply_chunks

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

ScriptedResponse = Union[str, Call, Output, BaseException, Sequence[Union[Mapping[str, Any], BaseException, Call]]]


class OfflineModel:
    """What the offline models share (`ScriptedModel`, `FunctionModel`, `TestModel`): the names
    recorded in their answers' source, and every request received, in order (unless told to keep
    none: a request kept is two objects the cyclic GC tracks for the model's life, issue 37)."""

    def __init__(self, kind: str, provider: str, model: str, native_output: bool, keep_requests: bool = True) -> None:
        if not isinstance(provider, str) or not provider:
            raise TypeError(f"{kind} provider: expected a non-empty str")
        if not isinstance(model, str) or not model:
            raise TypeError(f"{kind} model: expected a non-empty str")
        if type(keep_requests) is not bool:
            raise TypeError(f"{kind} keep_requests: expected a bool, got {type(keep_requests).__name__}")
        self._kind = kind
        self._provider = provider
        self._model = model
        self.native_output = bool(native_output)
        self._requests: list[ModelRequest] | None = [] if keep_requests else None
        self._calls = 0  # requests received, kept or not

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
        """Every request received so far, in order (`RuntimeError` if the model keeps none)."""
        if self._requests is None:
            raise RuntimeError(f"{self._kind}(keep_requests=False) keeps no requests: it has received {self._calls}")
        return tuple(self._requests)

    def _record(self, request: ModelRequest) -> int:
        """Keep `request` (unless the model keeps none); its number (0 for the first call)."""
        if self._requests is not None:
            self._requests.append(request)
        self._calls += 1
        return self._calls - 1


class ScriptedModel(OfflineModel):
    """A model that answers call *n* with ``responses[n]``.

    A response is a plain reply (`dshkit.models.replies`): a `str` (a text answer, streamed word
    by word, then a ``stop`` finish), `call("add", a=2, b=3)` or a list of calls, `output(value)`
    (the run's structured output), an exception (the call fails), or a list of chunks (mappings,
    see `dshkit.models.protocol`) replayed as given, where an exception instance is raised at
    that point of the stream (a transport failure). `delay` seconds are slept between chunks so
    that tests can cancel mid-stream. Every request received is kept, in order, in `requests`;
    `keep_requests=False` keeps none (many long-lived scripted agents: each request kept is two
    objects the cyclic GC tracks and walks at every full collection for the model's life).
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
        keep_requests: bool = True,
    ) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError(
                f"ScriptedModel responses: expected a list of responses, got {type(responses).__name__}"
            )
        OfflineModel.__init__(self, "ScriptedModel", provider, model, native_output, keep_requests)
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise ValueError(f"ScriptedModel delay: expected a number >= 0, got {delay!r}")
        self._script = [_kept(check_reply(response, f"ScriptedModel responses[{index}]")) for index, response in enumerate(responses)]
        self.delay = float(delay)

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._script) - self._calls

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the next scripted response (the request is recorded at call time)."""
        number = self._record(request)
        if number >= len(self._script):
            return _exhausted(number, len(self._script))
        return replay(reply_chunks(self._script[number], request, native=self.native_output, number=number), cancel, self.delay)


def _kept(reply: object) -> object:
    """A checked reply as the script keeps it: a list of JSON chunks as one frozen tuple, which the
    cyclic GC does not track (a script lives as long as its model: issue 37); anything else as it is."""
    if type(reply) is list and reply and all(type(item) is dict for item in reply):
        try:
            return freeze(reply)
        except (TypeError, ValueError):
            pass  # a value that is not JSON: the chunks stay the checked copies
    return reply


async def _exhausted(number: int, scripted: int) -> AsyncIterator[Chunk]:
    """A stream that fails when read: call `number` is beyond a script of `scripted` responses."""
    raise ModelError(f"ScriptedModel: no response scripted for call {number} (the script has {scripted})", code="script_exhausted")
    yield  # an async generator: the error comes when the stream is read, as a model's would


async def replay(script: list[Any], cancel: CancelSignal | None, delay: float = 0.0) -> AsyncIterator[Chunk]:
    """Stream `script`'s chunks (fresh dicts; a frozen chunk thawed), raising its exceptions where they stand."""
    for position, item in enumerate(script):
        if position and delay:
            await asyncio.sleep(delay)
        if cancel is not None and cancel.cancelled:
            return
        if isinstance(item, BaseException):
            raise item
        # a fresh dict: consumers cannot edit the script
        yield thaw(item) if type(item) is FrozenDict else dict(item)  # type: ignore[misc]


__all__ = ["ScriptedModel", "ScriptedResponse", "replay"]
