"""`dshkit.mcp`: MCP servers' tools as dshkit `Tool`s, on the official `mcp` SDK (``pip install dshkit[mcp]``).

`StdioServer(name, command, args)` runs a server as a subprocess; `StreamableHTTPServer(name,
url, headers=...)` speaks to one over streamable HTTP. ``async with`` one gives its tools
(``server.tools``, named ``mcp__<name>__<tool>``); pass the server itself in an `Agent`'s tools
to follow the server's tool-list changes. The SDK is imported only when a server starts.
"""

from __future__ import annotations

from dshkit.mcp.results import tool_output
from dshkit.mcp.server import MCPServer, StdioServer, StreamableHTTPServer, ToolNaming, default_tool_name

__all__ = ["MCPServer", "StdioServer", "StreamableHTTPServer", "ToolNaming", "default_tool_name", "tool_output"]
