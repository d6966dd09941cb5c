"""`Agent.run` beside `followup` + `when_idle`, and the structured-output check beside pydantic alone.

`run-overhead`: one one-step turn (a text answer) on a fresh agent and in-memory session, driven
by `agent.run("...")` (the `dshkit` row) and by `followup(create_user_message(...))` +
`when_idle()`. Both rows make the prompt message; each timed region is one
`loop.run_until_complete` of one turn, and when it returns nothing of that turn is left to run
(its driver task has ended and the loop holds no callback: `_timed_turn` checks it), so no tail
of one turn lands in the next region. The difference, measured in paired rounds in one process
(per round the best of 3 turns each way back to back, the side that goes first alternating from
round to round, since the first side of a round reads up to ~0.6 µs slower even when both sides
run the same code; the median of the per-round differences), is recorded on the dshkit row as
`run_overhead_us`: what `run` adds (its state, the wait for its own turn, the `RunResult`).

`output-validation`: the check of a 5-field pydantic model's final answer as the tool mode
meets it (the runner's `json.loads`, then `OutputSpec.check_arguments`) and as the native mode
does (`OutputSpec.check_text` on the JSON text), beside pydantic's own `validate_json` (the floor).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import pytest

import dshkit
from dshkit.agent import Agent
from dshkit.agent._run.output import output_spec
from dshkit.models import ScriptedModel
from dshkit.session import Session

pydantic = pytest.importorskip("pydantic")

RUN_GROUP = "run-overhead"
OUTPUT_GROUP = "output-validation"

TARGETS = [
    {
        "name": "run() adds <= 5 µs to a turn over followup + when_idle",
        "group": RUN_GROUP,
        "extra_info": "run_overhead_us",
        "max_value": 5.0,
    },
    {
        "name": "structured output validation of a 5-field model <= 20 µs",
        "group": OUTPUT_GROUP,
        "stat": "median",
        "max_seconds": 20e-6,
    },
]


class Order(pydantic.BaseModel):  # type: ignore[misc, name-defined]
    id: int
    customer: str
    total: float
    paid: bool
    items: list[str]


ORDER_JSON = '{"id": 7, "customer": "Ada", "total": 12.5, "paid": true, "items": ["tea", "cake"]}'


def _fresh() -> Agent:
    return Agent(ScriptedModel(["ok"]), session=Session())


async def _followup_turn(agent: Agent) -> None:
    agent.followup(dshkit.create_user_message("hi", source={"kind": "user"}))
    await agent.when_idle()


async def _run_turn(agent: Agent) -> None:
    await agent.run("hi")


def _timed_turn(loop: asyncio.AbstractEventLoop, way: Any) -> float:
    """Seconds of one turn driven by `way` on a fresh agent (made before the clock starts)."""
    agent = _fresh()
    start = time.perf_counter()
    loop.run_until_complete(way(agent))
    seconds = time.perf_counter() - start
    # Nothing of this turn may run in the next timed region (another turn's).
    assert agent.status == "idle" and not loop._ready and not loop._scheduled  # type: ignore[attr-defined]
    return seconds


def _paired_overhead(loop: asyncio.AbstractEventLoop, rounds: int = 300, best_of: int = 3) -> tuple[float, float, float]:
    """Per round, the best of `best_of` turns each way back to back (both see the same machine),
    the way that goes first alternating; the medians of each way and of the per-round differences
    (a pause on one side only drops out)."""

    def best(way: Any) -> float:
        return min(_timed_turn(loop, way) for _ in range(best_of))

    pairs = []
    for round_ in range(rounds):
        if round_ % 2:
            run = best(_run_turn)
            pairs.append((best(_followup_turn), run))
        else:
            pairs.append((best(_followup_turn), best(_run_turn)))
    return (
        statistics.median(f for f, _ in pairs), statistics.median(r for _, r in pairs), statistics.median(r - f for f, r in pairs),
    )


@pytest.mark.benchmark(group=RUN_GROUP)
def test_dshkit_run(benchmark: Any) -> None:
    loop = asyncio.new_event_loop()
    try:
        benchmark.pedantic(lambda agent: loop.run_until_complete(_run_turn(agent)), setup=lambda: ((_fresh(),), {}), rounds=300, warmup_rounds=20)
        followup, run, overhead = _paired_overhead(loop)
    finally:
        loop.close()
    benchmark.extra_info["followup_when_idle_us"] = round(followup * 1e6, 2)
    benchmark.extra_info["run_us"] = round(run * 1e6, 2)
    benchmark.extra_info["run_overhead_us"] = round(overhead * 1e6, 2)


@pytest.mark.benchmark(group=RUN_GROUP)
def test_followup_when_idle(benchmark: Any) -> None:
    loop = asyncio.new_event_loop()
    try:
        benchmark.pedantic(lambda agent: loop.run_until_complete(_followup_turn(agent)), setup=lambda: ((_fresh(),), {}), rounds=300, warmup_rounds=20)
    finally:
        loop.close()


@pytest.mark.benchmark(group=OUTPUT_GROUP)
def test_dshkit_output_check_tool_mode(benchmark: Any) -> None:
    spec = output_spec(Order)

    def check() -> Any:
        value, problems = spec.check_arguments(json.loads(ORDER_JSON))
        assert not problems
        return value

    assert benchmark(check).customer == "Ada"


@pytest.mark.benchmark(group=OUTPUT_GROUP)
def test_output_check_native_mode(benchmark: Any) -> None:
    spec = output_spec(Order)
    value = benchmark(lambda: spec.check_text(ORDER_JSON))
    assert value[0].items == ["tea", "cake"] and value[1] == []


@pytest.mark.benchmark(group=OUTPUT_GROUP)
def test_pydantic_validate_json_alone(benchmark: Any) -> None:
    adapter = pydantic.TypeAdapter(Order)
    assert benchmark(adapter.validate_json, ORDER_JSON).total == 12.5
