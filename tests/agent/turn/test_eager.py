"""`start_eagerly`: a coroutine's first step runs at once; it becomes a task only if it waits."""

from __future__ import annotations

import asyncio
import contextvars
import sys
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._turn.eager import start_eagerly
from dshkit.models import ScriptedModel

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")
EAGER = sys.version_info >= (3, 12)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_coroutine_that_never_waits_has_finished_when_start_returns() -> None:
    steps: list[str] = []

    async def body() -> str:
        steps.append("ran")
        return "done"

    async def main() -> None:
        future = start_eagerly(body())
        assert future.done() is EAGER
        assert steps == (["ran"] if EAGER else [])
        assert await future == "done"

    run(main())


def test_a_coroutine_that_waits_goes_on_as_a_task_in_its_own_context() -> None:
    seen: list[str] = []

    async def body() -> str:
        VAR.set("inside")
        await asyncio.sleep(0)
        seen.append(VAR.get())
        return "done"

    async def main() -> None:
        future = start_eagerly(body())
        assert isinstance(future, asyncio.Task) and not future.done()
        assert VAR.get() == "unset"  # the first step's context is a copy, as a task's is
        assert await future == "done"
        assert seen == ["inside"] and VAR.get() == "unset"

    run(main())


def test_errors_and_a_cancelled_error_of_the_coroutine_itself_come_back_in_the_future() -> None:
    async def fails() -> None:
        raise ValueError("bad body")

    async def gives_up() -> None:
        raise asyncio.CancelledError("gave up")

    async def main() -> None:
        failed = start_eagerly(fails())
        with pytest.raises(ValueError, match="bad body"):
            await failed
        cancelled = start_eagerly(gives_up())
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert cancelled.cancelled()

    run(main())


def test_a_cancel_requested_during_the_first_step_is_a_cancel_of_the_task() -> None:
    interrupted: list[str] = []

    async def finishes() -> str:
        return "done"

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            interrupted.append("at its first wait")
            raise

    async def main() -> None:
        finished = start_eagerly(finishes(), lambda: True)
        with pytest.raises(asyncio.CancelledError):
            await finished  # like a task cancelled while it ran: it ends cancelled, result dropped
        waiting = start_eagerly(waits(), lambda: True)
        with pytest.raises(asyncio.CancelledError):
            await waiting
        # Eagerly started, the coroutine ran up to its wait; before 3.12 it is a task cancelled before its first step.
        assert interrupted == (["at its first wait"] if EAGER else [])

    run(main())


@pytest.mark.parametrize("waits", [False, True])
def test_tool_bodies_run_in_contexts_of_their_own_whether_or_not_they_wait(kit: Any, waits: bool) -> None:
    seen: list[tuple[str, str, str]] = []

    async def body(arguments: Any, ctx: Any) -> str:
        before = VAR.get()
        VAR.set(ctx.call_id)
        if waits:
            await asyncio.sleep(0)
        seen.append((ctx.call_id, before, VAR.get()))
        return "ok"

    model = ScriptedModel(
        [kit.calls_response(("a", "mark", "{}"), ("b", "mark", "{}")), kit.calls_response(("c", "mark", "{}")), "done"]
    )
    agent = Agent(model, tools=[Tool("mark", "marks", {"type": "object"}, body)])

    async def main() -> str:
        agent.followup(kit.user("go"))
        await agent.when_idle()
        return VAR.get()

    assert run(main()) == "unset"
    assert sorted(seen) == [("a", "unset", "a"), ("b", "unset", "b"), ("c", "unset", "c")]
    results = [event.data for event in agent.session.events if event.type == "tool/result"]
    assert len(results) == 3 and not any("error" in data for data in results)


@pytest.mark.parametrize("waits_first", [False, True])
def test_a_timeout_inside_a_tool_body_times_out_the_body_not_the_agent(kit: Any, waits_first: bool) -> None:
    # asyncio.timeout (and wait_for, on 3.12+) cancels `current_task()`: during a body's first step
    # that must be the body's own task, or the timeout would cancel the agent's turn instead.
    tasks: list[Any] = []

    async def body(arguments: Any, ctx: Any) -> str:
        if waits_first:
            await asyncio.sleep(0)
        tasks.append(asyncio.current_task())
        try:
            if hasattr(asyncio, "timeout"):  # 3.11+
                async with asyncio.timeout(0.01):
                    await asyncio.sleep(10)
            else:
                await asyncio.wait_for(asyncio.sleep(10), 0.01)
        except asyncio.TimeoutError:
            return "timed out"
        return "slept"

    model = ScriptedModel([kit.calls_response(("a", "slow", "{}")), "done"])
    agent = Agent(model, tools=[Tool("slow", "waits too long", {"type": "object"}, body)])

    async def main() -> Any:
        agent.followup(kit.user("go"))
        await agent.when_idle()
        return asyncio.current_task()

    driver_side = run(main())
    assert tasks and tasks[0] is not None and tasks[0] is not driver_side
    results = [event.data for event in agent.session.events if event.type == "tool/result"]
    assert len(results) == 1 and "error" not in results[0]
    assert "timed out" in repr(results[0])
    assert agent.session.events[-1].type == "turn/end" and agent.session.events[-1].data.get("reason") != "cancelled"
