"""`dshkit.mcp` over stdio against a real server written with the SDK's `MCPServer`: tools, results, timeouts, crashes."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from typing import Any

import pytest

from dshkit.agent import CancelToken, Tool
from dshkit.mcp import StdioServer, default_tool_name
from dshkit.mcp.connection import Backoff

from tests.mcp.conftest import stdio_args

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8  # what the server's `picture` tool sends


def server(**options: Any) -> StdioServer:
    command, args = stdio_args()
    return StdioServer("t", command, args, errlog=subprocess.DEVNULL, **options)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def texts(output: Any) -> list[str]:
    if isinstance(output.content, str):  # an error result dshkit wrote itself
        return [output.content]
    return [block["text"] for block in output.content if block["type"] == "text"]


def test_async_with_gives_tools_named_for_the_server_with_their_input_schemas() -> None:
    async def main() -> tuple[Tool, ...]:
        async with server() as s:
            return s.tools

    tools = {tool.name: tool for tool in run(main())}
    assert "mcp__t__echo" in tools and "mcp__t__add" in tools
    assert all(isinstance(tool, Tool) for tool in tools.values())
    add = tools["mcp__t__add"]
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ("a", "b")
    assert add.parameters["properties"]["a"]["type"] == "integer"


def test_tool_names_are_configurable_and_the_default_keeps_names_apis_accept() -> None:
    async def main() -> list[str]:
        async with server(tool_name=lambda srv, tool: f"{srv}.{tool}".replace(".", "_")) as s:
            return [tool.name for tool in s.tools]

    assert "t_echo" in run(main())
    assert default_tool_name("files", "read.file v2") == "mcp__files__read_file_v2"


def test_bad_options_are_refused_with_the_option_named() -> None:
    with pytest.raises(ValueError, match="server name"):
        StdioServer("has space", sys.executable)
    with pytest.raises(ValueError, match="timeout"):
        StdioServer("t", sys.executable, timeout=0)
    with pytest.raises(TypeError, match="args"):
        StdioServer("t", sys.executable, "script.py")
    with pytest.raises(ValueError, match="restart delays"):
        StdioServer("t", sys.executable, restart_delay=5, max_restart_delay=1)


def test_text_image_resource_link_structured_and_error_results() -> None:
    async def main() -> dict[str, Any]:
        async with server() as s:
            return {
                "echo": await s.call("echo", {"text": "hi"}),
                "weather": await s.call("weather", {"city": "Oslo"}),
                "picture": await s.call("picture", {}),
                "documents": await s.call("documents", {}),
                "fail": await s.call("fail", {"reason": "no such city"}),
                "bad": await s.call("add", {"a": "x", "b": 1}),
            }

    out = run(main())
    assert out["echo"].content == [{"type": "text", "text": "hi"}] and not out["echo"].is_error
    weather = out["weather"]
    assert weather.meta["mcp"]["structured_content"] == {"city": "Oslo", "celsius": 21}
    assert json.loads(texts(weather)[0]) == {"city": "Oslo", "celsius": 21}  # the model reads it as JSON text
    assert out["picture"].content == [{"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}]
    documents = out["documents"]
    assert texts(documents) == ["[resource file:///notes.txt]\nhello notes", "[resource link big.csv file:///big.csv: a big table]"]
    kept = documents.meta["mcp"]["content"]
    assert [item["type"] for item in kept] == ["resource", "resource_link"] and kept[1]["uri"] == "file:///big.csv"
    assert out["fail"].is_error and "no such city" in texts(out["fail"])[0]
    assert out["bad"].is_error and "validation error" in texts(out["bad"])[0]


def test_structured_content_alone_is_sent_as_json_text() -> None:
    from mcp.types import CallToolResult

    from dshkit.mcp import tool_output

    output = tool_output(CallToolResult(content=[], structured_content={"n": 1}), server="s", tool="x")
    assert output.content == [{"type": "text", "text": '{"n":1}'}]
    assert output.meta["mcp"]["structured_content"] == {"n": 1}


def test_a_call_that_hangs_gets_a_timeout_error_result_and_the_server_stays_usable() -> None:
    async def main() -> tuple[Any, Any, int]:
        async with server(timeout=0.5) as s:
            slow = await s.call("sleep", {"seconds": 30})
            after = await s.call("echo", {"text": "still here"})
            return slow, after, s.restarts

    slow, after, restarts = run(main())
    assert slow.is_error and "timed out after 0.5 s" in texts(slow)[0] and slow.meta["mcp"]["error"] == "timeout"
    assert texts(after) == ["still here"] and restarts == 0


def test_a_crashed_server_gives_an_error_result_and_is_restarted_for_the_next_call() -> None:
    async def main() -> tuple[Any, Any, Any, int]:
        async with server(restart_delay=0.01) as s:
            before = await s.call("pid", {})
            crashed = await s.call("crash", {})
            after = await s.call("pid", {})
            return before, crashed, after, s.restarts

    before, crashed, after, restarts = run(main())
    assert crashed.is_error and crashed.meta["mcp"]["error"] == "server_stopped"
    assert "outcome is unknown" in texts(crashed)[0]
    assert not after.is_error and texts(after) != texts(before)  # another process answered
    assert restarts == 1


def test_a_server_that_cannot_start_gives_error_results_not_exceptions() -> None:
    async def main() -> tuple[Any, Any]:
        s = StdioServer("gone", sys.executable, ["-c", "import sys; sys.exit(1)"], timeout=5, restart_delay=0, errlog=subprocess.DEVNULL)
        first = await s.call("echo", {"text": "x"})
        second = await s.call("echo", {"text": "x"})
        await s.aclose()
        return first, second

    first, second = run(main())
    for output in (first, second):
        assert output.is_error and output.meta["mcp"]["error"] == "unavailable"
        assert "could not be started" in texts(output)[0]


def test_restart_backoff_doubles_per_failure_up_to_its_cap_and_a_completed_call_resets_it() -> None:
    backoff = Backoff(0.5, 4.0)
    assert backoff.wait() == 0  # the first start does not wait
    waits = []
    for _ in range(6):
        backoff.failed()
        waits.append(backoff.wait())
    assert all(0 < wait <= 4.0 for wait in waits)
    assert waits[0] <= 0.5 < waits[1] <= 1.0 < waits[2] <= 2.0 < waits[3] <= 4.0
    assert waits[5] > 2.0  # capped, not reset
    backoff.succeeded()
    assert backoff.wait() == 0 and backoff.failures == 0


def test_a_cancelled_token_abandons_the_running_call_with_an_honest_error() -> None:
    async def main() -> Any:
        async with server() as s:
            token = CancelToken()
            asyncio.get_running_loop().call_later(0.3, token.cancel, "user")
            return await s.call("sleep", {"seconds": 30}, cancel=token)

    output = run(main())
    assert output.is_error and output.meta["mcp"]["error"] == "cancelled"
    assert "cancelled (user)" in texts(output)[0] and "outcome is unknown" in texts(output)[0]


def test_tools_list_changed_marks_the_list_stale_until_refreshed() -> None:
    async def main() -> tuple[bool, bool, list[str], Any]:
        async with server() as s:
            await s.call("grow", {"name": "extra"})
            stale = s.tools_changed
            await s.refresh_tools()
            names = [tool.name for tool in s.tools]
            extra = await s.call("extra", {})
            return stale, s.tools_changed, names, extra

    stale, still_stale, names, extra = run(main())
    assert stale and not still_stale
    assert names[-1] == "mcp__t__extra"
    assert texts(extra) == ["I am extra"]
