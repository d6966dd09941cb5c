"""The cost of a subagent call beside a plain tool call giving the same answer.

One round is one parent turn on a fresh in-memory session: the model calls one tool, then
answers. In `dshkit_subagent_call` the tool is `subagent_tool`: a child log (in memory), its
header, the parent's `agent/subagent/started`, a child `Agent` running a one-step turn of its
own on a `ScriptedModel`, and its answer taken back; in `plain_tool_call` the tool returns the
same answer at once. The difference is what delegating a call costs beyond the child's model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent, Tool, subagent_tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

GROUP = "subagent-call"
ANSWER = "The answer is 42."
CALL = [
    {"type": "tool_call_delta", "index": 0, "id": "c1", "name": "ask", "arguments": '{"task": "find it"}'},
    {"type": "finish", "reason": "tool_calls"},
]
TARGETS: list[dict[str, Any]] = []  # measured, not targeted
ROUNDS = 200


def _turn(tool: Tool) -> Session:
    session = Session()
    agent = Agent(ScriptedModel([CALL, "Done."]), session=session, tools=[tool])

    async def main() -> None:
        agent.followup(create_user_message("Go.", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(main())
    return session


def _answer_of(session: Session) -> str:
    result = next(event.data["message"] for event in session.events if event.type == "tool/result")
    return str(result.content[0]["content"][0]["text"])


@pytest.mark.benchmark(group=GROUP)
def test_dshkit_subagent_call(benchmark: Any) -> None:
    def tool() -> Tool:
        return subagent_tool("ask", "Ask a subagent.", ScriptedModel([ANSWER]))

    assert _answer_of(_turn(tool())) == ANSWER
    benchmark.pedantic(_turn, setup=lambda: ((tool(),), {}), rounds=ROUNDS, warmup_rounds=10)


@pytest.mark.benchmark(group=GROUP)
def test_plain_tool_call(benchmark: Any) -> None:
    def tool() -> Tool:
        return Tool("ask", "Ask.", {"type": "object"}, lambda arguments, ctx: ANSWER)

    assert _answer_of(_turn(tool())) == ANSWER
    benchmark.pedantic(_turn, setup=lambda: ((tool(),), {}), rounds=ROUNDS, warmup_rounds=10)
