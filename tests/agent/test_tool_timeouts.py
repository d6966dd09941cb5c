"""Tool timeouts: a sync and an async body past their time are cancelled, the result says so."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel


def drive(agent: Agent, message: Any) -> None:
    async def main() -> None:
        agent.followup(message)
        await agent.when_idle()

    asyncio.run(main())


def only_result(session: Any) -> Any:
    (result,) = [e for e in session.events if e.type == "tool/result"]
    return result


def text(event: Any) -> str:
    return event.data["message"].content[0]["content"][0]["text"]


def test_an_async_body_past_its_timeout_is_cancelled(kit: Any) -> None:
    state: dict[str, bool] = {}

    async def slow(arguments: Any, ctx: Any) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "never"

    model = ScriptedModel([kit.calls_response(("c1", "slow", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("slow", "Slow.", {"type": "object"}, slow, timeout=0.05)])
    started = time.monotonic()
    drive(agent, kit.user("go"))
    assert time.monotonic() - started < 5
    assert state == {"cancelled": True}
    result = only_result(agent.session)
    assert result.data["error"] == {"name": "TimedOut", "code": "timeout"}
    assert "timed out after 0.05 s" in text(result) and "effects are unknown" in text(result)


def test_a_sync_body_past_its_timeout_is_given_up_and_the_agent_goes_on(kit: Any) -> None:
    release = threading.Event()
    finished: list[str] = []

    def blocking(arguments: Any, ctx: Any) -> str:
        release.wait(10)
        finished.append("done")
        return "late"

    model = ScriptedModel([kit.calls_response(("c1", "block", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("block", "Blocks.", {"type": "object"}, blocking)], tool_timeout=0.05)

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()
        assert finished == []  # the turn ended while the body still blocked
        release.set()  # (asyncio.run waits for the worker thread to end)

    asyncio.run(main())
    result = only_result(agent.session)
    assert result.data["error"]["code"] == "timeout"
    assert "effects are unknown" in text(result)
    assert [e.data["reason"]["kind"] for e in agent.session.events if e.type == "turn/end"] == ["completed"]


def test_a_tool_timeout_wins_over_the_agent_default_and_a_quick_body_is_untouched(kit: Any) -> None:
    def quick(arguments: Any, ctx: Any) -> str:
        return threading.current_thread().name

    model = ScriptedModel([kit.calls_response(("c1", "quick", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("quick", "Quick.", {"type": "object"}, quick, timeout=5)], tool_timeout=0.001)
    drive(agent, kit.user("go"))
    result = only_result(agent.session)
    assert "error" not in result.data
    assert text(result) != threading.current_thread().name  # a sync body with a timeout runs in a worker thread


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "5", True])
def test_a_bad_timeout_is_refused(timeout: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="timeout"):
        Tool("t", "t", {"type": "object"}, lambda a, c: None, timeout=timeout)
    with pytest.raises((TypeError, ValueError), match="tool_timeout"):
        Agent(ScriptedModel([]), tool_timeout=timeout)
