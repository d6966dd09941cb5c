"""Workloads and the alternatives dshkit is measured against, shared by the bench modules.

Workloads (issue 2): a one-line user message, a three-block assistant message with tool-call
arguments, a 4 KB tool result, a 200-row JSON tool result. Every builder returns a fresh plain
(mutable) tree so that one benchmark cannot hand a frozen or cached value to the next.

The alternatives are written the way a user of each library would write them, not tuned against
dshkit: a recursive pure-Python freeze, the recursive `immutables.Map` freeze that library lacks,
frozen `msgspec` structs for the typed route, and plain dicts with a `uuid7` id for "no freezing".
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from types import MappingProxyType
from typing import Any, Literal, Union

import immutables
import msgspec
import uuid_utils

from dshkit import Message

PROVIDER = "scripted"
MODEL = "bench-model-1"
TOOL_CALL_ID = "call_0001"


# --- workloads -------------------------------------------------------------------------------


def assistant_blocks() -> list[dict[str, Any]]:
    """Three blocks as a model writes them: reasoning, text, and a tool call with JSON arguments."""
    arguments = json.dumps(
        {
            "path": "src/app/handlers.py",
            "pattern": "def handle_(request|event)",
            "context_lines": 3,
            "case_sensitive": False,
            "include": ["*.py", "*.pyi"],
        }
    )
    return [
        {
            "type": "reasoning",
            "text": "The user wants every handler; search the handlers module before answering.",
        },
        {"type": "text", "text": "Let me look for the request and event handlers first."},
        {"type": "tool_call", "id": TOOL_CALL_ID, "name": "grep", "arguments": arguments},
    ]


def tool_output_4kb_text() -> str:
    """About 4 KB of tool output text (a grep listing), as a tool hands it to the model."""
    lines = []
    size = 0
    line_number = 0
    while size < 4096:
        line_number += 1
        line = f"src/app/handlers.py:{line_number * 7}: def handle_request_{line_number}(request, *, timeout=30):"
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:4096]


def tool_result_4kb_blocks() -> list[dict[str, Any]]:
    """The content of a 4 KB text tool result: one text block."""
    return [{"type": "text", "text": tool_output_4kb_text()}]


def search_results_4kb() -> dict[str, Any]:
    """A structured 4 KB JSON tool result (a web search tool's answer)."""
    results = [
        {
            "rank": rank,
            "title": f"Result {rank}: handling request timeouts in asyncio services",
            "url": f"https://docs.example.org/guides/asyncio/timeouts-{rank}.html",
            "snippet": (
                "Cancel the awaiting task, record the partial output, and close the stream so the "
                "caller sees a clean end of response; retries use exponential backoff."
            ),
            "score": round(1.0 - rank / 50, 3),
            "cached": rank % 3 == 0,
        }
        for rank in range(1, 12)
    ]
    return {"query": "asyncio request timeout cancellation", "total": 1280, "results": results}


def rows_200() -> list[dict[str, Any]]:
    """A 200-row JSON tool result (a database query tool's answer)."""
    return [
        {
            "id": row,
            "name": f"user-{row:04d}",
            "email": f"user{row}@example.com",
            "score": row * 1.25,
            "active": row % 2 == 0,
            "tags": ["customer", f"tier-{row % 4}"],
            "address": {"city": f"City {row % 17}", "zip": f"{10000 + row}"},
            "last_login": None if row % 5 == 0 else f"2025-01-{row % 28 + 1:02d}T08:30:00Z",
        }
        for row in range(200)
    ]


def text_blocks(count: int) -> list[dict[str, Any]]:
    """`count` short text blocks: the content of a message whose size grows with `count`."""
    return [{"type": "text", "text": f"paragraph {index}: some model-facing text"} for index in range(count)]


# --- plain-dict messages (the "no freezing" baseline) ----------------------------------------


def plain_message(role: str, content: list[dict[str, Any]], source: Mapping[str, Any]) -> dict[str, Any]:
    """The plain dict a user without dshkit would build: a `uuid7` id, copied blocks and source.

    Blocks and source are copied one level (what a caller does so that later edits of its own
    dicts do not show through); nested lists inside a block stay shared.
    """
    return {
        "id": str(uuid_utils.uuid7()),
        "role": role,
        "content": [dict(block) for block in content],
        "source": dict(source),
    }


def plain_tool_result_message(call_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    """The plain-dict equivalent of `create_tool_result_message(call_id, content)`."""
    block = {"type": "tool_result", "tool_call_id": call_id, "content": content, "is_error": False}
    return plain_message("user", [block], {"kind": "tool", "call_id": call_id})


# --- the alternatives: deep freezes ---------------------------------------------------------


def pure_python_freeze(value: Any) -> Any:
    """Recursive freeze as a user writes it: dict -> read-only mapping proxy, list -> tuple.

    It validates nothing (no key types, no float range, no cycles), so it is a generous baseline.
    """
    if isinstance(value, dict):
        return MappingProxyType({key: pure_python_freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple([pure_python_freeze(item) for item in value])
    return value


def immutables_freeze(value: Any) -> Any:
    """Recursive freeze into `immutables.Map` (the library freezes one level only)."""
    if isinstance(value, dict):
        return immutables.Map({key: immutables_freeze(item) for key, item in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple([immutables_freeze(item) for item in value])
    return value


def orjson_roundtrip(value: Any) -> Any:
    """Detach by serialising and parsing (still mutable afterwards)."""
    import orjson

    return orjson.loads(orjson.dumps(value))


def msgspec_roundtrip(value: Any) -> Any:
    """Detach with msgspec's JSON codec (still mutable afterwards)."""
    return msgspec.json.decode(msgspec.json.encode(value))


# --- the alternatives: frozen msgspec structs (the typed route) ------------------------------


class Address(msgspec.Struct, frozen=True):
    city: str
    zip: str


class Row(msgspec.Struct, frozen=True):
    id: int
    name: str
    email: str
    score: float
    active: bool
    tags: tuple[str, ...]
    address: Address
    last_login: Union[str, None]


RowTable = tuple[Row, ...]


class TextBlock(msgspec.Struct, frozen=True, tag="text", tag_field="type"):
    text: str


class ReasoningBlock(msgspec.Struct, frozen=True, tag="reasoning", tag_field="type"):
    text: str


class ToolCallBlock(msgspec.Struct, frozen=True, tag="tool_call", tag_field="type"):
    id: str
    name: str
    arguments: str


class ToolResultBlock(msgspec.Struct, frozen=True, tag="tool_result", tag_field="type"):
    tool_call_id: str
    content: tuple[TextBlock, ...]
    is_error: bool = False


Block = Union[TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock]


class StructSource(msgspec.Struct, frozen=True):
    kind: str
    provider: Union[str, None] = None
    model: Union[str, None] = None
    call_id: Union[str, None] = None


class StructMessage(msgspec.Struct, frozen=True):
    id: str
    role: Literal["system", "user", "assistant"]
    content: tuple[Block, ...]
    source: StructSource


StructBlocks = tuple[Block, ...]


def msgspec_user_message(text: str, source: Mapping[str, Any]) -> StructMessage:
    """A frozen msgspec message built directly, with a `uuid7` id."""
    return StructMessage(
        id=str(uuid_utils.uuid7()),
        role="user",
        content=(TextBlock(text=text),),
        source=StructSource(kind=source["kind"]),
    )


def msgspec_message(role: str, content: list[dict[str, Any]], source: Mapping[str, Any]) -> StructMessage:
    """A frozen msgspec message whose blocks are validated and converted from plain dicts."""
    return StructMessage(
        id=str(uuid_utils.uuid7()),
        role=role,  # type: ignore[arg-type]
        content=msgspec.convert(content, StructBlocks),
        source=msgspec.convert(source, StructSource),
    )


# --- helpers for the benches ------------------------------------------------------------------


def to_plain(value: Any) -> Any:
    """Any library's frozen tree back to plain dicts/lists, to check an alternative's result."""
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, msgspec.Struct):
        return to_plain(msgspec.to_builtins(value))
    if isinstance(value, Mapping):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Sequence) or type(value).__name__ == "PVector":
        return [to_plain(item) for item in value]
    return value


def peak_allocation_bytes(function: Callable[[Any], Any], argument: Any, calls: int) -> int:
    """Peak bytes of Python-heap memory allocated while calling `function(argument)` `calls` times.

    Any single allocation, even one freed at once, raises the peak above the starting level. The
    measuring itself allocates a little (its own counters): a zero-call run is subtracted. Only
    allocations through Python's allocators are seen (a native library's own heap is not traced).
    """
    function(argument)  # first-call effects (lazy caches, interned names) are not per call
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        overhead = _traced_peak(function, argument, 0)
        return max(0, _traced_peak(function, argument, calls) - overhead)
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _traced_peak(function: Callable[[Any], Any], argument: Any, calls: int) -> int:
    loop = repeat(None, calls)
    start = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    for _ in loop:
        function(argument)
    return tracemalloc.get_traced_memory()[1] - start
