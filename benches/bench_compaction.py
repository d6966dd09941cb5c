"""Automatic compaction keeps a step's cost flat: 2,000 tool steps of one turn in a 16k-token window.

One round runs one turn on a fresh in-memory session: the model asks for one `read` call a step
(each result ~500 tokens) until step 2,000, then answers; summaries are written by the same model.
The window fills every ~25 steps, so the run prunes and summarizes about 75 times. The row
`dshkit` has `Compaction(context_window=16_000)`; `no_compaction` is the same loop without it,
whose history (and request) grows to ~1M tokens: the comparison a user without compaction gets.

The target: the mean step cost over steps 1,800-2,000 is within 1.2x of steps 10-210 (both spans
hold compactions at the same rate, so the ratio is per step amortized). Step cost is the time
between two consecutive model requests (tool, appends, meter, compaction when due).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import dshkit
from dshkit.agent import Agent, Compaction, Tool
from dshkit.agent._compaction.summary import SUMMARY_SYSTEM
from dshkit.session import Session

STEPS = 2000
WINDOW = 16_000
EARLY = (10, 210)
LATE = (STEPS - 200, STEPS)
GROUP = "compaction-2000-steps-16k"

TARGETS = [
    {
        "name": "with compaction, a step at 2,000 costs <= 1.2x a step at 10 (mean of 200 steps each)",
        "group": GROUP,
        "row": "dshkit",
        "extra_info": "late_to_early_step_ratio",
        "max_value": 1.2,
    },
    {
        "name": "no request over the 16k window by the meter",
        "group": GROUP,
        "row": "dshkit",
        "extra_info": "largest_request_tokens",
        "max_value": WINDOW,
    },
]


class _Loop:
    """Calls `read` STEPS times, then stops; answers summary requests with a short checkpoint."""

    provider = "bench"
    model = "bench"

    def __init__(self) -> None:
        self.calls = 0
        self.times: list[float] = []
        self.agent: Agent | None = None
        self.largest = 0  # the largest request by the agent's meter

    def stream(self, request: Any, cancel: Any = None) -> AsyncIterator[dict[str, Any]]:
        if request.system == SUMMARY_SYSTEM:
            return self._summary()
        self.calls += 1
        self.times.append(time.perf_counter())
        if self.agent is not None:
            self.largest = max(self.largest, self.agent.tokens)
        return self._step(self.calls)

    async def _summary(self) -> AsyncIterator[dict[str, Any]]:
        yield {"type": "text_delta", "text": "Checkpoint: the task reads pages in order; keep going. " * 10}
        yield {"type": "finish", "reason": "stop"}

    async def _step(self, number: int) -> AsyncIterator[dict[str, Any]]:
        if number <= STEPS:
            yield {"type": "tool_call_delta", "index": 0, "id": f"call_{number}", "name": "read", "arguments": json.dumps({"page": number})}
            yield {"type": "finish", "reason": "tool_calls"}
        else:
            yield {"type": "text_delta", "text": "All pages read."}
            yield {"type": "finish", "reason": "stop"}


def _read(arguments: dict[str, Any], ctx: Any) -> str:
    return (f"page {arguments['page']}: lorem ipsum dolor sit amet. " * 60)[:2000]


TOOLS = [Tool("read", "Read one page.", {"type": "object", "properties": {"page": {"type": "integer"}}}, _read)]


def _run(compaction: Compaction | None) -> tuple[Agent, _Loop]:
    model = _Loop()
    agent = Agent(model, session=Session(), tools=TOOLS, system="bench", compaction=compaction)
    model.agent = agent

    async def main() -> None:
        agent.followup(dshkit.create_user_message("Read every page.", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())
    assert model.calls == STEPS + 1
    return agent, model


def _mean_step(times: list[float], span: tuple[int, int]) -> float:
    return statistics.fmean(times[index + 1] - times[index] for index in range(*span))


def _measure(benchmark: Any, compaction: Compaction | None) -> None:
    """Three runs of the long turn; the late/early step ratio (median) and the largest request."""
    ratios: list[float] = []
    largest = 0

    def one_run() -> None:
        nonlocal largest
        agent, model = _run(compaction)
        ratios.append(_mean_step(model.times, LATE) / _mean_step(model.times, EARLY))
        largest = max(largest, model.largest)

    benchmark.pedantic(one_run, rounds=3, warmup_rounds=0)
    benchmark.extra_info["steps"] = STEPS
    benchmark.extra_info["late_to_early_step_ratio"] = round(statistics.median(ratios), 3)
    benchmark.extra_info["largest_request_tokens"] = largest


@pytest.mark.benchmark(group=GROUP)
def test_dshkit(benchmark: Any) -> None:
    _measure(benchmark, Compaction(context_window=WINDOW))


@pytest.mark.benchmark(group=GROUP)
def test_no_compaction(benchmark: Any) -> None:
    _measure(benchmark, None)
