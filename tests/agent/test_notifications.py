"""Live notifications (`dshkit.agent.notifications`) carry the same Message objects as the log; identity across the whole lifecycle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, AgentEvent, Enter, Tool
from dshkit.models import ScriptedModel


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_one_message_keeps_its_identity_from_queueing_to_the_request(kit: Any) -> None:
    model = ScriptedModel(["answer"])
    claimed_in_hook: list[Any] = []

    def pre_step(ctx: Any) -> Enter:
        claimed_in_hook.extend(ctx.messages)
        return Enter(ctx.messages)

    agent = Agent(model, hooks={"pre_step": pre_step})
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    prompt = kit.user("follow me")

    async def main() -> None:
        agent.followup(prompt)
        assert agent.inbox.next_turn[0] is prompt
        await agent.when_idle()

    run(main())
    by_type = {event.type: event for event in events if event.message is not None and event.message.id == prompt.id}
    assert by_type["inserted"].message is prompt and by_type["inserted"].data["target"] == "next_turn"
    assert by_type["claimed"].message is prompt
    assert claimed_in_hook[0] is prompt
    assert by_type["message"].message is prompt
    assert by_type["message"].data["event_type"] == "user/message"
    logged = agent.session.events[by_type["message"].data["seq"]]
    assert logged.data is prompt
    assert agent.session.messages()[0] is prompt
    assert model.requests[0].messages[0] is prompt
    request_event = next(event for event in events if event.type == "request")
    assert request_event.data["request"] is model.requests[0]


def test_events_cover_boundaries_deltas_and_tool_calls_in_order(kit: Any) -> None:
    async def noop(arguments: Any, ctx: Any) -> str:
        return "ok"

    model = ScriptedModel([kit.calls_response(("c1", "noop", "{}"), text="let me check"), "done"])
    agent = Agent(model, tools=[Tool("noop", "n", {"type": "object"}, noop)])
    types: list[str] = []
    agent.subscribe(lambda event: types.append(event.type))

    kit.run_followup(agent, kit.user("go"))
    assert types == [
        "inserted", "turn_start", "claimed", "step_start", "message", "request",
        "delta", "delta", "delta", "message", "tool_call", "message", "step_end",
        "step_start", "request", "delta", "delta", "message", "step_end", "turn_end",
    ]


def test_the_async_iterator_sees_every_event_and_stops_on_close(kit: Any) -> None:
    agent = Agent(ScriptedModel(["hello world"]))
    received: list[AgentEvent] = []

    async def main() -> None:
        stream = agent.events()
        agent.followup(kit.user("hi"))

        async def consume() -> None:
            async for event in stream:
                received.append(event)
                if event.type == "turn_end":
                    break

        await asyncio.gather(consume(), agent.when_idle())
        stream.close()
        assert [event async for event in stream] == []

    run(main())
    assert received[0].type == "inserted"
    assert received[-1].type == "turn_end" and received[-1].data["reason"] == {"kind": "completed"}
    deltas = [event.data["chunk"]["text"] for event in received if event.type == "delta" and event.data["chunk"]["type"] == "text_delta"]
    assert "".join(deltas) == "hello world"


def test_a_dropped_event_stream_is_released(kit: Any) -> None:
    import gc

    agent = Agent(ScriptedModel([]))

    async def main() -> None:
        stream = agent.events()
        assert agent._hub.active
        del stream
        gc.collect()
        assert not agent._hub.active

    run(main())


def test_unsubscribe_stops_delivery_and_discards_are_reported(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    seen: list[tuple[str, Any]] = []
    unsubscribe = agent.subscribe(lambda event: seen.append((event.type, event.data.get("cause"))))
    message = kit.user("x")
    agent.inject(message)
    agent.inbox.remove(message.id)
    unsubscribe()
    agent.inject(kit.user("unseen"))
    assert seen == [("inserted", None), ("discarded", "removed")]
    with pytest.raises(TypeError, match="expected a callable"):
        agent.subscribe("not callable")  # type: ignore[arg-type]


def test_event_data_is_read_only(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    agent.inject(kit.user("x"))
    with pytest.raises(TypeError):
        events[0].data["target"] = "elsewhere"  # type: ignore[index]
    with pytest.raises(AttributeError):
        events[0].type = "other"  # type: ignore[misc]
