"""`agent.cancel()` from a session observer behaves exactly as from anywhere else (issue 9, item 10).

An observer may not append to the session it observes, and clearing the inbox is an append: the
agent clears it as soon as the append being published has returned, so the log, the inbox and
the outcome are the same as for a cancel made right after that append.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session


def shape(session: Session) -> list[Any]:
    """The log without ids and times: each event's type and its id-free facts."""
    out: list[Any] = []
    for event in session.events:
        data = event.data
        if event.type == "agent/inbox/spliced":
            out.append((event.type, data["target"], data["outcome"], data.get("cause"), [m.text for m in data["inserted"]], data["removed_count"]))
        elif event.type in ("turn/end", "assistant/chunk"):
            out.append((event.type, dict(data.get("reason") or {}), data.get("chunk")))
        elif event.type == "assistant/message":
            out.append((event.type, data["message"].text, data.get("interrupted")))
        else:
            out.append(event.type)
    return out


def run_with_cancel(kit: Any, where: str, when: str, count: int = 1) -> tuple[Agent, list[Any]]:
    """Run 'now' (with 'later' and a context queued) and cancel on the `count`-th `when` event.

    `where` is ``"observer"`` (a `Session.subscribe` callback, inside the append) or ``"after"``
    (an agent live-event subscriber, right after the append returned).
    """
    model = ScriptedModel(["one two three", "never"], delay=0.001)
    agent = Agent(model, session=Session())
    errors: list[Any] = []
    seen = [0]

    def cancel_at(kind: str) -> None:
        if kind == when:
            seen[0] += 1
            if seen[0] == count:
                agent.cancel("stop it")

    if where == "observer":
        agent.session.subscribe(lambda event: cancel_at(event.type), on_error=lambda error, event: errors.append(error))
    else:
        mapping = {"delta": "assistant/chunk", "turn_start": "turn/start", "step_start": "step/start"}
        agent.subscribe(lambda event: cancel_at(mapping.get(event.type, "")))

    async def main() -> None:
        agent.followup(kit.user("now"))
        agent.followup(kit.user("later"))
        await agent.when_idle()

    asyncio.run(main())
    return agent, errors


def test_cancel_from_an_observer_mid_stream_is_like_any_other_cancel(kit: Any) -> None:
    observed, errors = run_with_cancel(kit, "observer", "assistant/chunk", 2)
    assert errors == []
    assert len(observed.inbox) == 0  # the queued follow-up is discarded, durably
    discards = [e.data for e in kit.of_type(observed.session, "agent/inbox/spliced") if e.data["outcome"] == "discarded"]
    assert [(d["target"], d["cause"], d["removed_count"]) for d in discards] == [("next_turn", "stop it", 1)]
    assert kit.turn_ends(observed.session) == [{"kind": "aborted", "cause": "stop it"}]
    elsewhere, _ = run_with_cancel(kit, "after", "assistant/chunk", 2)
    assert shape(observed.session) == shape(elsewhere.session)


def test_cancel_from_an_observer_of_turn_start_claims_nothing(kit: Any) -> None:
    observed, errors = run_with_cancel(kit, "observer", "turn/start")
    assert errors == []
    assert len(observed.inbox) == 0
    assert kit.types(observed.session) == [
        "agent/inbox/spliced", "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end",
    ]
    (discard,) = [e.data for e in kit.of_type(observed.session, "agent/inbox/spliced") if e.data["outcome"] == "discarded"]
    assert (discard["removed_count"], discard["cause"]) == (2, "stop it")  # nothing was claimed
    elsewhere, _ = run_with_cancel(kit, "after", "turn/start")
    assert shape(observed.session) == shape(elsewhere.session)


def test_cancel_with_keep_inbox_from_an_observer_keeps_it(kit: Any) -> None:
    model = ScriptedModel(["one two three"], delay=0.001)
    agent = Agent(model)
    errors: list[Any] = []

    def observer(event: Any) -> None:
        if event.type == "assistant/chunk":
            agent.cancel(keep_inbox=True)

    agent.session.subscribe(observer, on_error=lambda error, event: errors.append(error))
    later = kit.user("later")

    async def main() -> None:
        agent.followup(kit.user("now"))
        agent.followup(later)
        await agent.when_idle()

    asyncio.run(main())
    assert errors == []
    assert agent.inbox.next_turn == (later,)


def test_cancel_from_an_observer_of_a_tool_call_answers_the_rest_and_clears(kit: Any) -> None:
    async def body(arguments: Any, ctx: Any) -> str:
        return "ran"

    model = ScriptedModel([kit.calls_response(("c1", "t", "{}"), ("c2", "t", "{}")), "never"])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body, parallel=False)])
    errors: list[Any] = []

    def observer(event: Any) -> None:
        if event.type == "tool/call":
            agent.cancel("enough")

    agent.session.subscribe(observer, on_error=lambda error, event: errors.append(error))

    async def main() -> None:
        agent.followup(kit.user("go"))
        agent.followup(kit.user("queued"))
        await agent.when_idle()

    asyncio.run(main())
    assert errors == []
    assert len(agent.inbox) == 0
    results = [e.data["message"] for e in kit.of_type(agent.session, "tool/result")]
    assert len(results) == 2  # no call is left unanswered
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "enough"}]


def test_cancel_from_an_observer_of_someone_elses_append_clears_right_after_it(kit: Any) -> None:
    holder: list[Agent] = []
    pending_after_note: list[int] = []

    async def note(arguments: Any, ctx: Any) -> str:
        ctx.session.append("app/note", {"ignorable": True, "text": "tool was here"})
        await asyncio.sleep(0)  # the loop runs the deferred clear before the tool goes on
        pending_after_note.append(len(holder[0].inbox))
        return "noted"

    model = ScriptedModel([kit.calls_response(("c1", "note", "{}")), "never"])
    agent = Agent(model, tools=[Tool("note", "n", {"type": "object"}, note)])
    holder.append(agent)
    errors: list[Any] = []

    def observer(event: Any) -> None:
        if event.type == "app/note":
            agent.cancel("from the note")

    agent.session.subscribe(observer, on_error=lambda error, event: errors.append(error))

    async def main() -> None:
        agent.followup(kit.user("go"))
        agent.followup(kit.user("queued"))
        await agent.when_idle()

    asyncio.run(main())
    assert errors == []
    assert pending_after_note == [0]
    types = kit.types(agent.session)
    assert types[types.index("app/note") + 1] == "agent/inbox/spliced"
    (discard,) = [e.data for e in kit.of_type(agent.session, "agent/inbox/spliced") if e.data["outcome"] == "discarded"]
    assert (discard["target"], discard["cause"]) == ("next_turn", "from the note")
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "from the note"}]


def test_input_sent_after_a_cancel_from_an_observer_survives_the_deferred_clear(kit: Any) -> None:
    holder: list[Agent] = []
    late_steer = kit.user("actually, do this instead")

    async def tool(arguments: Any, ctx: Any) -> str:
        ctx.session.append("app/note", {"ignorable": True})  # its observer cancels the turn
        holder[0].steer(late_steer)  # sent after the cancel: it belongs to the next turn
        return "finished anyway"

    model = ScriptedModel([kit.calls_response(("c1", "tool", "{}")), "doing it instead"])
    agent = Agent(model, tools=[Tool("tool", "t", {"type": "object"}, tool)])
    holder.append(agent)
    agent.session.subscribe(lambda event: agent.cancel() if event.type == "app/note" else None)

    async def main() -> None:
        agent.followup(kit.user("do that"))
        agent.followup(kit.user("queued before the cancel"))
        await agent.when_idle()

    asyncio.run(main())
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["aborted", "completed"]
    assert [m.text for m in model.requests[1].messages][-1] == "actually, do this instead"
    assert "queued before the cancel" not in [m.text for m in agent.session.messages()]
    splices = [e.data for e in kit.of_type(agent.session, "agent/inbox/spliced")]
    cleared = next(i for i, d in enumerate(splices) if d["outcome"] == "discarded")
    steered = splices[cleared + 1]  # the clear comes first, then the steer, into an empty list
    assert (steered["target"], steered["outcome"], steered["start"]) == ("next_turn", "inserted", 0)
