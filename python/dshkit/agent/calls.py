"""Calling user code that may be sync or async (hooks, tool bodies), and the log's durability point."""

from __future__ import annotations

import asyncio
import inspect
from types import CoroutineType
from typing import Any, Callable


async def call_sync_or_async(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, awaited when it returned an awaitable (a coroutine function, or a sync one)."""
    result = fn(*args)
    if type(result) is CoroutineType or inspect.isawaitable(result):  # the common case without a call
        result = await result
    return result


async def durability_point(session: Any) -> None:
    """`session.sync()`; a store that waits on the network (PostgreSQL) is waited on off the loop."""
    if getattr(session.store, "waits_on_network", False):
        await asyncio.to_thread(session.sync)
    else:
        session.sync()  # a local fsync: cheaper than a hop to a worker thread


__all__ = ["call_sync_or_async", "durability_point"]
