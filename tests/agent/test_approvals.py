"""Approvals: policies, asks in the log, approve / deny / remember, cancel while waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dshkit.agent import Agent, Ask, Deny, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

OBJECT = {"type": "object"}


async def until_asked(agent: Agent, count: int = 1) -> None:
    while len(agent.pending_approvals()) < count:
        await asyncio.sleep(0)


def events(session: Any, event_type: str) -> list[Any]:
    return [e for e in session.events if e.type == event_type]


def text(event: Any) -> str:
    return event.data["message"].content[0]["content"][0]["text"]


def tools(ran: list[str], **policies: Any) -> list[Tool]:
    def body(arguments: Any, ctx: Any) -> str:
        ran.append(ctx.call_id)
        return f"{ctx.name} ran"

    return [Tool(name, name, OBJECT, body, approval=policy) for name, policy in policies.items()]


def test_an_ask_is_logged_the_status_says_so_and_approve_runs_the_call(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", '{"path": "/tmp/x"}')), "removed"])
    agent = Agent(model, tools=tools(ran, rm="ask"))

    async def main() -> None:
        agent.followup(kit.user("clean up"))
        await until_asked(agent)
        assert agent.status == "awaiting_approval"
        assert ran == []
        (pending,) = agent.pending_approvals()
        assert (pending.call_id, pending.tool, pending.arguments, pending.turn, pending.step) == ("c1", "rm", '{"path": "/tmp/x"}', 1, 1)
        agent.approve("c1")
        await agent.when_idle()

    asyncio.run(main())
    assert ran == ["c1"]
    assert agent.status == "idle"
    (asked,) = events(agent.session, "approval/asked")
    (decided,) = events(agent.session, "approval/decided")
    assert {k: asked.data[k] for k in ("call_id", "tool", "arguments")} == {"call_id": "c1", "tool": "rm", "arguments": '{"path": "/tmp/x"}'}
    assert dict(decided.data) == {"id": asked.data["id"], "call_id": "c1", "outcome": "allowed_once", "turn": 1, "step": 1}
    types = [e.type for e in agent.session.events]
    assert types.index("tool/call") < types.index("approval/asked") < types.index("approval/decided") < types.index("tool/result")


def test_deny_gives_the_model_an_error_result_with_the_reason(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}")), "ok"])
    agent = Agent(model, tools=tools(ran, rm="ask"))

    async def main() -> None:
        agent.followup(kit.user("go"))
        await until_asked(agent)
        agent.deny("c1", "not in production")
        await agent.when_idle()

    asyncio.run(main())
    assert ran == []
    (result,) = events(agent.session, "tool/result")
    assert result.data["error"] == {"name": "Denied", "code": "denied"}
    assert text(result) == "Tool call denied by the user: not in production. The tool did not run."
    (decided,) = events(agent.session, "approval/decided")
    assert decided.data["outcome"] == "rejected" and decided.data["reason"] == "not in production"


def test_calls_of_the_same_step_that_need_no_approval_still_run(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}"), ("c2", "ls", "{}"), ("c3", "cat", "{}")), "ok"])
    agent = Agent(model, tools=tools(ran, rm="ask", ls=None, cat="always"))

    async def main() -> None:
        agent.followup(kit.user("go"))
        await until_asked(agent)
        while len(events(agent.session, "tool/result")) < 2:  # logged while c1 waits
            await asyncio.sleep(0)
        assert sorted(ran) == ["c2", "c3"]
        agent.approve("c1")
        await agent.when_idle()

    asyncio.run(main())
    # the waiting call held back no result after it: those were logged before the decision
    order = [e.type if e.type != "tool/result" else e.data["message"].source["call_id"] for e in agent.session.events]
    assert [item for item in order if item in ("c1", "c2", "c3", "approval/decided")] == ["c2", "c3", "approval/decided", "c1"]


@pytest.mark.parametrize("durable", [False, True])
def test_a_result_ready_before_a_later_ask_is_logged_while_that_call_waits(kit: Any, tmp_path: Path, durable: bool) -> None:
    # c2 ends before c1 reaches its ask (c1's pre_tool hook takes a while; on a durable log the ask
    # also waits for the disk): c2's result is logged while c1 waits all the same.
    ran: list[str] = []

    async def slow_ask(ctx: Any) -> Any:
        if ctx.name == "rm":
            await asyncio.sleep(0.05)
            return Ask("check first")
        return None

    session = Session.create(tmp_path / "log.jsonl") if durable else None
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}"), ("c2", "ls", "{}")), "ok"])
    agent = Agent(model, session=session, tools=tools(ran, rm=None, ls=None), hooks={"pre_tool": slow_ask})

    async def main() -> None:
        agent.followup(kit.user("go"))
        await until_asked(agent)
        for _ in range(500):
            if events(agent.session, "tool/result"):
                break
            await asyncio.sleep(0.01)
        assert [e.data["message"].source["call_id"] for e in events(agent.session, "tool/result")] == ["c2"]
        agent.approve("c1")
        await agent.when_idle()

    asyncio.run(main())
    assert ran == ["c2", "c1"]
    if session is not None:
        session.close()


def test_never_denies_without_asking_and_the_agent_policy_applies_to_tools_without_one(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}"), ("c2", "ls", "{}")), "ok"])
    agent = Agent(model, tools=tools(ran, rm="never", ls=None), approval="always")
    asyncio.run(_drive(agent, kit.user("go")))
    assert ran == ["c2"]
    assert events(agent.session, "approval/asked") == []
    assert events(agent.session, "tool/result")[0].data["error"]["code"] == "denied"


def test_a_callable_policy_decides_per_call_and_fails_closed(kit: Any) -> None:
    ran: list[str] = []

    def policy(ctx: Any) -> Any:
        if ctx.arguments.get("path", "").startswith("/etc"):
            return Deny("system files are off limits")
        if ctx.arguments.get("boom"):
            raise RuntimeError("policy bug")
        return "always"

    model = ScriptedModel([
        kit.calls_response(("c1", "rm", '{"path": "/etc/passwd"}'), ("c2", "rm", '{"path": "/tmp/a"}'), ("c3", "rm", '{"boom": true}')),
        "ok",
    ])
    agent = Agent(model, tools=tools(ran, rm=None), approval=policy)
    asyncio.run(_drive(agent, kit.user("go")))
    assert ran == ["c2"]
    first, _, third = events(agent.session, "tool/result")
    assert "system files are off limits" in text(first)
    assert "the approval policy failed (RuntimeError: policy bug)" in text(third)


def test_remember_logs_a_policy_that_holds_for_later_calls_and_after_reopen(kit: Any, tmp_path: Path) -> None:
    ran: list[str] = []
    path = tmp_path / "chat.jsonl"
    with Session.create(path) as session:
        model = ScriptedModel([kit.calls_response(("c1", "rm", "{}")), kit.calls_response(("c2", "rm", "{}")), "ok"])
        agent = Agent(model, session=session, tools=tools(ran, rm="ask"))

        async def main() -> None:
            agent.followup(kit.user("go"))
            await until_asked(agent)
            agent.approve("c1", remember=True)
            await agent.when_idle()

        asyncio.run(main())
        assert ran == ["c1", "c2"]  # the second call was not asked
        assert len(events(session, "approval/asked")) == 1
        (policy,) = events(session, "approval/policy")
        assert dict(policy.data) == {"policy": "always", "tool": "rm"}
    with Session.open(path) as session:
        model = ScriptedModel([kit.calls_response(("c3", "rm", "{}")), "ok"])
        agent = Agent(model, session=session, tools=tools(ran, rm="ask"))
        asyncio.run(_drive(agent, kit.user("again")))
        assert ran[-1] == "c3"
        assert len(events(session, "approval/asked")) == 1


def test_deny_with_remember_denies_the_tool_from_then_on(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}")), kit.calls_response(("c2", "rm", "{}")), "ok"])
    agent = Agent(model, tools=tools(ran, rm="ask"))

    async def main() -> None:
        agent.followup(kit.user("go"))
        await until_asked(agent)
        agent.deny("c1", remember=True)
        await agent.when_idle()

    asyncio.run(main())
    assert ran == []
    assert len(events(agent.session, "approval/asked")) == 1
    assert [e.data["error"]["code"] for e in events(agent.session, "tool/result")] == ["denied", "denied"]


def test_cancel_while_waiting_gives_the_asked_call_an_error_result(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}"), ("c2", "ls", "{}")), "never"])
    agent = Agent(model, tools=tools(ran, rm="ask", ls=None))

    async def main() -> None:
        agent.followup(kit.user("go"))
        await until_asked(agent)
        agent.cancel("user")
        await agent.when_idle()

    asyncio.run(main())
    assert ran == ["c2"]
    second, first = events(agent.session, "tool/result")
    assert first.data["error"] == {"name": "Aborted", "code": "approval_cancelled"}
    assert "aborted (user) while it waited for approval" in text(first)
    assert "error" not in second.data
    (decided,) = events(agent.session, "approval/decided")
    assert decided.data["outcome"] == "cancelled"
    assert [e.data["reason"] for e in events(agent.session, "turn/end")] == [{"kind": "aborted", "cause": "user"}]
    assert agent.pending_approvals() == [] and agent.status == "idle"


def test_a_session_wide_never_policy_denies_every_ask(kit: Any) -> None:
    ran: list[str] = []
    session = Session()
    session.append("approval/policy", {"policy": "never"})
    model = ScriptedModel([kit.calls_response(("c1", "rm", "{}"), ("c2", "ls", "{}")), "ok"])
    agent = Agent(model, session=session, tools=tools(ran, rm="ask", ls=None), hooks={"pre_tool": lambda ctx: None})
    asyncio.run(_drive(agent, kit.user("go")))
    assert ran == ["c2"]
    assert "the session's approval policy is 'never'" in text(events(session, "tool/result")[0])


def test_deciding_a_call_that_waits_for_nothing_is_a_value_error(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ValueError, match="no approval is pending for call 'c9'"):
        agent.approve("c9")
    with pytest.raises(TypeError, match="deny reason"):
        agent.deny("c9", 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["sometimes", 3])
def test_a_bad_policy_is_refused(policy: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="approval"):
        Tool("t", "t", OBJECT, lambda a, c: None, approval=policy)
    with pytest.raises((TypeError, ValueError), match="Agent approval"):
        Agent(ScriptedModel([]), approval=policy)


def test_approval_events_are_checked_when_appended() -> None:
    session = Session()
    with pytest.raises(ValueError, match="outcome"):
        session.append("approval/decided", {"id": "a", "outcome": "maybe"})
    with pytest.raises(ValueError, match="policy"):
        session.append("approval/policy", {"policy": "sometimes"})
    with pytest.raises(TypeError, match="tool"):
        session.append("approval/asked", {"id": "a", "call_id": "c1", "arguments": "{}"})
    assert Ask("x") != Deny("x")


async def _drive(agent: Agent, message: Any) -> None:
    agent.followup(message)
    await agent.when_idle()


def test_a_follow_up_on_a_log_left_waiting_finishes_that_turn_first(kit: Any, tmp_path: Path) -> None:
    from dshkit import create_assistant_message

    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:  # as a process leaves it when it dies while c1 waits
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", kit.user("clean up"))
        call = {"type": "tool_call", "id": "c1", "name": "rm", "arguments": "{}"}
        session.append("assistant/message", {"turn": 1, "step": 1, "message": create_assistant_message([call], provider="p", model="m")})
        session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "rm", "arguments": "{}"})
        session.append("approval/asked", {"turn": 1, "step": 1, "id": "a1", "call_id": "c1", "tool": "rm", "arguments": "{}"})
    ran: list[str] = []
    with Session.open(path) as session:
        agent = Agent(ScriptedModel(["first turn done", "second turn done"]), session=session, tools=tools(ran, rm="ask"))
        assert agent.status == "awaiting_approval"

        async def main() -> None:
            agent.followup(kit.user("and then this"))
            await agent.when_waiting()
            assert agent.status == "awaiting_approval" and [p.call_id for p in agent.pending_approvals()] == ["c1"]
            agent.approve("c1")
            await agent.when_idle()

        asyncio.run(main())
        assert ran == ["c1"]
        turns = [(e.type, e.data["turn"]) for e in session.events if e.type in ("turn/start", "turn/end")]
        assert turns == [("turn/start", 1), ("turn/end", 1), ("turn/start", 2), ("turn/end", 2)]
        assert kit.texts(session.messages())[-1] == "second turn done"


def test_when_waiting_on_a_resumed_turn_returns_once_the_turn_is_back_at_its_ask(kit: Any, tmp_path: Path) -> None:
    # A worker wakes an agent on a log an earlier process left waiting, waits, and stops its loop:
    # the turn must still wait for the person then, not be cut (ended "aborted") on its way back.
    from dshkit import create_assistant_message

    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        session.append("user/message", kit.user("clean up"))
        call = {"type": "tool_call", "id": "c1", "name": "rm", "arguments": "{}"}
        session.append("assistant/message", {"turn": 1, "step": 1, "message": create_assistant_message([call], provider="p", model="m")})
        session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "rm", "arguments": "{}"})
        session.append("approval/asked", {"turn": 1, "step": 1, "id": "a1", "call_id": "c1", "tool": "rm", "arguments": "{}"})
    with Session.open(path) as session:
        agent = Agent(ScriptedModel(["done"]), session=session, tools=tools([], rm="ask"))

        async def main() -> None:
            agent.wake()
            await agent.when_waiting()

        asyncio.run(main())  # the loop ends here, cancelling the agent's task
        assert not [e for e in session.events if e.type == "turn/end"]
    with Session.open(path) as session:
        assert [p.call_id for p in Agent(ScriptedModel([]), session=session).pending_approvals()] == ["c1"]


def test_asks_and_decisions_are_live_events(kit: Any) -> None:
    ran: list[str] = []
    model = ScriptedModel([kit.calls_response(("c1", "rm", '{"path": "x"}')), "ok"])
    agent = Agent(model, tools=tools(ran, rm=lambda ctx: Ask("it deletes")))
    seen: list[tuple[str, Any]] = []

    def on_event(event: Any) -> None:
        if event.type == "approval_asked":
            seen.append((event.type, (event.data["call_id"], event.data["tool"], event.data["arguments"], event.data["reason"])))
            agent.approve(event.data["call_id"])  # decided from the subscriber itself
        elif event.type == "approval_decided":
            seen.append((event.type, (event.data["call_id"], event.data["outcome"])))

    agent.subscribe(on_event)
    asyncio.run(_drive(agent, kit.user("go")))
    assert seen == [("approval_asked", ("c1", "rm", '{"path": "x"}', "it deletes")), ("approval_decided", ("c1", "allowed_once"))]
    assert ran == ["c1"]
