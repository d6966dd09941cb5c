"""Tool sources whose tools can change while an agent runs (an MCP server's), and the agent's toolbox.

An agent's `tools` may mix `Tool`s with `ToolSource`s. A source says when its list changed
(`tools_changed`); before each model request the agent asks the stale sources to refresh
(`Toolbox.refresh`), so the request's tools are the current ones and the `request/header` it
logs records the change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from dshkit.agent.tools import Tool, check_tools


@runtime_checkable
class ToolSource(Protocol):
    """Something that holds tools which may change: `tools` now, and a flag that they are stale."""

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools as last listed."""

    @property
    def tools_changed(self) -> bool:
        """True when the list is known to be stale (`refresh_tools` brings it up to date)."""

    async def refresh_tools(self) -> None:
        """List the tools again (clears `tools_changed`)."""


class Toolbox:
    """An agent's tools: fixed `Tool`s and `ToolSource`s, by name, in the order given.

    `by_name` is one dict for the agent's whole life, updated in place by `refresh`, so the
    tool-call runner that holds it always looks tools up in the current list.
    """

    def __init__(self, tools: Iterable[Tool | ToolSource]) -> None:
        if isinstance(tools, (str, bytes, Mapping, Tool)):
            raise TypeError(f"Agent tools: expected an iterable of Tool, got {type(tools).__name__}")
        self._entries: tuple[Tool | ToolSource, ...] = tuple(tools)
        for index, entry in enumerate(self._entries):
            if not isinstance(entry, (Tool, ToolSource)):
                raise TypeError(
                    f"Agent tools[{index}]: expected a Tool or a ToolSource (tools, tools_changed, refresh_tools), "
                    f"got {type(entry).__name__}"
                )
        self._sources = tuple(entry for entry in self._entries if not isinstance(entry, Tool))
        self.by_name: dict[str, Tool] = check_tools(self._flatten())

    @property
    def has_sources(self) -> bool:
        """Whether any entry is a `ToolSource` (only then can the tools change)."""
        return bool(self._sources)

    def _flatten(self) -> list[Any]:
        flat: list[Any] = []
        for entry in self._entries:
            if isinstance(entry, Tool):
                flat.append(entry)
            else:
                flat.extend(entry.tools)
        return flat

    def specs(self) -> tuple[Mapping[str, Any], ...]:
        """The tools as the model sees them, in order."""
        return tuple(tool.spec for tool in self.by_name.values())

    async def refresh(self) -> tuple[Mapping[str, Any], ...] | None:
        """Refresh every stale source; the new specs when the tools changed, else None.

        A refresh that lists duplicate names raises `ValueError` and changes nothing.
        """
        stale = [source for source in self._sources if source.tools_changed]
        if not stale:
            return None
        for source in stale:
            await source.refresh_tools()
        tools = check_tools(self._flatten())
        if [tool.spec for tool in tools.values()] == [tool.spec for tool in self.by_name.values()]:
            return None
        self.by_name.clear()
        self.by_name.update(tools)
        return self.specs()


__all__ = ["ToolSource", "Toolbox"]
