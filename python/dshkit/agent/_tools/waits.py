"""How a tool batch's driver waits (`dshkit.agent._tools.runner`): `BatchWait` for the first body
to end, `OneYield` for one turn of the event loop. An agent's runner makes one of each and reuses
them for every batch, so a step in flight holds no waiter object of its own (issue 37)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Generator, Iterable
from typing import Any


class BatchWait:
    """The driver's wait for the first finished body of a batch: `asyncio.wait(..., FIRST_COMPLETED)`
    without its set copies, woken one loop iteration sooner.

    A body calls `body_ended` as its last act (`_run_call`), in the very step that ends its task:
    the driver's wake-up is then scheduled at once, where a done callback of the task would only run
    in the next iteration and schedule it from there (the iteration saved). The tasks' done
    callbacks are the fallback for a body that never ran (a task cancelled before its first step);
    a body that ends withdraws its own, which would only be one more no-op call (or a spurious
    wake-up of a later wait). Cancelling the waiting task cancels the wait only, never the tasks.
    The object itself is the wake-up callback (`__call__`), given to the tasks and to the gate's
    wait listener as it is: no bound method is made for each of them.
    """

    __slots__ = ("_waiter", "_context")

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        # What the done callbacks run in: they read no context variable, and one empty context
        # spares the copy of the caller's that `add_done_callback` makes otherwise, per wait.
        self._context = contextvars.Context()

    def __call__(self, _: object = None) -> None:
        """End the current wait, if there is one (a body ended, a task is done, a call waits for a person)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def body_ended(self) -> None:
        """A body's last act, inside its task: wake the driver and withdraw the done-callback fallback."""
        task = asyncio.current_task()
        if task is not None:
            task.remove_done_callback(self)
        self()

    def arm(self, tasks: Iterable[asyncio.Future[Any]]) -> asyncio.Future[None]:
        """The future the driver awaits until one of `tasks` is done (`disarm` after the wait)."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        for task in tasks:
            task.add_done_callback(self, context=self._context)
        return waiter

    def disarm(self, tasks: Iterable[asyncio.Future[Any]]) -> None:
        """The wait is over: no wake-up is owed any more."""
        self._waiter = None
        for task in tasks:
            task.remove_done_callback(self)


class OneYield:
    """`await asyncio.sleep(0)` without the coroutine and generator it makes per call: a bare yield,
    which a task takes as "run me again in the next loop iteration", as it does `sleep(0)`'s.

    One per agent's runner, awaited by its driver only, one await at a time."""

    __slots__ = ("_yielded",)

    def __init__(self) -> None:
        self._yielded = False

    def __await__(self) -> Generator[None, None, None]:
        self._yielded = False
        return self  # type: ignore[return-value]  # an iterator is all `await` needs (no send/throw: a throw is raised at the await)

    def __iter__(self) -> OneYield:
        return self

    def __next__(self) -> None:
        if self._yielded:
            raise StopIteration
        self._yielded = True


__all__ = ["BatchWait", "OneYield"]
