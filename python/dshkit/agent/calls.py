"""Calling user code that may be sync or async (hooks, tool bodies), and the log's durability point."""

from __future__ import annotations

import asyncio
import inspect
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
    """`session.sync()` now, or, for a store that waits on the network (PostgreSQL), an awaitable
    that syncs off the loop (the caller awaits it). A plain call, not a coroutine: the usual case
    (a local fsync, or none in memory) costs no coroutine, and never yields to the loop either way."""
    if session.waits_on_network:
        return asyncio.to_thread(session.sync)
    session.sync()  # a local fsync: cheaper than a hop to a worker thread
    return None


__all__ = ["call_sync_or_async", "durability_point", "is_awaitable"]
