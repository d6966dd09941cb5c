"""MCP servers as dshkit tool sources: `StdioServer`, `StreamableHTTPServer`, on the official `mcp` SDK.

``async with StdioServer("files", sys.executable, ["server.py"]) as files:`` starts the server,
lists its tools and gives `files.tools`, dshkit `Tool`s named ``mcp__files__<tool>`` with the
server's input schemas. Pass the server itself in an agent's `tools` to follow
`notifications/tools/list_changed` (the agent refreshes the list before its next request), or
`files.tools` for a fixed list.

Every call answers: a result, or an error result when the call timed out (`timeout`, default
60 s), the server stopped during the call (it is restarted for the next call, waiting a
bounded, doubling delay after repeated failures), could not be started, or the agent cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from os import PathLike
from pathlib import Path
from typing import Any, TextIO

from dshkit.agent.cancel import CancelToken
from dshkit.agent.tools import Tool, ToolContext, ToolOutput
from dshkit.mcp.connection import Backoff, Connection, list_all_tools
from dshkit.mcp.results import tool_output

_log = logging.getLogger("dshkit.mcp")
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")
_NOT_IN_TOOL_NAMES = re.compile(r"[^A-Za-z0-9_-]")  # what model APIs refuse in a tool name

ToolNaming = Callable[[str, str], str]
_BACKSTOP_SECONDS = 5.0  # beyond a call's timeout, before the call is abandoned without the SDK's answer


def default_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, characters model APIs refuse in a tool name replaced by ``_``."""
    return f"mcp__{server}__{_NOT_IN_TOOL_NAMES.sub('_', tool)}"


class MCPServer:
    """A connection to one MCP server whose tools are dshkit `Tool`s (a `ToolSource` for `Agent`).

    `name` names the server in tool names (letters, digits, ``_``, ``-``); `tool_name(server,
    tool)` makes a dshkit tool name (default `default_tool_name`). `timeout` bounds each call,
    `start_timeout` each start (initialize and list the tools), in seconds. After a failure the next start waits `restart_delay`, doubling
    per further failure up to `max_restart_delay`; a completed call resets it.
    """

    def __init__(
        self,
        name: str,
        *,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        tool_name: ToolNaming = default_tool_name,
        restart_delay: float = 0.5,
        max_restart_delay: float = 30.0,
    ) -> None:
        if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name):
            raise ValueError(f"MCP server name: expected letters, digits, '_' or '-', got {name!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"MCP server {name!r} timeout: expected a positive number of seconds, got {timeout!r}")
        if isinstance(start_timeout, bool) or not isinstance(start_timeout, (int, float)) or not start_timeout > 0:
            raise ValueError(f"MCP server {name!r} start_timeout: expected a positive number of seconds, got {start_timeout!r}")
        if not callable(tool_name):
            raise TypeError(f"MCP server {name!r} tool_name: expected a function (server, tool) -> str")
        self.name = name
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self._tool_name = tool_name
        self._backoff = Backoff(restart_delay, max_restart_delay)
        self._connection: Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._listing: list[Any] = []
        self._tools: tuple[Tool, ...] = ()
        self._changed = False
        self._closing: set[asyncio.Task[None]] = set()
        self.restarts = 0  # starts after the first one

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    # -- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        await self._live()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the connection (a stdio server's process ends)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    # -- the tool source --------------------------------------------------------------------

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools as last listed."""
        return self._tools

    @property
    def tools_changed(self) -> bool:
        """True after the server sent `notifications/tools/list_changed` (or came back with other tools)."""
        return self._changed

    async def refresh_tools(self) -> None:
        """List the tools again; a server that cannot be reached keeps the last list (and stays stale)."""
        try:
            connection = await self._live()
            listing = await asyncio.wait_for(list_all_tools(connection.session), self.timeout)
        except Exception as exc:
            _log.warning("MCP server %r: could not list its tools again (%s: %s)", self.name, type(exc).__name__, exc)
            return
        self._adopt(listing)
        self._changed = False

    def _adopt(self, listing: list[Any]) -> None:
        tools = tuple(
            Tool(self._tool_name(self.name, entry.name), entry.description or "", dict(entry.input_schema), self._body(entry.name))
            for entry in listing
        )
        if self._tools and [tool.spec for tool in tools] != [tool.spec for tool in self._tools]:
            self._changed = True  # another list after a restart: the agent takes it before its next request
        self._listing = listing
        self._tools = tools

    def _body(self, remote: str) -> Callable[[Any, ToolContext], Any]:
        async def run(arguments: Any, ctx: ToolContext) -> ToolOutput:
            return await self.call(remote, arguments, cancel=ctx.cancel)

        return run

    async def _on_message(self, message: Any) -> None:
        from mcp.types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._changed = True
        elif isinstance(message, Exception):
            _log.debug("MCP server %r: transport error %r", self.name, message)

    # -- calls ------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, Any], *, cancel: CancelToken | None = None) -> ToolOutput:
        """Call `tool` (the server's own name) with `arguments`; always a `ToolOutput`, never an exception."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        where = f"MCP server {self.name!r}"
        try:
            connection = await self._live()
        except Exception as exc:
            return self._error(f"{exc}. It is tried again on the next call.", "unavailable", tool)  # names the server
        request = asyncio.ensure_future(connection.session.call_tool(tool, dict(arguments), read_timeout_seconds=self.timeout))
        unregister = cancel.on_cancel(request.cancel) if cancel is not None else None
        try:
            # The SDK's own timeout answers first (and tells the server to cancel); this one bounds
            # what it does not cover, such as a write to a server that stopped reading its input.
            result = await asyncio.wait_for(request, self.timeout + _BACKSTOP_SECONDS)
        except asyncio.TimeoutError:
            return self._error(f"{tool} on {where} timed out after {self.timeout:g} s; its outcome is unknown.", "timeout", tool)
        except asyncio.CancelledError:
            if cancel is None or not cancel.cancelled or not request.cancelled():
                raise  # the tool body itself is being cancelled
            return self._error(f"{tool} on {where} was cancelled ({cancel.cause}); its outcome is unknown.", "cancelled", tool)
        except MCPError as exc:
            if exc.error.code == REQUEST_TIMEOUT:
                return self._error(
                    f"{tool} on {where} timed out after {self.timeout:g} s; its outcome is unknown.", "timeout", tool
                )
            if exc.error.code == CONNECTION_CLOSED:
                self._lost(connection)
                return self._error(
                    f"{where} stopped during the call to {tool}; its outcome is unknown. "
                    "The server is restarted for the next call.", "server_stopped", tool,
                )
            return self._error(f"{tool} on {where} failed: {exc.error.message} (MCP error {exc.error.code})", "mcp_error", tool)
        except Exception as exc:  # the transport failed (an HTTP server went away, ...)
            self._lost(connection)
            return self._error(
                f"{where} failed during the call to {tool}: {_describe(exc)}; its outcome is unknown. "
                "The connection is restarted for the next call.", "server_stopped", tool,
            )
        finally:
            if unregister is not None:
                unregister()
        self._backoff.succeeded()
        return tool_output(result, server=self.name, tool=tool)

    def _error(self, text: str, code: str, tool: str) -> ToolOutput:
        return ToolOutput(text, is_error=True, meta={"mcp": {"server": self.name, "tool": tool, "error": code}})

    async def _live(self) -> Connection:
        """The live connection, (re)started if there is none (after the backoff's wait)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            if connection is not None:
                self._lost(connection)
            if (wait := self._backoff.wait()) > 0:
                await asyncio.sleep(wait)
            try:
                connection = await Connection.open(
                    self._transport, self._on_message, self.start_timeout, where=f"MCP server {self.name!r}"
                )
            except Exception:
                self._backoff.failed()
                raise
            if self._listing or self._tools:
                self.restarts += 1
            self._connection = connection
            self._adopt(connection.tools)
            return connection

    def _lost(self, connection: Connection) -> None:
        """A connection found broken: close it in the background; the next call starts another."""
        if connection is not self._connection:
            return
        connection.broken = True
        self._connection = None
        self._backoff.failed()
        task = asyncio.get_running_loop().create_task(connection.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _describe(exc: BaseException) -> str:
    inner = getattr(exc, "exceptions", None)
    if inner:  # an ExceptionGroup of the SDK's task groups: the first cause says most
        return _describe(inner[0])
    return f"{type(exc).__name__}: {exc}"


class StdioServer(MCPServer):
    """An MCP server run as a subprocess, spoken to over its stdin and stdout.

    `env` adds to the SDK's default environment; `errlog` takes the server's stderr (a file, or
    `subprocess.DEVNULL`; default: this process's stderr).
    """

    def __init__(
        self,
        name: str,
        command: str,
        args: Iterable[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
        errlog: TextIO | int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, **options)
        if isinstance(args, str):
            raise TypeError(f"MCP server {name!r} args: expected a list of str, got a str")
        self.command = command
        self.args = tuple(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._errlog = errlog

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        from mcp import StdioServerParameters, stdio_client

        cwd = Path(self.cwd) if self.cwd is not None else None
        parameters = StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=cwd)
        errlog: Any = sys.stderr if self._errlog is None else self._errlog  # an fd number works too
        return stdio_client(parameters, errlog=errlog)


class StreamableHTTPServer(MCPServer):
    """An MCP server at a streamable HTTP endpoint; `headers` go with every request (e.g. authorization)."""

    def __init__(self, name: str, url: str, *, headers: Mapping[str, str] | None = None, **options: Any) -> None:
        super().__init__(name, **options)
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {name!r} url: expected an http:// or https:// URL, got {url!r}")
        self.url = url
        self.headers = dict(headers or {})

    @asynccontextmanager
    async def _streams(self) -> Any:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=self.headers) as client:
            async with streamable_http_client(self.url, http_client=client) as streams:
                yield streams

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        return self._streams()


__all__ = ["MCPServer", "StdioServer", "StreamableHTTPServer", "ToolNaming", "default_tool_name"]
