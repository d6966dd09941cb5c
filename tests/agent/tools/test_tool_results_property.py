"""Property: whatever the tools, hooks, policies, decisions and cancels, every tool call in the log
ends with exactly one result."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dshkit.agent import Agent, Deny, Tool
from dshkit.models import ScriptedModel

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
BEHAVIOURS = ["ok", "raise", "slow", "timeout", "never", "ask_yes", "ask_no", "ask_hold", "hooked", "bad_args", "not_json", "unknown"]


def _tools() -> list[Tool]:
    async def ok(arguments: Any, ctx: Any) -> str:
        return "ok"

    def boom(arguments: Any, ctx: Any) -> str:
        raise RuntimeError("boom")

    async def slow(arguments: Any, ctx: Any) -> str:
        await asyncio.sleep(0.001)
        return "slow"

    async def hang(arguments: Any, ctx: Any) -> str:
        await asyncio.sleep(10)
        return "never"

    return [
        Tool("ok", "", SCHEMA, ok), Tool("raise", "", SCHEMA, boom), Tool("slow", "", SCHEMA, slow, parallel=False),
        Tool("timeout", "", SCHEMA, hang, timeout=0.001), Tool("never", "", SCHEMA, ok, approval="never"),
        Tool("ask_yes", "", SCHEMA, ok, approval="ask"), Tool("ask_no", "", SCHEMA, ok, approval="ask"),
        Tool("ask_hold", "", SCHEMA, ok, approval="ask"), Tool("hooked", "", SCHEMA, ok),
    ]


def _call(step: int, index: int, behaviour: str) -> dict[str, Any]:
    name = {"bad_args": "ok", "not_json": "ok", "unknown": "nope"}.get(behaviour, behaviour)
    arguments = {"bad_args": '{"n": "x"}', "not_json": '{"n": '}.get(behaviour, '{"n": 1}')
    return {"type": "tool_call_delta", "index": index, "id": f"s{step}c{index}", "name": name, "arguments": arguments}


steps_strategy = st.lists(st.lists(st.sampled_from(BEHAVIOURS), min_size=1, max_size=4), min_size=1, max_size=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, cancel_after=st.one_of(st.none(), st.integers(min_value=0, max_value=30)))
def test_every_tool_call_ends_with_exactly_one_result(steps: list[list[str]], cancel_after: int | None) -> None:
    responses: list[Any] = [
        [_call(number, index, behaviour) for index, behaviour in enumerate(step)] + [{"type": "finish", "reason": "tool_calls"}]
        for number, step in enumerate(steps)
    ]
    responses.append("done")
    hooks = {"pre_tool": lambda ctx: Deny("hooked") if ctx.name == "hooked" else None}
    agent = Agent(ScriptedModel(responses), tools=_tools(), hooks=hooks)

    async def main() -> None:
        agent.followup(__import__("dshkit").create_user_message("go", source={"kind": "user"}))
        rounds = 0
        while agent.status != "idle":
            rounds += 1
            if cancel_after is not None and rounds == cancel_after:
                agent.cancel("user")
            for pending in agent.pending_approvals():
                if pending.tool == "ask_yes":
                    agent.approve(pending.call_id)
                elif pending.tool == "ask_no":
                    agent.deny(pending.call_id, "no")
            if rounds > 400 and agent.pending_approvals():
                agent.cancel("stuck")  # ask_hold waits for ever unless cancelled
            await asyncio.sleep(0.001 if rounds > 50 else 0)
        await agent.when_idle()

    asyncio.run(main())
    events = agent.session.events
    requested = [call["id"] for e in events if e.type == "assistant/message" for call in e.data["message"].tool_calls]
    answered = Counter(e.data["message"].source["call_id"] for e in events if e.type == "tool/result")
    started = Counter(e.data["call_id"] for e in events if e.type == "tool/call")
    assert all(answered[call_id] == 1 for call_id in requested), (requested, answered)
    assert set(answered) == set(requested)
    assert all(count == 1 for count in started.values()) and set(started) <= set(requested)
    asks = Counter(e.data["call_id"] for e in events if e.type == "approval/asked")
    decided = {e.data["id"] for e in events if e.type == "approval/decided"}
    assert all(count == 1 for count in asks.values())
    assert len(decided) == len(asks)  # every ask of a finished turn was decided (approved, denied or cancelled)
    types = [e.type for e in events]
    assert types.count("turn/end") == types.count("turn/start") <= 1  # a cancel before the turn: none


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, decisions=st.lists(st.booleans(), min_size=1, max_size=12))
def test_every_tool_call_ends_with_exactly_one_result_across_a_restart(steps: list[list[str]], decisions: list[bool]) -> None:
    """The first agent's task stops (as a process shutting down) while calls wait; a second agent
    on the re-opened log decides them; the log still answers every call exactly once."""
    import tempfile
    from pathlib import Path

    import dshkit
    from dshkit.session import Session

    responses: list[Any] = [
        [_call(number, index, behaviour) for index, behaviour in enumerate(step)] + [{"type": "finish", "reason": "tool_calls"}]
        for number, step in enumerate(steps)
    ]
    responses.append("done")
    hooks = {"pre_tool": lambda ctx: Deny("hooked") if ctx.name == "hooked" else None}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "log.jsonl"
        with Session.create(path) as session:
            first = Agent(ScriptedModel(responses), session=session, tools=_tools(), hooks=hooks)

            async def until_waiting_or_idle() -> None:
                first.followup(dshkit.create_user_message("go", source={"kind": "user"}))
                await first.when_waiting()  # then asyncio.run returns: the agent's task is cancelled

            asyncio.run(until_waiting_or_idle())
            asked = len(first.session.events)
        with Session.open(path) as session:
            used = sum(1 for e in session.events if e.type == "assistant/message")
            second = Agent(ScriptedModel(responses[used:] or ["done"]), session=session, tools=_tools(), hooks=hooks)

            async def decide() -> None:
                turns = 0
                while True:
                    await asyncio.sleep(0)
                    pending = second.pending_approvals()
                    if pending:
                        yes = decisions[turns % len(decisions)]
                        turns += 1
                        second.approve(pending[0].call_id) if yes else second.deny(pending[0].call_id)
                        await second.when_waiting()
                    elif second.status == "idle":
                        break
                await second.when_idle()

            asyncio.run(decide())
            events = session.events
    assert asked > 0
    requested = [call["id"] for e in events if e.type == "assistant/message" for call in e.data["message"].tool_calls]
    answered = Counter(e.data["message"].source["call_id"] for e in events if e.type == "tool/result")
    assert all(answered[call_id] == 1 for call_id in requested), (requested, answered)
    assert set(answered) == set(requested)
    types = [e.type for e in events]
    assert types.count("turn/start") == types.count("turn/end") == 1
