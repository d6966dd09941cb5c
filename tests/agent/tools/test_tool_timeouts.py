"""Tool timeouts: a sync and an async body past their time are cancelled, the result says so."""

from __future__ import annotations

import asyncio
import os
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
        release.set()  # the given-up body (in its own daemon thread) may end now

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


def test_sync_bodies_left_running_after_their_timeout_do_not_keep_a_later_call_from_starting(kit: Any) -> None:
    # More stuck bodies than asyncio's default pool has threads (min(32, cpus + 4)): each keeps its
    # thread after its timeout. A later quick body must still start, run and answer.
    stuck = min(32, (os.cpu_count() or 1) + 4) + 2
    release = threading.Event()
    quick_ran: list[str] = []

    def blocking(arguments: Any, ctx: Any) -> str:
        release.wait(60)
        return "late"

    def quick(arguments: Any, ctx: Any) -> str:
        quick_ran.append(ctx.call_id)
        return "quick answer"

    first = kit.calls_response(*[(f"s{index}", "block", "{}") for index in range(stuck)])
    model = ScriptedModel([first, kit.calls_response(("q1", "quick", "{}")), "ok"])
    tools = [
        Tool("block", "Blocks.", {"type": "object"}, blocking, timeout=0.05),
        Tool("quick", "Quick.", {"type": "object"}, quick, timeout=30),
    ]
    agent = Agent(model, tools=tools)

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()
        release.set()

    try:
        asyncio.run(main())
    finally:
        release.set()
    answers = {e.data["message"].source["call_id"]: e.data for e in agent.session.events if e.type == "tool/result"}
    assert sum(1 for data in answers.values() if data.get("error", {}).get("code") == "timeout") == stuck
    assert quick_ran == ["q1"]
    assert "error" not in answers["q1"] and answers["q1"]["message"].content[0]["content"][0]["text"] == "quick answer"


def test_a_timed_sync_body_whose_thread_cannot_start_says_it_never_started(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def refuse(self: threading.Thread) -> None:  # what a process out of threads answers
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    model = ScriptedModel([kit.calls_response(("c1", "work", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("work", "Works.", {"type": "object"}, lambda a, c: ran.append("ran") or "done", timeout=5)])
    drive(agent, kit.user("go"))
    result = only_result(agent.session)
    assert ran == []
    assert result.data["error"] == {"name": "NeverStarted", "code": "not_started"}
    assert "never started" in text(result) and "did not run" in text(result) and "can't start new thread" in text(result)


def test_a_timed_sync_body_whose_thread_begins_after_its_timeout_never_runs_and_says_so(kit: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    late: list[tuple[threading.Timer, threading.Thread]] = []
    start = threading.Thread.start

    def start_late(self: threading.Thread) -> None:  # a thread the OS schedules only long after the timeout
        if not self.name.startswith("dshkit-tool-"):
            return start(self)
        timer = threading.Timer(1.0, start, args=(self,))
        late.append((timer, self))
        start(timer)

    monkeypatch.setattr(threading.Thread, "start", start_late)
    model = ScriptedModel([kit.calls_response(("c1", "work", "{}")), "ok"])
    agent = Agent(model, tools=[Tool("work", "Works.", {"type": "object"}, lambda a, c: ran.append("ran") or "done", timeout=0.05)])
    drive(agent, kit.user("go"))
    assert late
    for timer, thread in late:
        timer.join()
        thread.join()  # the body's thread began at last, and ended
    result = only_result(agent.session)
    assert ran == []  # given up before it began: it never runs
    assert result.data["error"]["code"] == "not_started"
    assert "never started" in text(result) and "ran out before its thread began" in text(result)
