"""What an idle agent holds for the cyclic GC (issue 37), counted, never timed.

With thousands of agents on one loop, every object an agent keeps that the GC tracks is walked
again by each full collection, for the agent's whole life. The count here is of the tracked
objects an agent holds of its own after a turn (so whatever it makes at its first turn or tool
call is in it): reachable from it, its session and its model, and not shared with another agent.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from collections import Counter
from types import FunctionType, ModuleType
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

# Measured on 3.11: 52 (the agent and its parts, the session's, the model's). 63 with the hub's
# WeakSet of streams made eagerly and the approval book's closure over a WeakMethod, which issue
# 37 cut (and a scripted model's chunk lists and kept requests on top, cut in dshkit.models).
IDLE_BOUND = 55


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


def _reachable(root: object) -> dict[int, object]:
    """The tracked objects the GC can walk to from `root`; not to classes or modules, which every
    agent shares, and from a function only to its closure (not to its module's globals)."""
    seen: dict[int, object] = {id(root): root}
    stack = [root]
    while stack:
        obj = stack.pop()
        referents = (obj.__closure__ or ()) if isinstance(obj, FunctionType) else gc.get_referents(obj)
        for referent in referents:
            if gc.is_tracked(referent) and id(referent) not in seen and not isinstance(referent, (type, ModuleType)):
                seen[id(referent)] = referent
                stack.append(referent)
    return seen


def _tracked_per_agent(kit: Any, count: int) -> tuple[float, Counter[str]]:
    """Tracked objects each of `count` agents holds of its own (not shared with another agent:
    the tools, the script's shared parts), and how many of each type in all."""
    reference = _reachable(_agent_after_a_turn(kit))
    made: Counter[str] = Counter()
    for _ in range(count):
        own = _reachable(_agent_after_a_turn(kit))
        made.update(type(obj).__qualname__ for key, obj in own.items() if key not in reference)
    return sum(made.values()) / count, made


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the bound is measured on 3.11 (instance dicts and asyncio differ by version)")
def test_an_idle_agent_holds_few_tracked_objects(kit: Any) -> None:
    per_agent, made = _tracked_per_agent(kit, 20)
    assert per_agent <= IDLE_BOUND, made


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
