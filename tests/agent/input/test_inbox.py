"""followup / steer / inject and the durable inbox (behaviours 1-3 of the notes)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.agent import Agent
from dshkit.models import ScriptedModel
from dshkit.session import Session


def spliced(session: Session) -> list[Any]:
    return [event.data for event in session.events if event.type == "agent/inbox/spliced"]


def test_queueing_returns_none_and_keeps_the_callers_message(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    first, second = kit.user("a"), kit.context("b")
    assert agent.inject(first) is None
    assert agent.inject(second) is None
    assert agent.inbox.next_step == (first, second)
    assert agent.inbox.next_step[0] is first
    assert agent.status == "idle"


@pytest.mark.parametrize("method", ["followup", "steer", "inject"])
@pytest.mark.parametrize(
    "bad",
    [
        {"id": "x", "role": "user", "content": "hi", "source": {"kind": "user"}},
        "hi",
        None,
        dshkit.create_assistant_message("hi", provider="p", model="m"),
        dshkit.create_message(role="system", content="be nice", source={"kind": "user"}),
    ],
    ids=["dict", "str", "none", "assistant", "system"],
)
def test_anything_but_a_user_message_is_a_type_error(method: str, bad: object) -> None:
    agent = Agent(ScriptedModel([]))

    async def main() -> None:
        with pytest.raises(TypeError, match=f"{method}: expected a user-role Message"):
            getattr(agent, method)(bad)

    asyncio.run(main())
    assert agent.session.events == () or len(agent.session.events) == 0


@pytest.mark.parametrize("method", ["followup", "steer", "inject"])
def test_an_id_already_pending_is_a_value_error_and_changes_nothing(kit: Any, method: str) -> None:
    agent = Agent(ScriptedModel([]))
    message = kit.user("once")
    agent.inject(message)
    before = len(agent.session.events)

    async def main() -> None:
        with pytest.raises(ValueError, match="already pending"):
            getattr(agent, method)(message)
        with pytest.raises(ValueError, match="already pending"):
            getattr(agent, method)(message.with_content("same id, other words"))

    asyncio.run(main())
    assert len(agent.session.events) == before
    assert agent.inbox.next_step == (message,)


def test_an_id_already_in_the_log_is_refused(kit: Any) -> None:
    agent = Agent(ScriptedModel(["ok"]))
    message = kit.user("hello")

    async def main() -> None:
        agent.followup(message)
        await agent.when_idle()
        with pytest.raises(ValueError, match="already in the session log"):
            agent.followup(message)

    asyncio.run(main())


def test_the_same_words_twice_are_two_messages(kit: Any) -> None:
    # De-duplicate by id, never by content: a repeated "yes" is two answers.
    agent = Agent(ScriptedModel(["one", "two"]))
    first, second = kit.user("yes"), kit.user("yes")

    async def main() -> None:
        agent.followup(first)
        agent.followup(second)
        await agent.when_idle()

    asyncio.run(main())
    assert [m.id for m in agent.session.messages() if m.role == "user"] == [first.id, second.id]


def test_waking_needs_a_running_loop_and_changes_nothing_without_one(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(RuntimeError, match="needs a running asyncio event loop"):
        agent.followup(kit.user("x"))
    with pytest.raises(RuntimeError, match="needs a running asyncio event loop"):
        agent.steer(kit.user("x"))
    assert len(agent.session.events) == 0
    agent.inject(kit.user("inject needs no loop"))
    assert len(agent.inbox.next_step) == 1


def test_every_change_is_one_splice_event_logged_before_memory_changes(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    a, b, c, d = (kit.user(text) for text in "abcd")
    seen: list[tuple[int, tuple[Any, ...]]] = []
    # A session observer runs right after the commit: the inbox must not have changed yet.
    agent.session.subscribe(lambda event: seen.append((event.seq, agent.inbox.next_step)))
    agent.inject(a)
    agent.inject(b)
    assert agent.inbox.replace(a.id, c) is True
    assert agent.inbox.remove(b.id) is True
    assert agent.inbox.remove(d.id) is False
    assert agent.inbox.replace(d.id, kit.user("e")) is False
    assert agent.inbox.next_step == (c,)
    assert [data["outcome"] for data in spliced(agent.session)] == ["inserted", "inserted", "replaced", "discarded"]
    assert seen == [(0, ()), (1, (a,)), (2, (a, b)), (3, (c, b))]
    replace = spliced(agent.session)[2]
    assert (replace["target"], replace["start"], replace["removed_count"], replace["inserted"]) == ("next_step", 0, 1, (c,))


def test_a_rejected_append_changes_nothing(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    agent.inject(kit.user("kept"))
    agent.session.close()
    with pytest.raises(Exception):
        agent.inject(kit.user("never queued"))
    assert [m.text for m in agent.inbox.next_step] == ["kept"]
    assert len(agent.inbox) == 1


def test_replace_keeps_the_id_or_takes_a_new_one_but_never_a_duplicate(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    a, b = kit.user("a"), kit.user("b")
    agent.inject(a)
    agent.inject(b)
    rewritten = a.with_content("a, reworded")
    assert agent.inbox.replace(a.id, rewritten)
    assert agent.inbox.next_step == (rewritten, b)
    with pytest.raises(ValueError, match="already pending"):
        agent.inbox.replace(a.id, b)
    with pytest.raises(TypeError, match="inbox.replace: expected a user-role Message"):
        agent.inbox.replace(a.id, "text")  # type: ignore[arg-type]
    assert agent.inbox.next_step == (rewritten, b)


def test_replace_under_the_same_id_is_a_rewrite_refusing_another_role_or_source(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    a = kit.user("a")
    agent.inject(a)
    other_source = dshkit.freeze_message({"id": a.id, "role": "user", "content": "a", "source": {"kind": "plugin", "plugin": "p"}})
    with pytest.raises(ValueError, match=rf"inbox.replace: a different message under pending id {a.id} \(source"):
        agent.inbox.replace(a.id, other_source)
    other_role = dshkit.freeze_message({"id": a.id, "role": "assistant", "content": "a", "source": {"kind": "assistant"}})
    with pytest.raises(TypeError, match="inbox.replace: expected a user-role Message, got role 'assistant'"):
        agent.inbox.replace(a.id, other_role)
    assert agent.inbox.next_step == (a,)
    assert [data["outcome"] for data in spliced(agent.session)] == ["inserted"]  # nothing logged for the refusals
    reworded = a.with_content("a, reworded")
    assert agent.inbox.replace(a.id, reworded) is True
    assert agent.inbox.next_step == (reworded,)


def test_check_rewrite_names_the_part_that_differs(kit: Any) -> None:
    from dshkit.agent._input.checks import check_rewrite

    a = kit.user("a")
    assert check_rewrite(a, a.with_content("b")) == a.with_content("b")
    with pytest.raises(ValueError, match=rf"rewrite: a different message under claimed id {a.id} \(id "):
        check_rewrite(a, kit.user("a"))
    as_assistant = dshkit.freeze_message({"id": a.id, "role": "assistant", "content": "a", "source": dict(a.source)})
    with pytest.raises(ValueError, match=r"here: a different message under pending id .* \(role 'assistant' instead of 'user'\)"):
        check_rewrite(a, as_assistant, "here", held="pending")
    with pytest.raises(TypeError, match=f"rewrite: expected a rewrite of message {a.id} \\(a Message\\), got str"):
        check_rewrite(a, "a")


def test_pending_input_survives_a_restart_without_opening_a_turn(tmp_path: Path, kit: Any) -> None:
    path, crashed = tmp_path / "log.jsonl", tmp_path / "crashed.jsonl"
    session = Session.create(path)
    agent = Agent(ScriptedModel(["first answer"]), session=session)
    injected, followed = kit.context("the file changed"), kit.user("then do this")
    agent.inject(injected)

    async def queue_then_crash() -> None:
        agent.followup(followed)
        # The driver has not run yet: a copy of the log now is a process that died right
        # after queueing.
        session.sync()
        shutil.copyfile(path, crashed)
        await agent.when_idle()

    asyncio.run(queue_then_crash())
    session.close()

    reopened = Session.open(crashed)
    again = Agent(ScriptedModel(["done"]), session=reopened)
    assert again.inbox.next_step == (injected,)
    assert again.inbox.next_turn == (followed,)
    assert not any(event.type.startswith("turn/") for event in reopened.events)
    assert again.status == "idle"

    async def main() -> None:
        assert again.wake() is True
        await again.when_idle()
        assert again.wake() is False  # nothing pending any more

    asyncio.run(main())
    assert [m.id for m in reopened.messages()[:2]] == [injected.id, followed.id]
    reopened.close()


def test_an_idle_inject_survives_a_restart(tmp_path: Path, kit: Any) -> None:
    path = tmp_path / "log.sqlite"
    with Session.create(path) as session:
        Agent(ScriptedModel([]), session=session).inject(kit.context("remember this"))
    with Session.open(path) as session:
        assert [m.text for m in Agent(ScriptedModel([]), session=session).inbox.next_step] == ["remember this"]
        assert kit.types(session) == ["agent/inbox/spliced"]


def test_claim_takes_all_next_step_input_plus_exactly_one_followup(kit: Any) -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(model)
    c1, c2, f1, f2 = kit.context("c1"), kit.context("c2"), kit.user("f1"), kit.user("f2")

    async def main() -> None:
        agent.inject(c1)
        agent.inject(c2)
        agent.followup(f1)
        agent.followup(f2)
        await agent.when_idle()

    asyncio.run(main())
    first, second = model.requests
    assert [m.id for m in first.messages] == [c1.id, c2.id, f1.id]
    assert [m.id for m in second.messages][-1] == f2.id
    assert len(second.messages) == 5
    claims = [data for data in spliced(agent.session) if data["outcome"] == "claimed"]
    # next-step claim, then the follow-up claim, then the second turn's follow-up claim
    assert [(data["target"], data["removed_count"]) for data in claims] == [("next_step", 2), ("next_turn", 1), ("next_turn", 1)]


def test_the_first_claim_happens_after_turn_start_is_committed(kit: Any) -> None:
    agent = Agent(ScriptedModel(["ok"]))

    kit.run_followup(agent, kit.user("go"))
    assert kit.types(agent.session)[:4] == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start"]


def test_an_empty_claim_logs_nothing(kit: Any) -> None:
    model = ScriptedModel([kit.calls_response(("c1", "noop", "{}")), "done"])
    from dshkit.agent import Tool

    async def noop(arguments: Any, ctx: Any) -> str:
        return "ok"

    agent = Agent(model, tools=[Tool("noop", "does nothing", {"type": "object"}, noop)])

    kit.run_followup(agent, kit.user("go"))
    assert len(spliced(agent.session)) == 2  # the follow-up's insert and claim; step 2 claimed nothing
