"""The cost of one MCP tool call over stdio, beside a direct call of the same Python function.

Both rows go through a dshkit `Tool` body the way the agent calls it (`await tool.run(arguments,
ctx)`) and get a `ToolOutput`/content back: `dshkit_mcp_call_stdio` is the tool `StdioServer`
made for the server's `add` (JSON-RPC over the subprocess's pipes, the SDK's validation on both
sides, the result turned into content blocks); `direct_function_call` is a `Tool` whose body
calls `add` itself. The difference is what putting a function behind MCP costs per call.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dshkit.agent import CancelToken, Tool, ToolContext, ToolOutput
from dshkit.session import Session

pytest.importorskip("mcp")

from dshkit.mcp import StdioServer  # noqa: E402
from mcp_server import add  # noqa: E402

GROUP = "mcp-call-stdio"
SERVER = Path(__file__).with_name("mcp_server.py")
ARGUMENTS = {"a": 2, "b": 3}
TARGETS: list[dict[str, Any]] = []  # measured, not targeted: the number depends on the machine's pipes


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def server(loop: asyncio.AbstractEventLoop) -> Iterator[StdioServer]:
    server = StdioServer("bench", sys.executable, [str(SERVER)], errlog=subprocess.DEVNULL)
    loop.run_until_complete(server.__aenter__())
    yield server
    loop.run_until_complete(server.aclose())


def _context() -> ToolContext:
    return ToolContext("c1", "add", 1, 1, CancelToken(), Session())


@pytest.mark.benchmark(group=GROUP)
def test_dshkit_mcp_call_stdio(benchmark: Any, loop: asyncio.AbstractEventLoop, server: StdioServer) -> None:
    (tool,) = server.tools
    ctx = _context()
    output = loop.run_until_complete(tool.run(ARGUMENTS, ctx))
    assert isinstance(output, ToolOutput) and output.content == [{"type": "text", "text": "5"}]
    benchmark(lambda: loop.run_until_complete(tool.run(ARGUMENTS, ctx)))


@pytest.mark.benchmark(group=GROUP)
def test_direct_function_call(benchmark: Any, loop: asyncio.AbstractEventLoop) -> None:
    async def body(arguments: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput([{"type": "text", "text": str(add(**arguments))}])

    tool = Tool("add", "Add two integers.", {"type": "object"}, body)
    ctx = _context()
    assert loop.run_until_complete(tool.run(ARGUMENTS, ctx)).content == [{"type": "text", "text": "5"}]  # type: ignore[attr-defined]
    benchmark(lambda: loop.run_until_complete(tool.run(ARGUMENTS, ctx)))
