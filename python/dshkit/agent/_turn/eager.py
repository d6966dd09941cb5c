"""Starting a coroutine as a task whose first step runs at once (an eager task, Python >= 3.12).

A step's tool bodies run as tasks of their own so that they can be cut (`Task.cancel`) or waited
for together, each in a context of its own. A lazily started task costs event-loop iterations (its
first step is scheduled, its end wakes the waiter), a large part of the agent loop's own cost
when the model and the tools never wait (an offline model, a tool that answers at once).

Python 3.12 can start a task eagerly: `Task(..., eager_start=True)` runs the first step at once,
with the new task as `asyncio.current_task()`, so `asyncio.timeout`, `wait_for` and task groups
inside a tool body behave as in any task. Older interpreters get an ordinary task: stepping a
coroutine by hand outside a task would make `current_task()` the caller's, and a timeout inside
the body would then cancel the agent instead of the body.

Cancellation is what a task's would be: a cancel requested while the first step ran
(`cancel_requested()` true afterwards) makes a body that finished in that step end cancelled, as
a task cancelled while running does, or is delivered at the body's first suspension.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

STARTS_EAGERLY = sys.version_info >= (3, 12)


def start_eagerly(
    coro: Coroutine[Any, Any, T], cancel_requested: Callable[[], bool] | None = None
) -> asyncio.Future[T]:
    """Start `coro` as a task, eagerly where the interpreter can; a done future if it finished.

    `cancel_requested` is asked right after the start whether the caller meanwhile wanted the
    task cancelled (it had no task to cancel yet).
    """
    loop = asyncio.get_running_loop()
    if STARTS_EAGERLY:
        task: asyncio.Task[T] = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    else:
        task = loop.create_task(coro)
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


__all__ = ["STARTS_EAGERLY", "start_eagerly"]
