"""Starting a coroutine at once, and making it a task only if it has to wait.

A step's stream reader and its tool bodies run as tasks of their own so that they can be cut
(`Task.cancel`) or waited for together. A task costs event-loop iterations (its first step is
scheduled, its end wakes the waiter), which is most of the agent loop's own cost when the model
and the tools never wait (an offline model, a tool that answers at once). `start_eagerly` runs
the coroutine's first step right away, in a copy of the current context as a task would, and
wraps what is left in a `Task` (same context) only when it suspends; a coroutine that finished
in that step comes back as a done future. Python 3.12's eager tasks work the same way; on 3.10,
which cannot hand a task a context, the coroutine simply becomes a task.

Cancellation is what a task's would be: a cancel requested while the first step ran
(`cancel_requested()` true afterwards) cancels the result of a coroutine that finished, or is
delivered at the coroutine's first suspension; an exception the coroutine raised wins over it.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextvars
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_CAN_START_EAGERLY = sys.version_info >= (3, 11)  # create_task(context=...)


class _Resumed(collections.abc.Coroutine):  # type: ignore[type-arg]
    """A coroutine suspended at `yielded` (its first step ran outside the task), handed to a task."""

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded: list[Any] | None = [yielded]

    def send(self, value: Any) -> Any:
        pending = self._yielded
        if pending is not None:
            self._yielded = None
            return pending[0]  # the task's first step: wait on what the coroutine waits on
        return self._coro.send(value)

    def throw(self, exc: Any, *rest: Any) -> Any:
        self._yielded = None
        return self._coro.throw(exc, *rest)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        raise TypeError("a resumed coroutine is driven by its task only")


def start_eagerly(
    coro: Coroutine[Any, Any, T], cancel_requested: Callable[[], bool] | None = None
) -> asyncio.Future[T]:
    """Run `coro` up to its first suspension now; a done future, or the task that goes on with it.

    `cancel_requested` is asked after the first step whether the caller meanwhile wanted the
    task cancelled (it had no task to cancel yet).
    """
    loop = asyncio.get_running_loop()
    if not _CAN_START_EAGERLY:
        task = loop.create_task(coro)
        if cancel_requested is not None and cancel_requested():
            task.cancel()
        return task
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as stop:
        future: asyncio.Future[T] = loop.create_future()
        if cancel_requested is not None and cancel_requested():
            future.cancel()  # a task cancelled while running ends cancelled even when its coroutine returned
        else:
            future.set_result(stop.value)
        return future
    except asyncio.CancelledError:
        future = loop.create_future()
        future.cancel()
        return future
    except BaseException as exc:
        future = loop.create_future()
        future.set_exception(exc)
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit: a task re-raises them too
        return future
    task = loop.create_task(_Resumed(coro, yielded), context=context)  # type: ignore[arg-type,call-arg]
    if cancel_requested is not None and cancel_requested():
        task.cancel()  # delivered where the coroutine waits, as for a task cancelled while it ran
    return task


__all__ = ["start_eagerly"]
