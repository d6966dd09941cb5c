"""`Agent.run_stream`: text deltas, tool calls and results, partial structured output, then the result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

import dshkit
from dshkit.agent import Agent, ModelCallFailed, RunEvent, tool
from dshkit.models import ScriptedModel, call


class Weather(BaseModel):
    city: str
    degrees: int


@tool
def temperature(city: str) -> int:
    """Today's temperature in a city."""
    return 21


def collect(agent: Agent, prompt: str, **options: Any) -> tuple[list[RunEvent], Any, list[Any]]:
    async def main() -> tuple[list[RunEvent], Any, list[Any]]:
        partials: list[Any] = []
        async with agent.run_stream(prompt, **options) as stream:
            events = []
            async for event in stream:
                events.append(event)
                if event.kind == "output":
                    partials.append(event.output)
            return events, await stream.result(), partials

    return asyncio.run(main())


def test_text_deltas_tool_events_then_the_result() -> None:
    agent = Agent(ScriptedModel([call("temperature", city="Oslo"), "It is 21 degrees."]), tools=[temperature])
    events, result, _ = collect(agent, "weather?")
    kinds = [event.kind for event in events]
    assert kinds[:2] == ["tool_call", "tool_result"] and set(kinds[2:]) == {"text"}
    assert events[0].name == "temperature" and events[1].message is not None and events[1].message.content[0]["content"][0]["text"] == "21"
    assert "".join(event.text for event in events if event.kind == "text") == "It is 21 degrees."
    assert result.output == "It is 21 degrees." and result.status == "completed"


def test_partial_structured_output_grows_then_validates_at_the_end() -> None:
    arguments = ['{"city": "Os', 'lo", "deg', 'rees": 21}']
    chunks: list[dict[str, Any]] = [{"type": "tool_call_delta", "index": 0, "id": "f", "name": "final_result", "arguments": arguments[0]}]
    chunks += [{"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": piece} for piece in arguments[1:]]
    chunks.append({"type": "finish", "reason": "tool_calls"})
    events, result, partials = collect(Agent(ScriptedModel([chunks])), "weather?", output_type=Weather)
    assert partials == [{"city": "Os"}, {"city": "Oslo"}, {"city": "Oslo", "degrees": 21}]
    assert {"tool_call", "tool_result"}.isdisjoint(event.kind for event in events)  # the final-answer tool is the output, not a tool
    assert result.output == Weather(city="Oslo", degrees=21)


def test_native_partial_output_comes_from_the_text() -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": '{"city": "Rome", '}, {"type": "text_delta", "text": '"degrees": 30}'}]], native_output=True)
    _, result, partials = collect(Agent(model), "weather?", output_type=Weather)
    assert partials == [{"city": "Rome"}, {"city": "Rome", "degrees": 30}] and result.output.degrees == 30


def test_a_failed_streamed_run_raises_from_result() -> None:
    agent = Agent(ScriptedModel([[{"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "busy"}}]]))
    with pytest.raises(ModelCallFailed, match="busy"):
        collect(agent, "hi")


def test_leaving_the_block_early_cancels_the_run() -> None:
    agent = Agent(ScriptedModel(["one two three four five six seven"], delay=0.02))

    async def main() -> None:
        async with agent.run_stream("talk") as stream:
            async for event in stream:
                assert event.kind == "text"
                break
        await agent.when_idle()

    asyncio.run(main())
    assert agent.session.events[-1].data["reason"] == {"kind": "aborted", "cause": "run_cancelled"}


def test_a_stream_queued_behind_another_turn_gets_only_its_own_turns_events() -> None:
    # The stream learns its turn from the claim of its own prompt: the turn running before it
    # (a follow-up's, answered with text too) must not leak into it.
    agent = Agent(ScriptedModel(["first answer", "second answer"], delay=0.01))

    async def main() -> tuple[list[RunEvent], Any]:
        agent.followup(dshkit.create_user_message("first", source={"kind": "user"}))
        async with agent.run_stream("second") as stream:
            events = [event async for event in stream]
            return events, await stream.result()

    events, result = asyncio.run(main())
    assert "".join(event.text for event in events) == "second answer"
    assert result.turn == 2 and result.output == "second answer" and result.messages[0].text == "second"


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"limits": {"requests": 1}}, TypeError, "Agent.run_stream limits: expected a dshkit.agent.UsageLimits, got dict"),
        ({"output_retries": -1}, ValueError, r"Agent.run_stream output_retries: expected an int >= 0, got -1"),
    ],
)
def test_bad_stream_arguments_raise_from_async_with_and_queue_nothing(options: dict[str, Any], error: type, message: str) -> None:
    agent = Agent(ScriptedModel(["never"]))

    async def main() -> None:
        with pytest.raises(error, match=message):
            async with agent.run_stream("hi", **options):
                raise AssertionError("the block must not run")

    asyncio.run(main())
    assert len(agent.session.events) == 0 and len(agent.inbox) == 0
