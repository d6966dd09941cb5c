"""An MCP server for the tests, written with the SDK's own `MCPServer`; run over stdio, or served over HTTP by `http_app`."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import mcp.types as types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def build() -> MCPServer:
    """The test server: one tool per kind of result, and tools that hang, crash and change the list."""
    server = MCPServer("dshkit-test")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def weather(city: str) -> dict[str, Any]:
        """Structured weather for a city."""
        return {"city": city, "celsius": 21}

    @server.tool()
    def picture() -> Image:
        """A tiny PNG."""
        return Image(data=PNG, format="png")

    @server.tool(structured_output=False)
    def documents() -> list[Any]:
        """An embedded text resource, an embedded image resource and a resource link."""
        return [
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///notes.txt", text="hello notes", mime_type="text/plain"),
            ),
            types.ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv", description="a big table"),
        ]

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the reason."""
        raise ToolError(reason)

    @server.tool()
    async def sleep(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return "woke up"

    @server.tool()
    def crash() -> str:
        """End the server's process at once."""
        os._exit(3)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    async def whoami(ctx: Context) -> str:
        """The Authorization header the request came with (HTTP only)."""
        headers = ctx.headers or {}
        return str(headers.get("authorization", "none"))

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool `name` and tell the client the list changed."""
        server.add_tool(lambda: f"I am {name}", name=name, description=f"the {name} tool")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    return server


if __name__ == "__main__":
    build().run("stdio" if len(sys.argv) < 2 else sys.argv[1])  # type: ignore[call-overload]
