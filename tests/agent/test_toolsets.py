"""Tool sources in an agent's tools: the refresh before a request, its header change, bad lists refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, Tool, ToolSource
from dshkit.agent.toolsets import Toolbox
from dshkit.models import ScriptedModel
from dshkit.session import Session


def tool(name: str) -> Tool:
    return Tool(name, f"the {name} tool", {"type": "object"}, lambda arguments, ctx: name)


class Source:
    """A tool source whose next list is set by the test."""

    def __init__(self, *names: str, tools: tuple[Tool, ...] = ()) -> None:
        self._tools = tools + tuple(tool(name) for name in names)
        self.next: tuple[Tool, ...] | None = None
        self.refreshes = 0

    @property
    def tools(self) -> tuple[Tool, ...]:
        return self._tools

    @property
    def tools_changed(self) -> bool:
        return self.next is not None

    async def refresh_tools(self) -> None:
        self.refreshes += 1
        if self.next is not None:
            self._tools, self.next = self.next, None


def test_a_source_is_a_tool_source_and_its_tools_join_the_fixed_ones_in_order() -> None:
    source = Source("b", "c")
    assert isinstance(source, ToolSource)
    box = Toolbox([tool("a"), source, tool("d")])
    assert list(box.by_name) == ["a", "b", "c", "d"] and box.has_sources
    assert not Toolbox([tool("a")]).has_sources


def test_an_entry_that_is_neither_a_tool_nor_a_source_is_refused_by_its_index() -> None:
    with pytest.raises(TypeError, match=r"Agent tools\[1\]: expected a Tool or a ToolSource .*got str"):
        Toolbox([Source("a"), "b"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="expected an iterable of Tool"):
        Toolbox(tool("a"))  # type: ignore[arg-type]


def test_refresh_only_asks_stale_sources_and_reports_a_change_only_when_there_is_one() -> None:
    source = Source("b")
    box = Toolbox([source])
    held = box.by_name
    assert asyncio.run(box.refresh()) is None and source.refreshes == 0
    source.next = (tool("b"),)  # stale, but the same list
    assert asyncio.run(box.refresh()) is None and source.refreshes == 1
    source.next = (tool("b"), tool("e"))
    specs = asyncio.run(box.refresh())
    assert specs is not None and [spec["name"] for spec in specs] == ["b", "e"]
    assert box.by_name is held and list(held) == ["b", "e"]  # the runner's dict, updated in place


def test_a_refresh_that_would_duplicate_a_name_raises_and_changes_nothing() -> None:
    source = Source("b")
    box = Toolbox([tool("a"), source])
    source.next = (tool("a"),)
    with pytest.raises(ValueError, match="duplicate tool name 'a'"):
        asyncio.run(box.refresh())
    assert list(box.by_name) == ["a", "b"]


def test_the_agent_refreshes_before_each_request_and_logs_the_change_in_the_header() -> None:
    calls = [{"type": "tool_call_delta", "index": 0, "id": "c1", "name": "b", "arguments": "{}"}, {"type": "finish", "reason": "tool_calls"}]

    def change_list(arguments: Any, ctx: Any) -> str:
        source.next = (tool("b"), tool("new"))
        return "ok"

    source = Source(tools=(Tool("b", "the b tool", {"type": "object"}, change_list),))
    model = ScriptedModel([calls, "done"])
    session = Session()
    agent = Agent(model, session=session, tools=[source])

    async def main() -> None:
        from dshkit import create_user_message

        agent.followup(create_user_message("go", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())
    reasons = [event.data["reason"] for event in session.events if event.type == "request/header"]
    assert reasons == ["initial", "change"]
    assert [spec["name"] for spec in model.requests[1].tools] == ["b", "new"]
    assert [t.name for t in agent.tools] == ["b", "new"]


def test_a_refreshed_tool_of_the_same_name_is_validated_against_its_new_schema() -> None:
    def call(arguments: str, call_id: str) -> list[dict[str, Any]]:
        return [
            {"type": "tool_call_delta", "index": 0, "id": call_id, "name": "put", "arguments": arguments},
            {"type": "finish", "reason": "tool_calls"},
        ]

    def put(arguments: Any, ctx: Any) -> str:
        return f"stored {arguments}"

    needs_path = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    needs_size = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}
    source = Source(tools=(Tool("put", "v1", needs_path, put),))
    # The first call is valid for v1; then v2 (same name, another schema) comes in; the same
    # arguments must now be refused, and v2's own arguments accepted.
    model = ScriptedModel([call('{"path": "a"}', "c1"), call('{"path": "a"}', "c2"), call('{"size": 3}', "c3"), "done"])
    session = Session()
    agent = Agent(model, session=session, tools=[source])

    def swap(event: Any) -> None:
        if event.type == "tool/result" and source.next is None and [t.description for t in source.tools] == ["v1"]:
            source.next = (Tool("put", "v2", needs_size, put),)

    session.subscribe(swap)

    async def main() -> None:
        from dshkit import create_user_message

        agent.followup(create_user_message("go", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())
    results = {
        event.data["message"].source["call_id"]: event.data["message"].content[0]
        for event in session.events
        if event.type == "tool/result"
    }
    assert results["c1"]["is_error"] is False
    assert results["c2"]["is_error"] is True and "size" in str(results["c2"]["content"])
    assert results["c3"]["is_error"] is False
