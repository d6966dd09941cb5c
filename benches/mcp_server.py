"""The MCP server `bench_mcp.py` starts over stdio: one tool, `add`, the very function the direct row calls."""

from __future__ import annotations


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")
    server.add_tool(add)
    server.run("stdio")
