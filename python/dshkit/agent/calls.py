"""Calling user code that may be sync or async (hooks, tool bodies), and the log's durability point."""

from __future__ import annotations

import asyncio
import inspect
import os
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
    if getattr(store, "syncs_beside_appends", False):
        if not store.pending_sync:
            return None
        # The store, not `session.sync`: its lock stays free for appends while the disk works.
        return asyncio.get_running_loop().run_in_executor(_sync_threads(), store.sync)
    if getattr(store, "waits_on_network", False):
        return asyncio.get_running_loop().run_in_executor(_sync_threads(), session.sync)
    session.sync()
    return None


def request_durability_point(session: Any) -> Awaitable[None] | None:
    """The durability point before a model request: only for a store that holds appends in the
    process until `sync()` (PostgreSQL), which a killed worker would lose; a file store's appends
    are in the OS cache already, and the point a step must pay is before its tools run."""
    store = session.store
    if store is not None and getattr(store, "waits_on_network", False):
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


__all__ = ["call_sync_or_async", "durability_point", "is_awaitable", "request_durability_point"]
