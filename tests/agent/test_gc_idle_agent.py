"""What an idle agent holds for the cyclic GC (issue 37), counted, never timed.

With thousands of agents on one loop, every object an agent keeps that the GC tracks is walked
again by each full collection, for the agent's whole life. The count here is of the tracked
objects made for one more agent, its session and its model, after a turn (so whatever an agent
makes once, at its first turn or tool call, is in it), and nothing else alive.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections import Counter
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

# Measured on 3.11: 55 (the agent and its parts, the session's, the model's, the tool's spec).
# 76 before issue 37's cuts: the hub's WeakSet of streams made eagerly, the approval book's
# closure over a WeakMethod (72 with only those two back), the scripted model's chunk lists and kept requests.
IDLE_BOUND = 58


async def _noop(arguments: Any, ctx: Any) -> str:
    return "ok"


def _agent_after_a_turn(kit: Any) -> Agent:
    script = [kit.calls_response(("call-0", "noop", "{}")), "done"]
    model = ScriptedModel(script, keep_requests=False)
    agent = Agent(model, session=Session(), tools=[Tool("noop", "n", {"type": "object"}, _noop)], system="s")

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    asyncio.run(main())
    assert agent.session.events[-1].data["reason"] == {"kind": "completed"}
    return agent


def _tracked_per_agent(kit: Any, count: int) -> tuple[float, Counter[str]]:
    """Tracked objects made for each of `count` more agents, and how many of each type in all."""
    kept = [_agent_after_a_turn(kit)]  # what the first agent of a process makes once is not counted
    gc.collect()
    before = Counter(type(obj).__qualname__ for obj in gc.get_objects())
    kept += [_agent_after_a_turn(kit) for _ in range(count)]
    gc.collect()
    made = Counter(type(obj).__qualname__ for obj in gc.get_objects()) - before
    return sum(made.values()) / count, made


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the bound is measured on 3.11 (instance dicts and asyncio differ by version)")
def test_an_idle_agent_holds_few_tracked_objects(kit: Any) -> None:
    per_agent, _ = _tracked_per_agent(kit, 20)
    assert per_agent <= IDLE_BOUND, per_agent


def test_an_idle_agent_holds_no_closure_and_no_weak_set(kit: Any) -> None:
    # What the cut removed, on every version: the approval book's wake-up was a closure (a
    # function, its cells) over a WeakMethod, and the hub made a WeakSet (with a closure of its own).
    _, made = _tracked_per_agent(kit, 20)
    assert {name: made[name] for name in ("function", "cell", "WeakSet", "WeakMethod")} == dict.fromkeys(
        ("function", "cell", "WeakSet", "WeakMethod"), 0
    ), made


def test_a_dropped_agent_is_freed_without_the_cyclic_gc(kit: Any) -> None:
    # The approval book's wake-up holds its agent weakly: no cycle keeps a dropped agent alive.
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        agent = _agent_after_a_turn(kit)
        ref = weakref.ref(agent)
        del agent
        assert ref() is None
    finally:
        if enabled:
            gc.enable()
