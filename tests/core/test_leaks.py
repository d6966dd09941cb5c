"""Reference and memory leaks: repeat each operation many times; objects and memory stay flat.

Measured after a warm-up round, so caches, interned strings and allocator arenas are already in
place; a leak of even one object (or one small native allocation) per call shows up as growth
proportional to the iteration count, far above the bounds used here.
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from dshkit import (
    FrozenDict,
    Message,
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
    from_json,
    json_default,
    new_message_id,
    thaw,
    to_json,
)

ITERATIONS = 200_000
USER = {"kind": "user"}
TREE = {"rows": [{"id": 1, "name": "a", "score": 0.5, "tags": ["x", "y"], "ok": True, "none": None}], "m": {"k": "v"}}
FROZEN = freeze(TREE)
TEXT = to_json(FROZEN)
MESSAGE = create_assistant_message(
    [{"type": "text", "text": "hi"}, {"type": "tool_call", "id": "c", "name": "n", "arguments": "{}"}],
    provider="p",
    model="m",
    replay_state={"s": [1]},
)
MESSAGE_JSON = MESSAGE.to_json()
MESSAGE_DICT = MESSAGE.to_dict()
LOOP: list[Any] = []
LOOP.append(LOOP)


def rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def expect_error(call: Callable[[], Any], error: type[BaseException]) -> Callable[[], None]:
    def run() -> None:
        try:
            call()
        except error:
            return
        raise AssertionError(f"{call} did not raise {error.__name__}")

    return run


OPERATIONS: dict[str, Callable[[], Any]] = {
    "new_message_id": new_message_id,
    "create_user_message": lambda: create_user_message("hello there", source=USER),
    "create_message": lambda: create_message(
        role="system", content=[{"type": "text", "text": "s"}], source={"kind": "plugin", "plugin": "p"}
    ),
    "create_assistant_message": lambda: create_assistant_message(
        "a", provider="p", model="m", replay_state={"x": [1]}
    ),
    "create_tool_result_message": lambda: create_tool_result_message("c", "r", is_error=True),
    "freeze plain": lambda: freeze(TREE),
    "freeze frozen": lambda: freeze(FROZEN),
    "thaw": lambda: thaw(FROZEN),
    "to_json": lambda: to_json(FROZEN),
    "to_json plain": lambda: to_json(TREE),
    "from_json": lambda: from_json(TEXT),
    "message to_json": MESSAGE.to_json,
    "Message.from_json": lambda: Message.from_json(MESSAGE_JSON),
    "message to_dict": MESSAGE.to_dict,
    "message text and tool_calls": lambda: (MESSAGE.text, MESSAGE.tool_calls),
    "with_content": lambda: MESSAGE.with_content("new"),
    "freeze_message mapping": lambda: freeze_message(MESSAGE_DICT),
    "freeze_message message": lambda: freeze_message(MESSAGE),
    "pickle frozendict": lambda: pickle.loads(pickle.dumps(FROZEN)),
    "pickle message": lambda: pickle.loads(pickle.dumps(MESSAGE)),
    "hash and eq": lambda: (hash(freeze(TREE)), FROZEN == TREE, hash(create_user_message("x", source=USER))),
    "FrozenDict api": lambda: (
        FrozenDict(a=1) | {"b": [2]},
        {"c": 3} | FrozenDict(a=1),
        repr(FROZEN),
        list(FROZEN.items()),
        FROZEN.get("missing", 1),
        FrozenDict.fromkeys(["a", "b"]),
    ),
    "json_default": lambda: json.dumps(FROZEN, default=json_default),
    "error: non-JSON value": expect_error(lambda: freeze({"a": [{1}]}), TypeError),
    "error: nan": expect_error(lambda: to_json({"a": float("nan")}), ValueError),
    "error: cycle": expect_error(lambda: freeze(LOOP), ValueError),
    "error: bad block": expect_error(lambda: create_user_message([{"type": "text"}], source=USER), ValueError),
    "error: refused id": expect_error(lambda: create_user_message("x", source=USER, id="m"), TypeError),  # type: ignore[call-arg]
    "error: missing id": expect_error(
        lambda: freeze_message({"role": "user", "content": "x", "source": USER}), ValueError
    ),
    "error: invalid JSON": expect_error(lambda: from_json('{"a": [1, 2'), ValueError),
    "error: mutation": expect_error(lambda: FROZEN.__setitem__("a", 1), TypeError),
    "error: Message()": expect_error(lambda: Message(), TypeError),  # type: ignore[call-arg]
}

# Slower operations repeat fewer times: a leak of one object per call still shows as thousands.
SLOW = {
    "error: cycle": 10_000,
    "pickle message": 20_000,
    "FrozenDict api": 20_000,
    "json_default": 40_000,
    "hash and eq": 40_000,
    "pickle frozendict": 40_000,
    "Message.from_json": 50_000,
    "error: bad block": 100_000,
    "error: non-JSON value": 100_000,
}


@pytest.mark.parametrize("name", OPERATIONS)
def test_repeating_an_operation_leaks_nothing(name: str) -> None:
    operation = OPERATIONS[name]
    iterations = SLOW.get(name, ITERATIONS)
    for _ in range(iterations // 10):
        operation()
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    objects_before = len(gc.get_objects())
    rss_before = rss_bytes()

    for _ in range(iterations):
        operation()

    gc.collect()
    block_growth = sys.getallocatedblocks() - blocks_before
    object_growth = len(gc.get_objects()) - objects_before
    rss_after = rss_bytes()
    assert block_growth < 500, f"{name}: {block_growth} Python allocations kept after {iterations} calls"
    assert object_growth < 100, f"{name}: {object_growth} tracked objects kept after {iterations} calls"
    if rss_before is not None and rss_after is not None:
        growth_mb = (rss_after - rss_before) / 2**20
        assert growth_mb < 3, f"{name}: resident memory grew {growth_mb:.1f} MiB over {iterations} calls"


def test_short_lived_threads_leave_nothing_behind() -> None:
    """Per-thread state in the core (caches, id state) must be released when a thread ends:
    servers that run each request on a fresh thread must not grow without bound."""
    document = to_json({f"key{i}": [i, {f"inner{i}": None}] for i in range(600)})
    message_json = MESSAGE_JSON

    def work() -> None:
        from_json(document)
        Message.from_json(message_json)
        freeze(TREE)
        create_user_message("x", source=USER)

    def run_threads(count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=work)
            thread.start()
            thread.join()

    run_threads(20)
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    run_threads(300)
    gc.collect()
    growth = sys.getallocatedblocks() - blocks_before
    assert growth < 2_000, f"{growth} Python allocations kept after 300 short-lived threads"
