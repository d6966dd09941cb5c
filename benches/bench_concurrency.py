"""Many agents at once on one event loop: throughput as the count grows, the cyclic GC's share of
the wall time, and the same load on pydantic-ai in the same run (issue 37).

Every agent runs one turn of `STEPS` steps (the `bench_agent.py` workload: a no-op tool call per
step, text at the last) on its own in-memory session; `count` agents are started together on one
loop and the round ends when all are idle. Throughput is steps per second of wall time; the GC's
share is the time inside collections (`gc.callbacks`) over the wall time. The cyclic GC stays on:
a program pays for the collections its allocations trigger.

`dshkit_scaling` runs 100 and 1,000 agents in alternation and records the median of the paired
rounds' ratio (1,000 over 100), so a busy spell on the shared machine hits both sides alike.
The pydantic-ai row (`FunctionModel` scripted the same way, a no-op tool) is skipped without it.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from typing import Any

import pytest

import bench_agent

STEPS = bench_agent.STEPS
GROUP = "agents-concurrent-in-memory"
PEER_AGENTS = 100

TARGETS = [
    {
        "name": "1,000 concurrent in-memory agents >= 90% of the steps/s of 100",
        "group": GROUP,
        "row": "dshkit_scaling",
        "extra_info": "throughput_1000_over_100",
        "min_value": 0.9,
    },
    {
        "name": "cyclic GC < 10% of the wall time at 1,000 concurrent in-memory agents",
        "group": GROUP,
        "row": "dshkit_scaling",
        "extra_info": "gc_share_at_1000",
        "max_value": 0.1,
    },
]


class GcClock:
    """Seconds spent inside cyclic collections while it is installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def run_dshkit_agents(count: int) -> tuple[float, float]:
    """Steps per second and the GC's share of the wall time for `count` concurrent agents."""
    loop = asyncio.new_event_loop()
    turns = [bench_agent._new_turn(STEPS) for _ in range(count)]
    gc.collect()  # the previous round's garbage is not this round's cost

    async def all_turns() -> None:
        await asyncio.gather(*(bench_agent._run_turn(agent, prompt) for agent, prompt in turns))

    try:
        with GcClock() as clock:
            start = time.perf_counter()
            loop.run_until_complete(all_turns())
            wall = time.perf_counter() - start
    finally:
        loop.close()
    assert all(len(agent.session.messages()) == 2 * STEPS for agent, _ in turns)
    return count * STEPS / wall, clock.seconds / wall


@pytest.mark.benchmark(group=GROUP)
@pytest.mark.parametrize("count", [100, 1000])
def test_dshkit_concurrent(benchmark: Any, count: int) -> None:
    benchmark.name = f"test_dshkit_concurrent[{count}]"
    results: list[tuple[float, float]] = []
    benchmark.pedantic(lambda: results.append(run_dshkit_agents(count)), rounds=5, warmup_rounds=1)
    benchmark.extra_info["agents"] = count
    benchmark.extra_info["steps_per_s"] = round(statistics.median(r[0] for r in results))
    benchmark.extra_info["gc_share"] = round(statistics.median(r[1] for r in results), 3)


@pytest.mark.benchmark(group=GROUP)
def test_dshkit_scaling(benchmark: Any) -> None:
    ratios: list[float] = []
    shares: list[float] = []

    def paired_round() -> None:
        small, _ = run_dshkit_agents(100)
        large, share = run_dshkit_agents(1000)
        ratios.append(large / small)
        shares.append(share)

    benchmark.pedantic(paired_round, rounds=5, warmup_rounds=1)
    benchmark.extra_info["throughput_1000_over_100"] = round(statistics.median(ratios), 3)
    benchmark.extra_info["gc_share_at_1000"] = round(statistics.median(shares), 3)


def _pydantic_ai_agents(count: int) -> list[Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def script(messages: list[Any], info: Any) -> Any:
        step = sum(isinstance(message, ModelResponse) for message in messages)
        if step < STEPS - 1:
            return ModelResponse(parts=[ToolCallPart("noop", {}, tool_call_id=f"call-{step}")])
        return ModelResponse(parts=[TextPart("Done: every step ran.")])

    async def noop() -> str:
        """does nothing"""
        return "ok"

    return [Agent(FunctionModel(script), tools=[noop], system_prompt="bench") for _ in range(count)]


def run_pydantic_ai_agents(count: int) -> float:
    agents = _pydantic_ai_agents(count)

    async def all_turns() -> list[Any]:
        return await asyncio.gather(*(agent.run("run the steps") for agent in agents))

    start = time.perf_counter()
    results = asyncio.run(all_turns())
    wall = time.perf_counter() - start
    assert all(result.output == "Done: every step ran." for result in results)
    return count * STEPS / wall


@pytest.mark.benchmark(group=GROUP)
def test_pydantic_ai_concurrent(benchmark: Any) -> None:
    pytest.importorskip("pydantic_ai")
    results: list[float] = []
    benchmark.pedantic(lambda: results.append(run_pydantic_ai_agents(PEER_AGENTS)), rounds=3, warmup_rounds=0)
    benchmark.extra_info["agents"] = PEER_AGENTS
    benchmark.extra_info["steps_per_s"] = round(statistics.median(results))
