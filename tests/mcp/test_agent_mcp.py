"""An `Agent` with an MCP server among its tools: calls through the loop, list changes as header changes, cancellation."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from dshkit import create_user_message
from dshkit.agent import Agent
from dshkit.mcp import StdioServer
from dshkit.models import ScriptedModel
from dshkit.session import Session

from tests.mcp.conftest import stdio_args


def call(call_id: str, name: str, arguments: str = "{}") -> list[dict[str, Any]]:
    return [
        {"type": "tool_call_delta", "index": 0, "id": call_id, "name": name, "arguments": arguments},
        {"type": "finish", "reason": "tool_calls"},
    ]


def server() -> StdioServer:
    command, args = stdio_args()
    return StdioServer("t", command, args, errlog=subprocess.DEVNULL)


def results(session: Session) -> list[Any]:
    return [event.data for event in session.events if event.type == "tool/result"]


def test_an_agent_calls_mcp_tools_and_logs_their_results_with_meta(tmp_path: Path) -> None:
    model = ScriptedModel([call("c1", "mcp__t__weather", '{"city": "Oslo"}'), "It is 21 degrees."])

    async def main() -> Session:
        session = Session.create(tmp_path / "chat.jsonl")
        async with server() as tools:
            agent = Agent(model, session=session, tools=tools.tools)
            agent.followup(create_user_message("Weather in Oslo?", source={"kind": "user"}))
            await agent.when_idle()
        return session

    session = asyncio.run(main())
    (result,) = results(session)
    assert result["meta"]["mcp"] == {"server": "t", "tool": "weather", "structured_content": {"city": "Oslo", "celsius": 21}}
    assert '"celsius": 21' in result["message"].content[0]["content"][0]["text"]
    names = [tool["name"] for tool in model.requests[0].tools]
    assert "mcp__t__weather" in names
    session.close()


def test_tools_list_changed_refreshes_the_tools_before_the_next_request_logged_as_a_header_change(tmp_path: Path) -> None:
    model = ScriptedModel([
        call("c1", "mcp__t__grow", '{"name": "fresh"}'),
        call("c2", "mcp__t__fresh"),
        "done",
    ])

    async def main() -> Session:
        session = Session.create(tmp_path / "chat.jsonl")
        async with server() as tools:
            agent = Agent(model, session=session, tools=[tools])  # the server itself: its list may change
            agent.followup(create_user_message("Grow a tool, then use it.", source={"kind": "user"}))
            await agent.when_idle()
        return session

    session = asyncio.run(main())
    headers = [event.data for event in session.events if event.type == "request/header"]
    assert [header["reason"] for header in headers] == ["initial", "change"]
    before = [tool["name"] for tool in headers[0]["header"]["tools"]]
    after = [tool["name"] for tool in headers[1]["header"]["tools"]]
    assert "mcp__t__fresh" not in before and after == [*before, "mcp__t__fresh"]
    # the header change is logged before the request that first offers the tool
    header_seq = next(event.seq for event in session.events if event.type == "request/header" and event.data["reason"] == "change")
    grow_result_seq = next(event.seq for event in session.events if event.type == "tool/result")
    assert header_seq > grow_result_seq
    assert [r["message"].content[0]["content"][0]["text"] for r in results(session)] == ["added fresh", "I am fresh"]
    assert [tool["name"] for tool in model.requests[1].tools] == after
    session.close()


def test_cancelling_the_agent_aborts_a_running_mcp_call_with_an_honest_result(tmp_path: Path) -> None:
    model = ScriptedModel([call("c1", "mcp__t__sleep", '{"seconds": 30}')])

    async def main() -> Session:
        session = Session.create(tmp_path / "chat.jsonl")
        async with server() as tools:
            agent = Agent(model, session=session, tools=tools.tools)
            agent.subscribe(lambda event: agent.cancel("user") if event.type == "tool_call" else None)
            agent.followup(create_user_message("Sleep.", source={"kind": "user"}))
            await agent.when_idle()
        return session

    session = asyncio.run(main())
    (result,) = results(session)
    assert result["message"].content[0]["is_error"] is True
    assert result["meta"]["mcp"]["error"] == "cancelled"
    turn_end = [event.data for event in session.events if event.type == "turn/end"][-1]
    assert turn_end["reason"] == {"kind": "aborted", "cause": "user"}
    session.close()


def test_a_post_tool_redaction_covers_the_structured_content_kept_in_meta(tmp_path: Path) -> None:
    from dshkit.agent import Amend

    model = ScriptedModel([call("c1", "mcp__t__weather", '{"city": "Oslo"}'), "It is warm."])

    def redact_city(ctx: Any) -> Any:
        assert ctx.meta["mcp"]["structured_content"]["city"] == "Oslo"  # the hook sees what would be logged
        return Amend("[city] is warm")

    async def main() -> None:
        session = Session.create(tmp_path / "chat.jsonl")
        async with server() as tools:
            agent = Agent(model, session=session, tools=tools.tools, hooks={"post_tool": redact_city})
            agent.followup(create_user_message("Weather?", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(main())
    log = (tmp_path / "chat.jsonl").read_text(encoding="utf-8")
    result_lines = [line for line in log.splitlines() if '"tool/result"' in line]
    assert len(result_lines) == 1 and "[city]" in result_lines[0]
    assert "Oslo" not in result_lines[0]  # neither in the content nor in meta's structured content
