"""What a step holds in flight for the cyclic GC (issue 37), counted, never timed.

With a thousand agents on one loop every agent sits at a wait of its step while the others run,
so every object the GC tracks that a step holds across that wait outlives the young
generations and is scanned again by each full collection. The count here is of tracked objects
made since the step before ended (its `step/end` append; for the first step, `turn/start`) and
still alive and tracked while its tool body runs, the deepest wait of a step: the driver's
coroutines, the batch, the body's task and what asyncio makes for it. A young collection runs
first, as the generation-1 collections at scale do: it stops tracking the tuples of untracked
items. It must stay small, and the same at every step of a turn (nothing piles up).
"""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

STEPS = 8
# The bounds are measured on 3.11 (asyncio's C parts make a few objects more or fewer on other
# versions, which get a little room: `_bound`).
# Tracked objects a step holds in flight while its one tool body runs: 19 on 3.11 (the body's task
# with its context, handle and weak reference, the driver's coroutine, the tool context, the
# request the scripted model keeps); 20 while the step's own coroutine (`_run_step`) still waited
# for the tools beside the batch's; 53 by an earlier count, before issue 37's cuts (closure cells,
# per-step lists, dicts and sets, a waiter future, the stream assembler).
IN_FLIGHT_BOUND = 19
# The first step also makes what an agent makes once, at its first tool call (33 on 3.11, 58 before).
FIRST_STEP_BOUND = 40


def _bound(on_311: int) -> int:
    if sys.version_info[:2] == (3, 11):
        return on_311
    if sys.version_info[:2] == (3, 10):
        # 3.10 keeps each coroutine's frame as a tracked object of its own (five in flight here),
        # and makes one list more.
        return on_311 + 6
    return on_311 + 3


def _in_flight_per_step(kit: Any, at_the_drivers_yield: bool = False) -> list[int]:
    """Per step: the tracked objects made since the step before ended and alive while its tool body
    runs (or, `at_the_drivers_yield`, once the body has ended in its first step and the driver yields)."""
    snapshot: dict[str, Any] = {"ids": None, "kept": None}
    counts: list[int] = []

    def count() -> None:
        before, kept = snapshot["ids"], snapshot["kept"]
        gc.collect(0)  # the young objects only: what a collection would stop tracking, untracked
        counts.append(sum(1 for obj in gc.get_objects() if id(obj) not in before and obj is not kept and obj is not before))

    def on_event(event: Any) -> None:
        if event.type in ("turn/start", "step/end"):
            snapshot["ids"] = snapshot["kept"] = None  # drop the last ones first: no objects of this step
            # Kept alive until the next snapshot, so that no object made since takes the id of one
            # that was there (a finished coroutine's, say) and goes uncounted.
            snapshot["kept"] = gc.get_objects()
            snapshot["ids"] = {id(obj) for obj in snapshot["kept"]}

    async def probe(arguments: Any, ctx: Any) -> str:
        if at_the_drivers_yield:
            asyncio.get_running_loop().call_soon(count)  # runs before the driver resumes
        else:
            count()
            counts[-1] -= _PROBE_OWN
        return "ok"

    script = [kit.calls_response((f"call-{step}", "probe", "{}")) for step in range(STEPS - 1)] + ["done"]
    session = Session()
    session.subscribe(on_event)
    agent = Agent(ScriptedModel(script), session=session, tools=[Tool("probe", "counts", {"type": "object"}, probe)])

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    enabled = gc.isenabled()
    gc.collect()
    gc.disable()  # no collection in the middle: a count, not a race with the GC
    try:
        asyncio.run(main())
    finally:
        if enabled:
            gc.enable()
    assert agent.session.events[-1].data["reason"] == {"kind": "completed"}
    return counts


# The probe's own: its coroutine (the generator of the count is made after `gc.get_objects()`).
_PROBE_OWN = 1


def test_a_step_holds_few_tracked_objects_in_flight_and_as_many_at_every_step(kit: Any) -> None:
    counts = _in_flight_per_step(kit)
    assert len(counts) == STEPS - 1
    assert counts[0] <= FIRST_STEP_BOUND, counts
    assert max(counts[1:]) <= _bound(IN_FLIGHT_BOUND), counts
    # Bounded, not growing with the step number: the later steps hold what the second held.
    assert max(counts[1:]) - min(counts[1:]) <= 2, counts


def test_the_calls_a_batch_holds_while_its_bodies_run_are_untracked(kit: Any) -> None:
    # A plain tuple of the message's tool calls (native objects) stays tracked, and it is in
    # flight for the whole step: the batch keeps the same calls in a frozen tuple instead.
    from dshkit.agent._tools.runner import _Batch

    seen: list[tuple[bool, tuple[str, ...]]] = []

    async def probe(arguments: Any, ctx: Any) -> str:
        batches = [obj for obj in gc.get_objects() if type(obj) is _Batch and obj.calls]
        seen.extend((gc.is_tracked(batch.calls), tuple(call["id"] for call in batch.calls)) for batch in batches)
        return "ok"

    script = [kit.calls_response(("call-a", "probe", "{}"), ("call-b", "probe", "{}")), "done"]
    agent = Agent(ScriptedModel(script), session=Session(), tools=[Tool("probe", "p", {"type": "object"}, probe)])

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    asyncio.run(main())
    assert seen == [(False, ("call-a", "call-b"))] * 2


# Tracked objects a step holds across the driver's yield once its tool body has ended in its
# first step (the suspension every step of a thousand agents makes, issue 37): 13 on 3.11 (the
# driver's coroutine, handle and step wrapper, the request the scripted model keeps, the count's
# own handle and context); 15 while the step's own coroutine waited beside the batch's and the
# result was a `CallResult` (a class instance, tracked, where a tuple of its untracked fields is
# untracked by a young collection); more while the body's task, its context and coroutine were
# still held there.
ACROSS_THE_YIELD_BOUND = 13


def test_a_step_whose_body_ends_at_once_holds_fewer_still_across_the_drivers_yield(kit: Any) -> None:
    counts = _in_flight_per_step(kit, at_the_drivers_yield=True)
    assert len(counts) == STEPS - 1
    assert max(counts[1:]) <= _bound(ACROSS_THE_YIELD_BOUND), counts
    assert max(counts[1:]) - min(counts[1:]) <= 3, counts


def test_across_the_drivers_yield_a_step_holds_one_coroutine_of_its_own_and_no_tracked_result(kit: Any) -> None:
    # At scale every agent sits at this yield while the others run: each coroutine the step awaits
    # through, and a tracked result, is one more object each generation-1 collection promotes.
    from dshkit.agent._tools.runner import _Batch

    seen: list[tuple[list[str], list[bool]]] = []

    def look(task: asyncio.Task[Any]) -> None:
        chain, awaited = [], task.get_coro()
        while hasattr(awaited, "cr_code"):
            chain.append(awaited.cr_code.co_name)
            awaited = awaited.cr_await
        gc.collect(0)  # a young collection stops tracking a tuple of untracked items, as one at scale does
        results = [result for batch in gc.get_objects() if type(batch) is _Batch for result in batch.results if result is not None]
        seen.append((chain[chain.index("_run_steps") + 1:], [gc.is_tracked(result) for result in results]))

    async def probe(arguments: Any, ctx: Any) -> str:
        asyncio.get_running_loop().call_soon(look, driver)  # runs before the driver resumes
        return "ok"

    script = [kit.calls_response(("call-a", "probe", "{}")), "done"]
    agent = Agent(ScriptedModel(script), session=Session(), tools=[Tool("probe", "p", {"type": "object"}, probe)])
    driver: asyncio.Task[Any]

    async def main() -> None:
        nonlocal driver
        agent.followup(kit.user("go"))
        driver = next(task for task in asyncio.all_tasks() if task is not asyncio.current_task())
        await agent.when_idle()

    asyncio.run(main())
    assert seen == [(["_run_batch"], [False])]
