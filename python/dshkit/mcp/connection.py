"""One live MCP client session, owned by a task of its own, and the bounded backoff between restarts.

The SDK's transports and `ClientSession` are anyio context managers that must be left in the
task that entered them, while dshkit calls tools from the task of each tool body. So a
connection is entered and held open by an owner task (`Connection.open`), requests are sent
from any task on the same event loop, and `close` asks the owner to leave the contexts (which
stops a stdio server's process, or ends an HTTP session).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

_log = logging.getLogger("dshkit.mcp")

Transport = Callable[[], AbstractAsyncContextManager[Any]]


class MessageHandler(Protocol):
    """What the SDK calls with each server notification (or transport error)."""

    async def __call__(self, message: Any) -> None: ...


class Connection:
    """An initialized `ClientSession` and the first listing of its tools."""

    def __init__(self, session: Any, tools: list[Any], stop: asyncio.Future[None], owner: asyncio.Task[None]) -> None:
        self.session = session
        self.tools = tools
        self._stop = stop
        self._owner = owner
        self.broken = False

    @classmethod
    async def open(cls, transport: Transport, on_message: MessageHandler, timeout: float) -> Connection:
        """Start the transport, initialize and list the tools, within `timeout` seconds."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Any, list[Any]]] = loop.create_future()
        stop: asyncio.Future[None] = loop.create_future()
        owner = loop.create_task(_own(transport, on_message, ready, stop))
        try:
            session, tools = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except BaseException:
            if not stop.done():
                stop.set_result(None)
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: the error was raised here
            raise
        return cls(session, tools, stop, owner)

    @property
    def alive(self) -> bool:
        """Neither found broken by a call nor ended."""
        return not self.broken and not self._owner.done()

    async def close(self) -> None:
        """Leave the SDK's contexts (a stdio server is stopped) and wait for the owner task."""
        if not self._stop.done():
            self._stop.set_result(None)
        await asyncio.gather(self._owner, return_exceptions=True)


async def _own(
    transport: Transport,
    on_message: MessageHandler,
    ready: asyncio.Future[tuple[Any, list[Any]]],
    stop: asyncio.Future[None],
) -> None:
    from mcp import ClientSession

    try:
        async with transport() as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, message_handler=on_message) as session:
                await session.initialize()
                tools = await list_all_tools(session)
                if not ready.done():
                    ready.set_result((session, tools))
                await stop
    except Exception as exc:  # an SDK error, or an ExceptionGroup of its task groups
        if not ready.done():
            ready.set_exception(exc)
        else:
            _log.debug("MCP connection ended: %r", exc)


async def list_all_tools(session: Any) -> list[Any]:
    """Every tool the server lists, following `nextCursor` pages."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


class Backoff:
    """The wait before a server's next start: none at first, then doubling per failure up to a cap.

    A failure is a crash seen by a call or a start that failed; a call that completes resets it.
    """

    def __init__(self, first: float, cap: float) -> None:
        if not (first >= 0 and cap >= first):
            raise ValueError(f"restart delays: expected 0 <= first <= cap, got first={first!r}, cap={cap!r}")
        self._first = first
        self._cap = cap
        self.failures = 0
        self._not_before = 0.0

    def failed(self) -> None:
        """Count a failure; the next start waits `first * 2**(failures - 1)` seconds, at most `cap`."""
        self.failures += 1
        delay = min(self._first * 2 ** (self.failures - 1), self._cap)
        self._not_before = time.monotonic() + delay

    def succeeded(self) -> None:
        """A call completed: the next start (after a later crash) waits only the first delay."""
        self.failures = 0
        self._not_before = 0.0

    def wait(self) -> float:
        """Seconds still to wait before the next start may begin."""
        return max(0.0, self._not_before - time.monotonic())


__all__ = ["Backoff", "Connection", "list_all_tools"]
