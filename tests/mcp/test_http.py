"""`dshkit.mcp` over streamable HTTP against the SDK's `MCPServer` served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.mcp import StreamableHTTPServer


def test_tools_and_calls_over_streamable_http_with_headers(http_url: str) -> None:
    async def main() -> tuple[list[str], Any, Any]:
        async with StreamableHTTPServer("web", http_url, headers={"Authorization": "Bearer s3cret"}) as web:
            names = [tool.name for tool in web.tools]
            who = await web.call("whoami", {})
            added = await web.call("add", {"a": 2, "b": 3})
            return names, who, added

    names, who, added = asyncio.run(main())
    assert "mcp__web__whoami" in names
    assert who.content == [{"type": "text", "text": "Bearer s3cret"}]
    assert added.content == [{"type": "text", "text": "5"}] and added.meta["mcp"]["structured_content"] == {"result": 5}


def test_list_changed_over_http(http_url: str) -> None:
    async def main() -> tuple[bool, list[str]]:
        async with StreamableHTTPServer("web", http_url) as web:
            await web.call("grow", {"name": "late"})
            for _ in range(500):  # over HTTP the notification may be handled just after the result
                if web.tools_changed:
                    break
                await asyncio.sleep(0.01)
            changed = web.tools_changed
            await web.refresh_tools()
            return changed, [tool.name for tool in web.tools]

    changed, names = asyncio.run(main())
    assert changed and names[-1] == "mcp__web__late"


def test_an_unreachable_http_server_gives_an_error_result_naming_it() -> None:
    async def main() -> Any:
        web = StreamableHTTPServer("web", "http://127.0.0.1:9/mcp", start_timeout=10, restart_delay=0)
        try:
            return await web.call("echo", {"text": "x"})
        finally:
            await web.aclose()

    output = asyncio.run(main())
    assert output.is_error and output.meta["mcp"]["error"] == "unavailable"
    assert output.content.startswith("MCP server 'web' could not be started: ")


def test_a_bad_url_is_refused() -> None:
    with pytest.raises(ValueError, match="url"):
        StreamableHTTPServer("web", "ftp://example")


def test_a_server_that_went_away_gives_an_error_result_and_is_reconnected_when_back(http_server: Any) -> None:
    async def main() -> tuple[Any, Any, Any, int]:
        async with StreamableHTTPServer("web", http_server.url, timeout=10, restart_delay=0.01) as web:
            before = await web.call("echo", {"text": "one"})
            await asyncio.to_thread(http_server.stop)
            gone = await web.call("echo", {"text": "two"})
            await asyncio.to_thread(http_server.start)
            back = await web.call("echo", {"text": "three"})
            return before, gone, back, web.restarts

    before, gone, back, restarts = asyncio.run(main())
    assert before.content == [{"type": "text", "text": "one"}]
    assert gone.is_error and gone.meta["mcp"]["error"] in ("server_stopped", "unavailable")
    assert back.content == [{"type": "text", "text": "three"}] and restarts == 1
