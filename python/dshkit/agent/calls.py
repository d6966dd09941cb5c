"""Calling user code that may be sync or async: hooks, tool bodies, maintenance functions."""

from __future__ import annotations

import inspect
from typing import Any, Callable


async def call_sync_or_async(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, awaited when it returned an awaitable (a coroutine function, or a sync one)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


__all__ = ["call_sync_or_async"]
