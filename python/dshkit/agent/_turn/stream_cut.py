"""Awaiting a model's stream in the agent's own task, cut at once by the turn's cancel token.

The stream used to be read in a task of its own, so that `cancel()` could cut it even when the
model never looks at its cancel signal. On Python < 3.12 that task cost two event-loop
iterations a step (its first step is scheduled, its end wakes the driver): 22k of 482k
instructions a step with an offline model. Now the driver awaits the read itself, and the token
cuts it the way it cut the task: by cancelling the task that waits inside the stream (the
driver), so the stream gets `CancelledError` where it waits and closes. The cancel is then taken
back (`Task.uncancel`, 3.11+), so a cancellation of the driver from elsewhere is still told
apart.

A cancel asked while the driver itself runs (from code the read calls, e.g. an observer of a
chunk's append) is not a task cancel: it is delivered when the driver next waits inside the
read, as a running task's would be. Either way the read counts as cut (`False`), as it did when
the reader task ended cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from dshkit.agent.cancel import CancelToken


async def read_until_cut(read: Awaitable[None], token: CancelToken) -> bool:
    """Await `read` in the current task; False if `token` was cancelled while it ran.

    The token's cancel cuts `read` where it waits. A `CancelledError` that is not the token's
    (the task itself being cancelled) propagates; on 3.10, which cannot tell the two apart
    while both are pending, it counts as the token's.
    """
    task = asyncio.current_task()
    assert task is not None, "read_until_cut runs in a task"
    loop = task.get_loop()
    reading = True
    asked = False  # the token was cancelled while the read ran
    task_cancelled = False  # ... and the task was cancelled to cut it

    def cut() -> None:
        nonlocal asked
        if reading:
            asked = True
            if asyncio.current_task() is task:
                loop.call_soon(cut_waiting)  # running now: cut it when it next waits
            else:
                cut_waiting()

    def cut_waiting() -> None:
        nonlocal task_cancelled
        if reading and not task_cancelled:
            task_cancelled = True
            task.cancel()

    unregister = token.on_cancel(cut)
    try:
        await read
    except asyncio.CancelledError:
        if not task_cancelled:
            raise
        task_cancelled = False
        if _take_back_cancel(task):
            raise
    finally:
        reading = False
        unregister()
        if task_cancelled:  # the stream swallowed the cut, or raised something else
            _take_back_cancel(task)
    return not asked


def _take_back_cancel(task: asyncio.Task[object]) -> bool:
    """Take back one cancel request of `task`; whether another one is still pending (3.11+)."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is None:
        return False  # 3.10 counts no cancel requests to tell another one by
    return bool(uncancel())
