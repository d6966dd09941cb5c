"""How the driver waits for a tool batch (`tool_calls._BatchWait`): a body wakes it as its last act,
and a body task cancelled before it ever ran still wakes it, through the task's done callback."""

from __future__ import annotations

import asyncio
import collections
import gc
import weakref
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._turn.eager import STARTS_EAGERLY
from dshkit.models import ScriptedModel


def _body_tasks() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_coro().__qualname__ == "ToolCallRunner._run_call"]


class _LazyStartLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type,unused-ignore]
    """A loop whose ready queue is not asyncio's deque: before 3.12 a body task starts lazily on it."""

    def __init__(self) -> None:
        super().__init__()
        self._ready = type("OwnQueue", (collections.deque,), {})()


@pytest.mark.skipif(
    STARTS_EAGERLY, reason="from 3.12 a body runs its first step when started: there is no task to cancel before it"
)
def test_a_body_task_cancelled_before_its_first_step_still_wakes_the_driver(kit: Any) -> None:
    # On asyncio's own loops a body starts eagerly on 3.10 and 3.11 too: a lazy start needs a loop
    # whose queue the eager start cannot read.
    ran: list[str] = []

    async def body(arguments: Any, ctx: Any) -> str:
        ran.append(ctx.call_id)
        return "ok"

    model = ScriptedModel([kit.calls_response(("a", "mark", "{}")), "done"])
    agent = Agent(model, tools=[Tool("mark", "marks", {"type": "object"}, body)])

    def cancel_the_body_before_it_runs() -> None:
        for task in _body_tasks():
            task.cancel()  # scheduled before the body's first step: its coroutine never starts

    def on_event(event: Any) -> None:
        if event.type == "tool_call":  # emitted before the body's task exists
            asyncio.get_running_loop().call_soon(cancel_the_body_before_it_runs)

    agent.subscribe(on_event)

    async def main() -> None:
        agent.followup(kit.user("go"))
        await asyncio.wait_for(agent.when_idle(), 10)  # a lost wake-up would hang here

    loop = _LazyStartLoop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    assert ran == []
    results = [event.data for event in agent.session.events if event.type == "tool/result"]
    assert len(results) == 1 and results[0]["error"]["name"] == "CancelledError"
    assert agent.session.events[-1].type == "turn/end" and agent.session.events[-1].data["reason"] == {"kind": "completed"}


def test_bodies_finishing_at_different_times_are_each_committed_in_model_order(kit: Any) -> None:
    async def body(arguments: Any, ctx: Any) -> str:
        for _ in range(int(arguments["waits"])):
            await asyncio.sleep(0)
        return f"waited {arguments['waits']}"

    model = ScriptedModel([kit.calls_response(("a", "wait", '{"waits": 3}'), ("b", "wait", '{"waits": 0}'), ("c", "wait", '{"waits": 1}')), "done"])
    agent = Agent(model, tools=[Tool("wait", "waits", {"type": "object"}, body)])

    async def main() -> None:
        agent.followup(kit.user("go"))
        await asyncio.wait_for(agent.when_idle(), 10)

    asyncio.run(main())
    results = [event.data["message"] for event in agent.session.events if event.type == "tool/result"]
    assert [message.source["call_id"] for message in results] == ["a", "b", "c"]
    for message, waits in zip(results, [3, 0, 1]):
        assert f"waited {waits}" in repr(message.content)


def test_a_body_that_ends_in_its_first_step_leaves_no_task_across_the_drivers_yield(kit: Any) -> None:
    # With a thousand agents whatever a step holds across its yield outlives the young GC
    # generations (issue 37): the body's task, its context and coroutine are dropped before the
    # driver yields; its result is still logged after the yield, as asyncio.wait would have it.
    seen: list[tuple[bool, int]] = []

    def at_the_drivers_yield(task: weakref.ref[Any], agent: Agent) -> None:
        gc.collect()  # no cycle keeps a dropped task: what is alive here is held
        seen.append((task() is None, sum(event.type == "tool/result" for event in agent.session.events)))

    async def body(arguments: Any, ctx: Any) -> str:
        me = weakref.ref(asyncio.current_task())  # type: ignore[arg-type]
        asyncio.get_running_loop().call_soon(at_the_drivers_yield, me, agent)  # queued before the driver's yield
        return "ok"

    model = ScriptedModel([kit.calls_response(("a", "mark", "{}")), kit.calls_response(("b", "mark", "{}")), "done"])
    agent = Agent(model, tools=[Tool("mark", "marks", {"type": "object"}, body)])

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    asyncio.run(main())
    assert seen == [(True, 0), (True, 1)]
    results = [event.data for event in agent.session.events if event.type == "tool/result"]
    assert len(results) == 2 and not any("error" in data for data in results)
