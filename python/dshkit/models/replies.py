"""Replies a test model can be given in plain words, and the chunks each stands for.

A reply is one of:

- a `str`: a text answer (streamed word by word, then a ``stop`` finish);
- `call("add", a=2, b=3)`, or a list of them: tool calls (a ``tool_calls`` finish);
- `output(value)`: the run's structured output: a call of the final-answer tool the request's
  ``config["output_schema"]`` names, or that JSON document as text for a model with
  `native_output` (a pydantic model, dataclass or plain JSON value);
- an exception instance: raised when the reply is streamed (a failed call);
- a list of chunk mappings (`dshkit.models.protocol`), possibly with exceptions among them, as is.

`reply_chunks(reply, request, native=...)` turns any of them into the chunk list to stream.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

_CHUNK_TYPES = ("text_delta", "reasoning_delta", "tool_call_delta", "usage", "finish")
# Words with their trailing whitespace: a str answer streams in several deltas, so a test (or the
# demo) can cancel it half way and see a real prefix.
_WORD = re.compile(r"\s*\S+\s*|\s+")
_WRAPPED_KEY = "response"  # how the agent asks for a non-object output (dshkit.agent._run.output)


class Call:
    """A scripted tool call: `name` and its `arguments` (a JSON object); `call_id` optional."""

    __slots__ = ("arguments", "call_id", "name")

    def __init__(self, name: str, arguments: Mapping[str, Any], call_id: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"call name: expected a non-empty str, got {name!r}")
        self.name, self.arguments, self.call_id = name, dict(arguments), call_id

    def __repr__(self) -> str:
        return f"call({self.name!r}, **{self.arguments!r})"


class Output:
    """A scripted structured output `value` (see the module doc)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"output({self.value!r})"


def call(name: str, /, _id: str | None = None, **arguments: Any) -> Call:
    """A reply calling tool `name` with keyword `arguments` (`_id` sets the call id)."""
    return Call(name, arguments, _id)


def output(value: Any) -> Output:
    """A reply giving the run's structured output `value`."""
    return Output(value)


def check_reply(reply: object, where: str) -> object:
    """`reply` checked once, when the script is made (chunk lists copied); an error naming `where`."""
    if isinstance(reply, (str, Call, Output, BaseException)):
        return reply
    if isinstance(reply, (bytes, Mapping)) or not isinstance(reply, Sequence):
        raise TypeError(
            f"{where}: expected a str or a list of chunks, got {type(reply).__name__} "
            "(a reply may also be call(...), a list of calls, output(...) or an exception)"
        )
    items = list(reply)
    if items and all(isinstance(item, Call) for item in items):
        return items
    for position, chunk in enumerate(items):
        if isinstance(chunk, BaseException):
            continue
        if isinstance(chunk, Call):
            raise TypeError(f"{where}[{position}]: a list mixes call(...) with chunks; give calls only or chunks only")
        if not isinstance(chunk, Mapping):
            raise TypeError(f"{where}[{position}]: expected a chunk mapping, got {type(chunk).__name__}")
        if chunk.get("type") not in _CHUNK_TYPES:
            raise ValueError(
                f"{where}[{position}]: unknown chunk type {chunk.get('type')!r} (expected one of {', '.join(_CHUNK_TYPES)})"
            )
    return [item if isinstance(item, BaseException) else dict(item) for item in items]


def reply_chunks(reply: object, request: ModelRequest, *, native: bool, number: int = 0) -> list[Any]:
    """The chunks (and exceptions) a checked reply streams for `request` (call `number` names call ids)."""
    if isinstance(reply, str):
        return text_chunks(reply)
    if isinstance(reply, BaseException):
        return [reply]
    if isinstance(reply, Call):
        reply = [reply]
    if isinstance(reply, Output):
        return _output_chunks(reply.value, request, native, number)
    items: list[Any] = list(reply)  # type: ignore[call-overload]  # a checked reply: a list by now
    if items and isinstance(items[0], Call):
        return calls_chunks(items, number)
    return items  # the checked copies: `replay` yields a fresh dict of each


def text_chunks(text: str) -> list[Any]:
    """A text answer streamed word by word, then a ``stop`` finish."""
    chunks: list[Any] = [{"type": "text_delta", "text": word} for word in _WORD.findall(text)]
    chunks.append({"type": "finish", "reason": "stop"})
    return chunks


def calls_chunks(calls: Sequence[Call], number: int) -> list[Any]:
    """Tool calls, one complete delta each, then a ``tool_calls`` finish."""
    chunks: list[Any] = [
        {
            "type": "tool_call_delta", "index": index, "id": one.call_id or f"call_{number}_{index}",
            "name": one.name, "arguments": json.dumps(one.arguments),
        }
        for index, one in enumerate(calls)
    ]
    chunks.append({"type": "finish", "reason": "tool_calls"})
    return chunks


def _output_chunks(value: Any, request: ModelRequest, native: bool, number: int) -> list[Any]:
    entry = request.config.get("output_schema")
    if entry is None:
        raise ValueError("output(...) reply: the request asks for no structured output (no output_type in the run)")
    document = _jsonable(value)
    properties = entry["schema"].get("properties") or {}
    if set(properties) == {_WRAPPED_KEY} and not (isinstance(document, dict) and set(document) == {_WRAPPED_KEY}):
        document = {_WRAPPED_KEY: document}  # a non-object output type: the agent asked for it wrapped
    if native:
        return text_chunks(json.dumps(document))
    return calls_chunks([Call(entry["name"], document)], number)


def _jsonable(value: Any) -> Any:
    try:
        from pydantic_core import to_jsonable_python
    except ImportError:
        pass
    else:
        return to_jsonable_python(value)  # models, dataclasses and lists of them, at any depth
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


__all__ = ["Call", "Output", "call", "calls_chunks", "check_reply", "output", "reply_chunks", "text_chunks"]
