"""`DshkitSession.add_items` (the OpenAI Agents SDK session over a dshkit log) on a long history,
beside the SDK's own `SQLiteSession.add_items` on the same history, in the same run.

Each round adds one new turn of four items (a prompt, a function call, its output, the answer),
fresh ids every time, so no round is taken for a retry, to a session already holding 1,000 or
10,000 items: both files (a dshkit JSONL log, the SDK's SQLite database) on disk, each written
and made durable the way its session does by default. `add_items` converts only its batch, so a
round costs the same on both histories (before, it converted the whole history each call).
Skipped without openai-agents.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HISTORIES = {"1k": 1_000, "10k": 10_000}
TARGETS = [
    {
        "name": f"DshkitSession.add_items of one turn on a {size}-item history <= 0.5x the SDK's SQLiteSession.add_items",
        "group": f"agents-session-add-items-{size}",
        "versus": "openai_agents_sqlite_session",
        "max_ratio": 0.5,
    }
    for size in HISTORIES
]

_fresh = itertools.count()


def turn_items(turn: int | str) -> list[dict[str, Any]]:
    """One turn as the SDK saves it: the prompt, a call, its output and the answer."""
    return [
        {"role": "user", "content": f"question {turn}"},
        {"type": "function_call", "id": f"fc_{turn}", "call_id": f"call_{turn}", "name": "lookup", "arguments": '{"q": 1}'},
        {"type": "function_call_output", "call_id": f"call_{turn}", "output": f"result {turn}"},
        {"id": f"msg_{turn}", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": f"answer {turn}", "annotations": []}]},
    ]


def history(items: int) -> list[dict[str, Any]]:
    return [item for turn in range(items // 4) for item in turn_items(turn)]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Per history size: a `DshkitSession` and a `SQLiteSession`, each already holding it."""
    pytest.importorskip("agents")
    from agents import SQLiteSession

    from dshkit.interop.openai_agents import DshkitSession

    opened: dict[str, dict[str, Any]] = {}
    for size, count in HISTORIES.items():
        folder = tmp_path_factory.mktemp(f"agents-{size}")
        ours, theirs = DshkitSession("bench", folder / "bench.jsonl"), SQLiteSession("bench", folder / "bench.sqlite")
        for session in (ours, theirs):
            asyncio.run(session.add_items(history(count)))
        assert asyncio.run(ours.get_items(limit=4)) == asyncio.run(theirs.get_items(limit=4))
        opened[size] = {"dshkit": ours, "openai_agents_sqlite_session": theirs}
    yield opened
    for pair in opened.values():
        for session in pair.values():
            session.close()


def add_one_turn(session: Any, calls: list[int]) -> Callable[[], None]:
    def add() -> None:
        asyncio.run(session.add_items(turn_items(f"new{next(_fresh)}")))
        calls.append(1)

    return add


@pytest.mark.parametrize("size", list(HISTORIES))
@pytest.mark.parametrize("row", ["dshkit", "openai_agents_sqlite_session"])
def test_add_items_on_a_long_history(benchmark: Any, sessions: dict[str, dict[str, Any]], size: str, row: str) -> None:
    benchmark.group = f"agents-session-add-items-{size}"
    session = sessions[size][row]
    before = len(asyncio.run(session.get_items()))
    calls: list[int] = []
    benchmark.pedantic(add_one_turn(session, calls), rounds=30, warmup_rounds=2)
    assert len(asyncio.run(session.get_items())) == before + 4 * len(calls)  # every round added its turn
