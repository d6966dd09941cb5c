"""The demo's last part: a subagent that answers with an MCP server's tool, offline.

A small MCP server (written with the SDK's own `MCPServer`) runs over stdio; the parent agent
delegates a question to a subagent whose only tool is the server's; both logs are written in a
folder and the demo prints the links between them and the ids that crossed. Without the `mcp`
extra the subagent answers on its own and the demo says how to see the MCP part.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import dshkit

UNITS_SERVER = '''"""An MCP server with one tool, written with the official SDK."""
from mcp.server.mcpserver import MCPServer

server = MCPServer("units")


@server.tool()
def to_celsius(fahrenheit: float) -> float:
    """Convert degrees Fahrenheit to Celsius."""
    return round((fahrenheit - 32) * 5 / 9, 1)


server.run("stdio")
'''


def _call(call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call_delta", "index": 0, "id": call_id, "name": name, "arguments": arguments},
        {"type": "finish", "reason": "tool_calls"},
    ]


def _short(message_id: str) -> str:
    return "…" + message_id[-6:]


async def run_delegation(folder: Path) -> None:
    """Run the parent and its subagent in `folder` (a new folder) and print what the two logs say."""
    from dshkit.agent import Agent, subagent_tool
    from dshkit.models import ScriptedModel
    from dshkit.session import Session, children_of, delegation_of

    print("\n== A subagent using an MCP server's tool (stdio, offline) ==")
    folder.mkdir(parents=True)
    async with AsyncExitStack() as stack:
        try:
            from dshkit.mcp import StdioServer

            (folder / "units_server.py").write_text(UNITS_SERVER)
            units: Any = await stack.enter_async_context(
                StdioServer("units", sys.executable, [str(folder / "units_server.py")], errlog=subprocess.DEVNULL)
            )
            print(f"MCP server 'units' started over stdio; its tools: {[tool.name for tool in units.tools]}")
            child_tools, child_script = [units], [_call("call_units", "mcp__units__to_celsius", '{"fahrenheit": 98.6}')]
        except ImportError:
            print("(the MCP part needs the mcp package: pip install 'dshkit[mcp]' to see it; the subagent answers alone)")
            child_tools, child_script = [], []
        except (OSError, asyncio.TimeoutError) as error:  # the server died or hung at start: one line, then go on
            print(f"({error}; the subagent answers alone)")
            child_tools, child_script = [], []
        converter = subagent_tool(
            "convert", "Converts units; give it the whole task.",
            ScriptedModel([*child_script, "98.6 °F is 37.0 °C."]), system="Convert units with your tools.", tools=child_tools,
        )
        parent_model = ScriptedModel([_call("call_convert", "convert", '{"task": "Convert 98.6 °F to °C."}'), "That is 37 °C: no fever."])
        question = dshkit.create_user_message("Is 98.6 °F a fever?", source={"kind": "user"})
        with Session.create(folder / "parent.jsonl") as parent:
            agent = Agent(parent_model, session=parent, tools=[converter])
            agent.followup(question)
            await agent.when_idle()
            child_id = children_of(parent)["call_convert"]
            started = next(event for event in parent.events if event.type == "agent/subagent/started")
            result = next(event.data for event in parent.events if event.type == "tool/result")
            print(f"parent {_short(parent.id)}: call call_convert started subagent session {_short(child_id)} (event #{started.seq})")
            with Session.open(folder / f"{child_id}.jsonl", read_only=True) as child:
                link = delegation_of(child)
                assert link is not None
                print(f"child  {_short(child.id)}: header names parent {_short(link.parent_id)}, call {link.call_id}, depth {link.depth}")
                for message in child.messages():
                    calls = ", ".join(f"calls {call['name']} {call['arguments']}" for call in message.tool_calls)
                    text = message.text or calls or message.content[0].get("content", [{}])[0].get("text", "")
                    print(f"  {message.role:9} {_short(message.id)} ({message.source['kind']}): {text}")
            answer = result["message"]
            final_id = result["meta"]["subagent"]["final_message_id"]
            print(f"back in the parent: tool result {_short(answer.id)} (new id; the child's message was {_short(final_id)})")
            print(f"parent's answer: {parent.messages()[-1].text}")


__all__ = ["UNITS_SERVER", "run_delegation"]
