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
    async def open(cls, transport: Transport, on_message: MessageHandler, timeout: float, *, where: str = "MCP server") -> Connection:
        """Start the transport, initialize and list the tools, within `timeout` seconds.

        Raises `ImportError` at once without the SDK, `TimeoutError` when the server does not
        answer in time and `ConnectionError` when it stops or fails before it does: each one
        exception whose message starts with `where`, never the SDK's `ExceptionGroup`.
        """
        require_sdk()
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[tuple[Any, list[Any]]] = loop.create_future()
        stop: asyncio.Future[None] = loop.create_future()
        owner = loop.create_task(_own(transport, on_message, ready, stop))
        try:
            session, tools = await asyncio.wait_for(asyncio.shield(ready), timeout)
        except BaseException as error:
            if not stop.done():
                stop.set_result(None)
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)
            if ready.done() and not ready.cancelled():
                ready.exception()  # retrieved: the error was raised here
            replacement = start_error(error, where, timeout)
            if replacement is error:
                raise
            raise replacement from error
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


MCP_EXTRA_HINT = "pip install 'dshkit[mcp]'"


def require_sdk() -> None:
    """Import the `mcp` SDK, or raise an `ImportError` that names the extra to install."""
    try:
        import mcp  # noqa: F401
    except ImportError as error:
        raise ImportError(f"dshkit.mcp needs the mcp package (the MCP SDK): {MCP_EXTRA_HINT}", name="mcp") from error


def first_cause(error: BaseException) -> BaseException:
    """The first leaf of an `ExceptionGroup` (the SDK's task groups wrap the real cause), else `error`."""
    while True:
        inner = getattr(error, "exceptions", None)
        if not inner:
            return error
        error = inner[0]


def start_error(error: BaseException, where: str, timeout: float) -> BaseException:
    """What a failed start raises: one exception saying which server and why, the cause kept as ``__cause__``."""
    if isinstance(error, asyncio.TimeoutError):
        # asyncio's own (the builtin one from 3.11): what callers of 3.10 catch around a wait
        return asyncio.TimeoutError(f"{where} could not be started: no answer to initialize and the tool listing within {timeout:g} s")
    if not isinstance(error, Exception):  # a cancellation or an interrupt goes on as it came
        return error
    cause = first_cause(error)
    if isinstance(cause, ImportError):
        return ImportError(f"{where} could not be started: {cause} ({MCP_EXTRA_HINT})", name=cause.name)
    return ConnectionError(f"{where} could not be started: {type(cause).__name__}: {cause}")


async def _own(
    transport: Transport,
    on_message: MessageHandler,
    ready: asyncio.Future[tuple[Any, list[Any]]],
    stop: asyncio.Future[None],
) -> None:
    try:
        from mcp import ClientSession

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
