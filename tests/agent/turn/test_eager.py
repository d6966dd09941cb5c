"""`start_eagerly`: a coroutine's first step runs at once, in a task of its own, on every supported
Python (3.12+: `eager_start=True`; 3.10 and 3.11: the task's first step taken off asyncio's ready
queue, `tests/agent/turn/test_eager_queue.py`)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._turn.eager import start_eagerly
from dshkit.models import ScriptedModel

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_coroutine_that_never_waits_has_finished_when_start_returns() -> None:
    steps: list[str] = []

    async def body() -> str:
        steps.append("ran")
        return "done"

    async def main() -> None:
        future = start_eagerly(body())
        assert future.done()
        assert steps == ["ran"]
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
        # Eagerly started, the coroutine ran up to its wait, where the cancel reaches it.
        assert interrupted == ["at its first wait"]

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


def _ticks(loop: asyncio.AbstractEventLoop) -> list[int]:
    """A count of the loop's iterations from now on: a callback that queues itself again."""
    ticks = [0]

    def tick() -> None:
        ticks[0] += 1
        loop.call_soon(tick)

    loop.call_soon(tick)
    return ticks


def test_a_coroutine_that_finishes_at_once_costs_no_loop_iteration() -> None:
    async def body() -> str:
        return "done"

    async def main() -> None:
        ticks = _ticks(asyncio.get_running_loop())
        await asyncio.sleep(0)  # the ticker runs
        before = ticks[0]
        assert await start_eagerly(body()) == "done"
        assert await start_eagerly(body()) == "done"
        assert ticks[0] == before  # a lazily started task would cost at least one iteration each

    run(main())


def test_the_first_step_runs_as_the_coroutines_own_task_which_all_tasks_sees() -> None:
    seen: list[Any] = []

    async def body() -> None:
        me = asyncio.current_task()
        seen.append((me, me in asyncio.all_tasks()))
        await asyncio.sleep(0)

    async def main() -> None:
        caller = asyncio.current_task()
        future = start_eagerly(body())
        assert seen == [(future, True)] and future is not caller
        assert asyncio.current_task() is caller  # the caller is the current task again
        assert future in asyncio.all_tasks() and not future.done()
        await future

    run(main())


def test_a_timeout_entered_in_the_first_step_cuts_the_body_not_the_caller() -> None:
    steps: list[str] = []

    async def body() -> str:
        steps.append("entered")
        try:
            if hasattr(asyncio, "timeout"):  # 3.11+: cancels current_task() when it expires
                async with asyncio.timeout(0.01):
                    await asyncio.sleep(10)
            else:
                # What asyncio.timeout does, by hand: cancel the current task later.
                asyncio.get_running_loop().call_later(0.01, asyncio.current_task().cancel)  # type: ignore[union-attr]
                try:
                    await asyncio.sleep(10)
                except asyncio.CancelledError:
                    raise asyncio.TimeoutError from None
        except asyncio.TimeoutError:
            return "timed out"
        return "slept"

    async def main() -> None:
        future = start_eagerly(body())
        assert steps == ["entered"]
        assert await future == "timed out"
        await asyncio.sleep(0.02)  # the caller was not cancelled: it goes on waiting
        assert not asyncio.current_task().cancelled()  # type: ignore[union-attr]

    run(main())


def test_context_variables_set_in_the_first_step_stay_in_that_coroutines_context() -> None:
    seen: list[str] = []

    async def body(name: str) -> None:
        seen.append(VAR.get())
        VAR.set(name)

    async def main() -> None:
        VAR.set("caller")
        first = start_eagerly(body("first"))
        assert VAR.get() == "caller" and first.done()
        second = start_eagerly(body("second"))
        assert VAR.get() == "caller" and second.done()
        assert seen == ["caller", "caller"]  # each started from a copy of the caller's context

    run(main())


def test_an_error_in_the_first_step_is_the_tasks_at_once_and_the_caller_stays_current() -> None:
    async def fails() -> None:
        raise ValueError("bad first step")

    async def main() -> None:
        caller = asyncio.current_task()
        failed = start_eagerly(fails())
        assert failed.done() and isinstance(failed.exception(), ValueError)
        assert asyncio.current_task() is caller

    run(main())


def test_a_coroutine_cancelling_its_own_task_in_the_first_step_ends_cancelled() -> None:
    async def cancels_itself() -> str:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        return "returned anyway"

    async def main() -> None:
        cancelled = start_eagerly(cancels_itself())
        assert cancelled.done() and cancelled.cancelled()  # a task cancelled while it ran
        await asyncio.sleep(0)  # the caller was not cancelled

    run(main())


def test_eager_starts_nest_each_with_its_own_current_task() -> None:
    seen: list[tuple[str, Any]] = []

    async def inner() -> None:
        seen.append(("inner", asyncio.current_task()))
        await asyncio.sleep(0)

    async def outer() -> None:
        seen.append(("outer", asyncio.current_task()))
        task = start_eagerly(inner())
        seen.append(("outer after", asyncio.current_task()))
        await task

    async def main() -> None:
        caller = asyncio.current_task()
        outer_task = start_eagerly(outer())
        inner_task = seen[1][1]
        assert seen == [("outer", outer_task), ("inner", inner_task), ("outer after", outer_task)]
        assert len({id(caller), id(outer_task), id(inner_task)}) == 3
        assert asyncio.current_task() is caller
        await outer_task

    run(main())


def test_an_interrupt_in_the_first_step_reaches_the_caller_with_the_caller_current_again() -> None:
    bodies: list[Any] = []

    async def interrupted() -> None:
        bodies.append(asyncio.current_task())
        raise KeyboardInterrupt

    async def main() -> None:
        caller = asyncio.current_task()
        with pytest.raises(KeyboardInterrupt):
            start_eagerly(interrupted())  # as a task's step does, it passes the interrupt on
        assert asyncio.current_task() is caller
        assert isinstance(bodies[0].exception(), KeyboardInterrupt)  # the task ended with it too

    run(main())
