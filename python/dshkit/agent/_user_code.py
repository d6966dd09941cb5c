"""Calling user code that may be sync or async (hooks, tool bodies), a body within its time, and the
log's durability point.

A timed sync body runs in a thread of its own, never in a shared pool: a body past its timeout
cannot be stopped and keeps its thread until it ends, so in a bounded pool such bodies would keep
later calls from starting at all, and those would be reported timed out though they never ran.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from types import CoroutineType
from typing import Any, Awaitable, Callable, TypeGuard


async def call_sync_or_async(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, awaited when it returned an awaitable (a coroutine function, or a sync one)."""
    result = fn(*args)
    if is_awaitable(result):
        result = await result
    return result


def is_awaitable(result: object) -> TypeGuard[Awaitable[Any]]:
    """Whether user code's return value is to be awaited (what `call_sync_or_async` awaits)."""
    return type(result) is CoroutineType or inspect.isawaitable(result)  # the common case without a call


def durability_point(session: Any) -> Awaitable[None] | None:
    """What the caller awaits until every event appended so far is durable, or `None` when nothing
    is to wait for (in memory, durability "none", nothing appended since the last sync).

    The sync runs on a worker thread (`_SYNC_THREADS`), never on the loop: a store that syncs
    beside appends (`syncs_beside_appends`: the JSON Lines store) fsyncs while the loop goes on
    appending for its other sessions, so concurrent sessions' fsyncs overlap; a store that waits
    on the network (PostgreSQL) writes its held appends there. Any other store syncs inline.
    """
    store = session.store
    if store is None:
        return None
    if store.syncs_beside_appends:
        if not store.pending_sync:
            return None
        # The store, not `session.sync`: its lock stays free for appends while the disk works.
        return asyncio.get_running_loop().run_in_executor(_sync_threads(), store.sync)
    if session.waits_on_network:
        return asyncio.get_running_loop().run_in_executor(_sync_threads(), session.sync)
    session.sync()
    return None


def request_durability_point(session: Any) -> Awaitable[None] | None:
    """The durability point before a model request: only for a store that holds appends in the
    process until `sync()` (PostgreSQL), which a killed worker would lose; a file store's appends
    are in the OS cache already, and the point a step must pay is before its tools run."""
    if session.waits_on_network:
        return durability_point(session)
    return None


_SYNC_THREADS: list[ThreadPoolExecutor] = []
"""The worker threads that wait for the disk or the network at durability points (at most one
pool per process, made on first use): enough threads that many sessions' fsyncs overlap."""


def _sync_threads() -> ThreadPoolExecutor:
    if not _SYNC_THREADS:
        _SYNC_THREADS.append(ThreadPoolExecutor(max_workers=32, thread_name_prefix="dshkit-sync"))
    return _SYNC_THREADS[0]


if hasattr(os, "register_at_fork"):
    # A forked child has none of the parent's threads: it makes its own pool when it needs one.
    os.register_at_fork(after_in_child=_SYNC_THREADS.clear)



class TimedOut(Exception):
    """A tool body ran past its timeout (and was cancelled, or, in its thread, given up)."""

    def text(self, seconds: float) -> str:
        """The error result the model gets."""
        return (
            f"Tool call timed out after {seconds:g} s: it was cancelled before it finished, so its effects are "
            "unknown (it may have done part of its work). Check before running it again."
        )


class NeverStarted(Exception):
    """A timed sync body never began: no thread could be started for it, or its time ran out first."""

    def text(self) -> str:
        """The error result the model gets."""
        return f"Tool call not run: it never started ({self}). The tool did not run; call it again if it is still needed."


async def run_within(run: Callable[..., Any], arguments: Any, ctx: Any, timeout: float) -> Any:
    """`run(arguments, ctx)`'s output, or `TimedOut` once `timeout` seconds passed (an async body is
    cancelled; a sync one runs in its own thread, which is given up), or `NeverStarted`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    if inspect.iscoroutinefunction(run) or inspect.iscoroutinefunction(getattr(run, "__call__", None)):
        output = run(arguments, ctx)
    else:
        thread = _BodyThread(loop, run, arguments, ctx)
        try:
            output = await _within(thread.future, deadline, loop)
        except TimedOut:
            if thread.give_up():
                raise NeverStarted(f"its {timeout:g} s ran out before its thread began") from None
            raise
    if is_awaitable(output):
        output = await _within(output, deadline, loop)
    return output


class _BodyThread:
    """A sync body in a daemon thread of its own; `future` gets its outcome on the loop.

    `give_up` and the thread's start race under a lock: a body given up before it began never runs.
    """

    __slots__ = ("_lock", "_loop", "_state", "future")

    def __init__(self, loop: asyncio.AbstractEventLoop, run: Callable[..., Any], arguments: Any, ctx: Any) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._state = "waiting"  # -> "running" (the thread began) or "given up" (before it began)
        self.future: asyncio.Future[Any] = loop.create_future()
        thread = threading.Thread(target=self._main, args=(run, arguments, ctx), name=f"dshkit-tool-{ctx.name}", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:  # the process cannot start another thread
            self._state = "given up"
            raise NeverStarted(f"no thread could be started for it: {exc}") from None

    def give_up(self) -> bool:
        """Stop waiting; True when the body had not begun (and now never will)."""
        with self._lock:
            if self._state == "waiting":
                self._state = "given up"
                return True
            return False

    def _main(self, run: Callable[..., Any], arguments: Any, ctx: Any) -> None:
        with self._lock:
            if self._state != "waiting":
                return
            self._state = "running"
        try:
            outcome: tuple[Any, BaseException | None] = (run(arguments, ctx), None)
        except BaseException as exc:  # handed to the loop, as an executor would
            outcome = (None, exc)
        try:
            self._loop.call_soon_threadsafe(_settle, self.future, outcome)
        except RuntimeError:  # the loop closed while the body ran: nobody waits for it any more
            pass


def _settle(future: asyncio.Future[Any], outcome: tuple[Any, BaseException | None]) -> None:
    if future.done():
        return
    if outcome[1] is not None:
        future.set_exception(outcome[1])
    else:
        future.set_result(outcome[0])


async def _within(awaitable: Any, deadline: float, loop: asyncio.AbstractEventLoop) -> Any:
    """`awaitable`'s result, or `TimedOut` (cancelling it) once `deadline` passed."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait((task,), timeout=max(0.0, deadline - loop.time()))
    except BaseException:  # the agent's own task is cancelled: the body goes with it
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)  # a body that ends in an error later: no "never retrieved" noise
        raise TimedOut
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = [
    "NeverStarted",
    "TimedOut",
    "call_sync_or_async",
    "durability_point",
    "is_awaitable",
    "request_durability_point",
    "run_within",
]
