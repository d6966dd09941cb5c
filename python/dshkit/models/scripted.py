"""`ScriptedModel`: replays scripted responses, offline and deterministically."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

from dshkit.models.protocol import CancelSignal, Chunk, ModelError

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

ScriptedResponse = Union[str, Sequence[Union[Mapping[str, Any], BaseException]]]

_CHUNK_TYPES = ("text_delta", "reasoning_delta", "tool_call_delta", "usage", "finish")
# Words with their trailing whitespace: a str answer streams in several deltas, so a test (or the
# demo) can cancel it half way and see a real prefix.
_WORD = re.compile(r"\s*\S+\s*|\s+")


class ScriptedModel:
    """A model that answers call *n* with ``responses[n]``.

    A response is a `str` (a plain text answer, streamed word by word, then a ``stop`` finish)
    or a list of chunks (mappings, see `dshkit.models.protocol`), replayed as given. An exception
    instance in a chunk list is raised at that point of the stream (a transport failure).
    `delay` seconds are slept between chunks so that tests can cancel mid-stream. Every request
    received is kept, in order, in `requests`. A call beyond the script raises `ModelError`
    with code ``"script_exhausted"``.
    """

    def __init__(
        self,
        responses: Sequence[ScriptedResponse],
        *,
        provider: str = "scripted",
        model: str = "scripted",
        delay: float = 0.0,
    ) -> None:
        if isinstance(responses, (str, bytes)) or not isinstance(responses, Sequence):
            raise TypeError(
                f"ScriptedModel responses: expected a list of responses, got {type(responses).__name__}"
            )
        if not isinstance(provider, str) or not provider:
            raise TypeError("ScriptedModel provider: expected a non-empty str")
        if not isinstance(model, str) or not model:
            raise TypeError("ScriptedModel model: expected a non-empty str")
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not delay >= 0:
            raise ValueError(f"ScriptedModel delay: expected a number >= 0, got {delay!r}")
        self._script = [_script_response(response, index) for index, response in enumerate(responses)]
        self._provider = provider
        self._model = model
        self.delay = float(delay)
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

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._script) - len(self._requests)

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream the next scripted response (the request is recorded at call time)."""
        number = len(self._requests)
        self._requests.append(request)
        script = self._script[number] if number < len(self._script) else None
        return self._replay(number, script, cancel)

    async def _replay(
        self,
        number: int,
        script: list[dict[str, Any] | BaseException] | None,
        cancel: CancelSignal | None,
    ) -> AsyncIterator[Chunk]:
        if script is None:
            raise ModelError(
                f"ScriptedModel: no response scripted for call {number} "
                f"(the script has {len(self._script)})",
                code="script_exhausted",
            )
        for position, item in enumerate(script):
            if position and self.delay:
                await asyncio.sleep(self.delay)
            if cancel is not None and cancel.cancelled:
                return
            if isinstance(item, BaseException):
                raise item
            yield dict(item)  # type: ignore[misc]  # a fresh dict: consumers cannot edit the script


def _script_response(response: object, index: int) -> list[dict[str, Any] | BaseException]:
    where = f"ScriptedModel responses[{index}]"
    if isinstance(response, str):
        chunks: list[dict[str, Any] | BaseException] = [
            {"type": "text_delta", "text": word} for word in _WORD.findall(response)
        ]
        chunks.append({"type": "finish", "reason": "stop"})
        return chunks
    if isinstance(response, (bytes, Mapping)) or not isinstance(response, Sequence):
        raise TypeError(f"{where}: expected a str or a list of chunks, got {type(response).__name__}")
    script: list[dict[str, Any] | BaseException] = []
    for position, chunk in enumerate(response):
        if isinstance(chunk, BaseException):
            script.append(chunk)
            continue
        if not isinstance(chunk, Mapping):
            raise TypeError(f"{where}[{position}]: expected a chunk mapping, got {type(chunk).__name__}")
        kind = chunk.get("type")
        if kind not in _CHUNK_TYPES:
            raise ValueError(
                f"{where}[{position}]: unknown chunk type {kind!r} (expected one of {', '.join(_CHUNK_TYPES)})"
            )
        script.append(dict(chunk))
    return script


__all__ = ["ScriptedModel", "ScriptedResponse"]
