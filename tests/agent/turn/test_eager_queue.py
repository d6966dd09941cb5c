"""The eager start of Python 3.10 and 3.11 (`eager._start_on_the_loops_queue`): the private parts of
asyncio it leans on, pinned, and the lazy start it falls back to on a loop whose ready queue is
not asyncio's own."""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._turn.eager import STARTS_EAGERLY, eager_start_on, start_eagerly
from dshkit.models import ScriptedModel

pytestmark = pytest.mark.skipif(STARTS_EAGERLY, reason="Python 3.12+ starts a task eagerly itself (eager_start=True)")

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


class _OwnQueue(collections.deque):  # type: ignore[type-arg]
    """A ready queue of another type than asyncio's (as a loop that is not asyncio's would have)."""


class LoopWithItsOwnQueue(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type,unused-ignore]
    """A loop whose ready queue is not asyncio's deque: the body starts lazily."""

    def __init__(self) -> None:
        super().__init__()
        self._ready = _OwnQueue()


class LoopQueueingAfterEachCall(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type,unused-ignore]
    """A loop whose `call_soon` queues one more handle of its own: the last handle is not the task's."""

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None) -> asyncio.Handle:  # type: ignore[override]
        handle = super().call_soon(callback, *args, context=context)
        super().call_soon(_nothing)
        return handle


def _nothing() -> None:
    pass


def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def test_the_asyncio_internals_the_eager_start_leans_on_are_as_it_assumes() -> None:
    from asyncio.tasks import _current_tasks, _enter_task, _leave_task  # type: ignore[attr-defined]

    ran: list[Any] = []

    async def body() -> None:
        ran.append(asyncio.current_task())

    async def main() -> None:
        loop = asyncio.get_running_loop()
        caller = asyncio.current_task()
        assert caller is not None
        assert type(loop._ready) is collections.deque  # type: ignore[attr-defined]
        assert _current_tasks.get(loop) is caller  # the table current_task() reads
        task = asyncio.Task(body(), loop=loop)
        first_step = loop._ready[-1]  # type: ignore[attr-defined]
        # The task queued its first step last, as a plain handle whose callback names the task.
        assert type(first_step) is asyncio.Handle and first_step._callback.__self__ is task and first_step._args == ()  # type: ignore[attr-defined]
        loop._ready.pop()  # type: ignore[attr-defined]
        # The task's step refuses to enter while another task is the current one...
        with pytest.raises(RuntimeError, match="another task"):
            first_step._callback()  # type: ignore[attr-defined]
        assert ran == [] and asyncio.current_task() is caller
        # ...and runs once the caller is out of the table, which it leaves as it found it.
        _leave_task(loop, caller)
        assert asyncio.current_task() is None
        try:
            first_step._run()
        finally:
            _enter_task(loop, caller)
        assert ran == [task] and task.done() and asyncio.current_task() is caller

    asyncio.run(main())


@pytest.mark.parametrize("loop_type", [LoopWithItsOwnQueue, LoopQueueingAfterEachCall])
def test_on_a_loop_the_eager_start_cannot_read_the_body_starts_lazily(loop_type: type[asyncio.AbstractEventLoop]) -> None:
    steps: list[Any] = []

    async def body() -> str:
        steps.append((asyncio.current_task(), VAR.get()))
        VAR.set("body")
        await asyncio.sleep(0)
        return "done"

    async def main() -> None:
        VAR.set("caller")
        future = start_eagerly(body())
        assert steps == [] and not future.done()  # an ordinary task: its first step is queued
        assert await future == "done"
        assert steps == [(future, "caller")] and VAR.get() == "caller"

    loop = loop_type()
    assert eager_start_on(loop) is (loop_type is LoopQueueingAfterEachCall)  # a deque, but the wrong last handle
    run_on(loop, main())


def test_on_such_a_loop_a_cancel_requested_at_the_start_cancels_the_body_before_its_first_step() -> None:
    steps: list[str] = []

    async def body() -> None:
        steps.append("ran")

    async def main() -> None:
        future = start_eagerly(body(), lambda: True)
        with pytest.raises(asyncio.CancelledError):
            await future
        assert steps == []

    run_on(LoopWithItsOwnQueue(), main())


@pytest.mark.parametrize("loop_type", [LoopWithItsOwnQueue, LoopQueueingAfterEachCall])
def test_an_agent_on_such_a_loop_runs_its_tool_bodies_as_lazily_started_tasks(kit: Any, loop_type: type[asyncio.AbstractEventLoop]) -> None:
    seen: list[tuple[str, str]] = []

    async def body(arguments: Any, ctx: Any) -> str:
        seen.append((ctx.call_id, VAR.get()))
        VAR.set(ctx.call_id)
        return "ok"

    model = ScriptedModel([kit.calls_response(("a", "mark", "{}"), ("b", "mark", "{}")), kit.calls_response(("c", "mark", "{}")), "done"])
    agent = Agent(model, tools=[Tool("mark", "marks", {"type": "object"}, body)])

    async def main() -> str:
        agent.followup(kit.user("go"))
        await agent.when_idle()
        return VAR.get()

    assert run_on(loop_type(), main()) == "unset"
    assert sorted(seen) == [("a", "unset"), ("b", "unset"), ("c", "unset")]
    results = [event.data for event in agent.session.events if event.type == "tool/result"]
    assert len(results) == 3 and not any("error" in data for data in results)
    assert agent.session.events[-1].data["reason"] == {"kind": "completed"}


def test_a_loop_without_asyncios_ready_queue_is_one_the_eager_start_leaves_alone() -> None:
    # uvloop's loop has no `_ready` at all: the same lazy start as a queue of another type.
    assert not eager_start_on(asyncio.AbstractEventLoop())
    loop = asyncio.new_event_loop()
    try:
        assert eager_start_on(loop)  # asyncio's own loop, as `asyncio.run` makes it
    finally:
        loop.close()
