"""Starting a coroutine as a task whose first step runs at once (an eager task).

A step's tool bodies run as tasks of their own so that they can be cut (`Task.cancel`) or waited
for together, each in a context of its own. A lazily started task costs event-loop iterations (its
first step is scheduled, its end wakes the waiter), a large part of the agent loop's own cost
when the model and the tools never wait (an offline model, a tool that answers at once). At
scale it costs the cyclic GC too: the agent suspends until the body's first step has run, and
with 1,000 agents whatever it holds across that suspension is promoted (issue 37).

Python 3.12 starts a task eagerly itself: `Task(..., eager_start=True)` runs the first step at
once, with the new task as `asyncio.current_task()`, so `asyncio.timeout`, `wait_for` and task
groups inside a tool body cancel the body, never the agent.

Python 3.10 and 3.11 get the same semantics from the same parts (`_start_on_the_loops_queue`):
the real `asyncio.Task` is made (registered in `all_tasks()`, its own copy of the context), its
first step, which the task scheduled with `loop.call_soon`, is taken back out of the loop's ready
queue and run at once (the handle's own `_run`, as the loop would), with the caller's task taken
out of the current-task table meanwhile and put back after, even on an error: the task's step
refuses to enter while another task is current, and `current_task()` reads that table. Stepping
the coroutine by hand instead would leave `current_task()` the caller's, and a timeout inside the
body would cancel the agent. This leans on private parts of asyncio: `BaseEventLoop._ready` (a
deque whose last item is the handle `call_soon` just queued), `Handle._callback.__self__` (the
task the step belongs to) and `asyncio.tasks._current_tasks` / `_enter_task` / `_leave_task`.
They are pinned on 3.10 and 3.11 only, interpreters that get security fixes only, so their asyncio
no longer changes; `tests/agent/turn/test_eager_queue.py` fails if one of them ever did. A loop
whose queue is not asyncio's (uvloop: no `_ready`; `eager_start_on` tells) or whose last queued
handle is not the task's first step gets an ordinary, lazily started task.

Cancellation is what a task's would be: a cancel requested while the first step ran
(`cancel_requested()` true afterwards) makes a body that finished in that step end cancelled, as
a task cancelled while running does, or is delivered at the body's first suspension.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

STARTS_EAGERLY = sys.version_info >= (3, 12)  # the interpreter's own eager start (`eager_start=True`)

if not STARTS_EAGERLY:
    from asyncio.events import Handle
    from asyncio.tasks import _current_tasks, _enter_task, _leave_task  # type: ignore[attr-defined]


def eager_start_on(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `start_eagerly` runs a coroutine's first step at once on `loop`."""
    return STARTS_EAGERLY or type(getattr(loop, "_ready", None)) is deque


def start_eagerly(
    coro: Coroutine[Any, Any, T], cancel_requested: Callable[[], bool] | None = None
) -> asyncio.Future[T]:
    """Start `coro` as a task, eagerly where the loop can; a done future if it finished.

    `cancel_requested` is asked right after the start whether the caller meanwhile wanted the
    task cancelled (it had no task to cancel yet).
    """
    loop = asyncio.get_running_loop()
    if STARTS_EAGERLY:
        task: asyncio.Task[T] = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    else:
        task = _start_on_the_loops_queue(loop, coro)
    if cancel_requested is None or not cancel_requested():
        return task
    if not task.done():
        task.cancel()
        return task
    if task.cancelled() or task.exception() is not None:
        return task  # an error, or the body's own cancel, wins over the request
    cancelled: asyncio.Future[T] = loop.create_future()
    cancelled.cancel()  # a task cancelled while running ends cancelled even when its coroutine returned
    return cancelled


def _start_on_the_loops_queue(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """A task whose first step, queued by the task itself, is taken off the loop's ready queue and
    run now with the task as the current one (Python 3.10 and 3.11); left queued where the loop
    is not asyncio's own or its last queued handle is not that step (a loop's own `call_soon`)."""
    task: asyncio.Task[T] = asyncio.Task(coro, loop=loop)
    ready = getattr(loop, "_ready", None)
    if type(ready) is not deque or not ready:
        return task
    first_step = ready[-1]
    if type(first_step) is not Handle:
        return task
    owner: object = getattr(first_step._callback, "__self__", None)  # type: ignore[attr-defined]
    if owner is not task:
        return task  # it runs lazily, from the loop's queue
    ready.pop()
    caller = _current_tasks.get(loop)
    if caller is None:  # started from a plain callback, not from a task
        first_step._run()
        return task
    _leave_task(loop, caller)
    try:
        first_step._run()  # the task's step enters and leaves the task itself
    finally:
        _enter_task(loop, caller)
    return task


__all__ = ["STARTS_EAGERLY", "eager_start_on", "start_eagerly"]
