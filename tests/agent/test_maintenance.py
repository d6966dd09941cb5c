"""run_maintenance: runs only while idle; waking input that arrives meanwhile runs afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

import dshkit
from dshkit.agent import Agent
from dshkit.models import ScriptedModel


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_maintenance_waits_for_the_running_turn(kit: Any) -> None:
    agent = Agent(ScriptedModel(["one two three"], delay=0.001))
    seen: list[Any] = []

    def fn() -> str:
        seen.append((agent.status, kit.types(agent.session)[-1]))
        return "compacted"

    async def main() -> Any:
        agent.followup(kit.user("go"))
        return await agent.run_maintenance(fn)

    assert run(main()) == "compacted"
    assert seen == [("idle", "turn/end")]


def test_waking_input_during_maintenance_stays_queued_with_its_id_and_runs_afterwards(kit: Any) -> None:
    model = ScriptedModel(["summary noted", "answered"])
    agent = Agent(model)
    first = kit.user("first question")
    during, steer = kit.user("asked during compaction"), kit.user("and a steer")

    async def main() -> None:
        agent.followup(first)
        await agent.when_idle()

        async def compact() -> None:
            agent.followup(during)
            agent.steer(steer)
            assert agent.status == "idle"
            await asyncio.sleep(0)
            assert model.requests[-1].messages[-1] is first  # nothing ran meanwhile
            summary = dshkit.create_user_message("Summary: a question was asked.", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()})
            messages = agent.session.messages()
            agent.session.compact(messages[0].id, messages[-1].id, summary)
            assert agent.inbox.next_turn == (during,) and agent.inbox.next_step == (steer,)

        await agent.run_maintenance(compact)
        await agent.when_idle()

    run(main())
    last = model.requests[-1].messages
    assert last[0].text == "Summary: a question was asked."
    assert last[-2:] == (steer, during)
    assert len(agent.inbox) == 0


def test_maintenance_that_raises_still_releases_the_agent(kit: Any) -> None:
    agent = Agent(ScriptedModel(["ok"]))

    def broken() -> None:
        agent.followup(kit.user("queued during a failed maintenance"))
        raise RuntimeError("compaction failed")

    async def main() -> None:
        try:
            await agent.run_maintenance(broken)
        except RuntimeError:
            pass
        await agent.when_idle()

    run(main())
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_inject_during_maintenance_does_not_wake(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))

    async def main() -> None:
        await agent.run_maintenance(lambda: agent.inject(kit.context("quiet")))
        assert agent.status == "idle"

    run(main())
    assert len(agent.inbox.next_step) == 1


def test_two_maintenance_runs_never_overlap(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    active: list[int] = []
    overlaps: list[int] = []

    async def job(number: int) -> int:
        active.append(number)
        overlaps.append(len(active))
        await asyncio.sleep(0)
        active.remove(number)
        return number

    async def main() -> list[int]:
        return list(await asyncio.gather(*(agent.run_maintenance(lambda n=n: job(n)) for n in range(3))))

    assert run(main()) == [0, 1, 2]
    assert overlaps == [1, 1, 1]


def test_one_agent_can_be_driven_from_successive_event_loops(kit: Any) -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model)
    for text in ("a", "b"):

        async def main(text: str = text) -> None:
            agent.followup(kit.user(text))
            await agent.when_idle()
            await agent.run_maintenance(lambda: None)

        run(main())
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["completed", "completed"]


def test_a_loop_failure_is_raised_once_by_when_idle(tmp_path: Any, kit: Any) -> None:
    from dshkit.agent import Tool
    from dshkit.session import Session, SessionClosedError

    session = Session.create(tmp_path / "log.jsonl")

    async def close_the_log(arguments: Any, ctx: Any) -> str:
        session.close()  # the disk went away: nothing more can be written
        return "ok"

    agent = Agent(ScriptedModel([kit.calls_response(("c1", "t", "{}"))]), session=session,
                  tools=[Tool("t", "t", {"type": "object"}, close_the_log)])

    async def main() -> None:
        agent.followup(kit.user("go"))
        try:
            await agent.when_idle()
        except SessionClosedError:
            pass
        else:
            raise AssertionError("when_idle() did not report the failure")
        assert agent.status == "idle"
        await agent.when_idle()  # reported once

    run(main())
