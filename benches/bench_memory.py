"""Retained memory of an agent's history, per 1,000 messages, beside what other frameworks hold.

dshkit row: one agent turn of `STEPS` tool steps (the `bench_agent.py` workload: per step streamed
chunks, an assistant message with a tool call, the tool call and its result) on an in-memory
session; measured with `tracemalloc` as what stays allocated while the session is held, model and
agent dropped (`session_and_model`: with the `ScriptedModel` and its recorded requests kept too).
Peer rows hold the same conversation (`session.messages()` exported through dshkit's interop and
loaded back from JSON, so every string is their own) in the framework's own message types;
skipped when the framework is not installed. tracemalloc sees the Python heap only (a native
library's own allocations are not in it); every row is measured the same way.

The row's median is the time of building the history (one round); the figure that matters is
`extra_info["mb_per_1000_messages"]`.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

import bench_agent
import dshkit

STEPS = 500  # 1,000 messages: the prompt, 500 assistant messages, 499 tool results
GROUP = "agent-history-memory"

TARGETS = [
    {
        "name": "retained memory of agent history <= 1.3 MB per 1,000 messages",
        "group": GROUP,
        "extra_info": "mb_per_1000_messages",
        "max_value": 1.3,
    },
    {
        "name": "retained memory of agent history <= 0.8x pydantic-ai's, by tracemalloc (issue 37)",
        "group": GROUP,
        "row": "history_memory[dshkit]",
        "extra_info": "tracemalloc_vs_pydantic_ai",
        "max_value": 0.8,
    },
    {
        "name": "retained memory of agent history <= 0.8x pydantic-ai's, by RSS (issue 37)",
        "group": GROUP,
        "row": "history_memory[dshkit]",
        "extra_info": "rss_vs_pydantic_ai",
        "max_value": 0.8,
    },
]
RSS_COPIES = 20  # histories held at once in the RSS measurement: page-sized noise averages out


def _run_agent(steps: int = STEPS) -> tuple[Any, Any]:
    loop = asyncio.new_event_loop()
    try:
        agent, prompt = bench_agent._new_turn(steps)
        loop.run_until_complete(bench_agent._run_turn(agent, prompt))
    finally:
        loop.close()
    return agent.session, agent.model


def _retained(build: Any) -> tuple[Any, int]:
    """What `build()` returns, and the bytes still allocated once only that is held."""
    _run_agent()  # first-use caches and free lists grown by a first run are no history
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        return kept, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def _session_only() -> Any:
    session, _model = _run_agent()
    return session


def _pydantic_ai_history() -> Any:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from dshkit.interop.pydantic_ai import to_pydantic_ai

    session, _ = _run_agent()
    text = ModelMessagesTypeAdapter.dump_json(to_pydantic_ai(session.messages()))
    return len(session.messages()), text  # loaded below from JSON: no string is shared with dshkit


RSS_CHILD = """
import gc, sys
sys.path.insert(0, sys.argv[1])
import bench_memory
print(bench_memory.rss_mb_per_1000_messages(sys.argv[2]))
"""


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_mb_per_1000_messages(row: str) -> float:
    """Resident memory added by `RSS_COPIES` histories held at once, per 1,000 messages (run in a
    fresh process: what the allocator keeps, native heaps included, which tracemalloc does not see)."""
    _run_agent()  # warm: first-use caches are no history
    if row == "pydantic_ai":
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        messages, text = _pydantic_ai_history()
        build: Any = lambda: ModelMessagesTypeAdapter.validate_json(text)  # noqa: E731
    else:
        messages, build = STEPS * 2, _session_only
    build()
    gc.collect()
    before = _rss()
    kept = [build() for _ in range(RSS_COPIES)]
    gc.collect()
    grown = _rss() - before
    assert len(kept) == RSS_COPIES
    return round(grown / RSS_COPIES / messages * 1000 / 1e6, 3)


def _rss_in_child(row: str) -> float | None:
    if not Path("/proc/self/statm").exists():
        return None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(dshkit.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(Path(__file__).parent), row], capture_output=True, text=True, env=env, check=True)
    return float(out.stdout.split()[-1])


BUILDERS = {
    "dshkit": lambda: _retained(_session_only),
    "dshkit_session_and_model": lambda: _retained(_run_agent),
}


def _messages_of(kept: Any) -> int:
    session = kept[0] if isinstance(kept, tuple) else kept
    return len(session.messages())


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("row", list(BUILDERS))
def test_dshkit_history_memory(benchmark: Any, row: str) -> None:
    benchmark.name = f"test_history_memory[{row}]"
    kept, size = benchmark.pedantic(BUILDERS[row], rounds=1, iterations=1)
    messages = _messages_of(kept)
    benchmark.extra_info["messages"] = messages
    benchmark.extra_info["mb_per_1000_messages"] = round(size / messages * 1000 / 1e6, 3)
    if row == "dshkit" and importlib.util.find_spec("pydantic_ai") is not None:
        # The peer measured here too, in the same run, so the ratios compare like with like.
        peer_messages, text = _pydantic_ai_history()
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        _, peer_size = _retained(lambda: ModelMessagesTypeAdapter.validate_json(text))
        benchmark.extra_info["tracemalloc_vs_pydantic_ai"] = round((size / messages) / (peer_size / peer_messages), 3)
        rss, peer_rss = _rss_in_child("dshkit"), _rss_in_child("pydantic_ai")
        if rss is not None and peer_rss is not None:
            benchmark.extra_info["rss_mb_per_1000_messages"] = rss
            benchmark.extra_info["pydantic_ai_rss_mb_per_1000_messages"] = peer_rss
            benchmark.extra_info["rss_vs_pydantic_ai"] = round(rss / peer_rss, 3)


@pytest.mark.benchmark(group=GROUP)
def test_pydantic_ai_history_memory(benchmark: Any) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    messages, text = _pydantic_ai_history()
    _, size = benchmark.pedantic(lambda: _retained(lambda: ModelMessagesTypeAdapter.validate_json(text)), rounds=1, iterations=1)
    benchmark.extra_info["messages"] = messages  # the conversation's messages, as dshkit counts them
    benchmark.extra_info["mb_per_1000_messages"] = round(size / messages * 1000 / 1e6, 3)


@pytest.mark.benchmark(group=GROUP)
def test_langgraph_history_memory(benchmark: Any) -> None:
    pytest.importorskip("langgraph")
    from langchain_core.messages import messages_from_dict, messages_to_dict

    from dshkit.interop.langchain import to_langchain

    session, _ = _run_agent()
    messages = len(session.messages())
    plain = messages_to_dict(to_langchain(session.messages()))
    _, size = benchmark.pedantic(lambda: _retained(lambda: messages_from_dict(plain)), rounds=1, iterations=1)
    benchmark.extra_info["messages"] = messages
    benchmark.extra_info["mb_per_1000_messages"] = round(size / messages * 1000 / 1e6, 3)
