"""Turns and steps: pre-step, follow-ups, steering, continuation, no-step turns (notes 1-5, 17-19)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from dshkit.agent import Agent, Enter, Reject, Tool, ToolOutput
from dshkit.models import ScriptedModel


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def settle(agent: Agent) -> None:
    await agent.when_idle()


def noop_tool(name: str = "noop", result: Any = "ok", **kwargs: Any) -> Tool:
    async def body(arguments: Any, ctx: Any) -> Any:
        return result

    return Tool(name, f"{name} tool", {"type": "object"}, body, **kwargs)


def test_a_turn_logs_its_events_in_order_and_keeps_identity(kit: Any) -> None:
    model = ScriptedModel(["Hello!"])
    agent = Agent(model, system="be brief")
    prompt = kit.user("hi")

    async def main() -> None:
        agent.followup(prompt)
        assert agent.status == "running"
        await agent.when_idle()
        assert agent.status == "idle"

    run(main())
    assert kit.types(agent.session) == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "user/message",
        "request/header", "assistant/message", "step/end", "turn/end",
    ]
    user_event = kit.of_type(agent.session, "user/message")[0]
    assert user_event.data is prompt
    assert agent.session.messages()[0] is prompt
    assert model.requests[0].messages == (prompt,)
    assert model.requests[0].messages[0] is prompt
    assert model.requests[0].system == "be brief"
    answer = agent.session.messages()[1]
    assert answer.role == "assistant" and answer.text == "Hello!"
    assert dict(answer.source) == {"kind": "model", "provider": "scripted", "model": "scripted"}
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_turns_and_steps_are_numbered_from_one_and_continue_after_reopen(kit: Any) -> None:
    agent = Agent(ScriptedModel(["a", "b"]))

    async def main() -> None:
        agent.followup(kit.user("1"))
        agent.followup(kit.user("2"))
        await agent.when_idle()

    run(main())
    assert [e.data["turn"] for e in kit.of_type(agent.session, "turn/start")] == [1, 2]
    later = Agent(ScriptedModel(["c"]), session=agent.session)

    async def again() -> None:
        later.followup(kit.user("3"))
        await later.when_idle()

    run(again())
    assert [e.data["turn"] for e in kit.of_type(agent.session, "turn/start")] == [1, 2, 3]
    assert [dict(e.data) for e in kit.of_type(agent.session, "step/start")][-1] == {"turn": 3, "step": 1}


def test_two_followups_are_two_turns_never_merged(kit: Any) -> None:
    model = ScriptedModel(["one", "two"], delay=0.001)
    agent = Agent(model)
    first, second = kit.user("first"), kit.user("second")

    async def main() -> None:
        agent.followup(first)
        await asyncio.sleep(0)  # the first turn is running
        agent.followup(second)  # queued while busy
        assert agent.inbox.next_turn == (second,)
        await agent.when_idle()

    run(main())
    assert len(kit.of_type(agent.session, "turn/start")) == 2
    users_per_turn = [[m.id for m in request.messages if m.role == "user"] for request in model.requests]
    assert users_per_turn == [[first.id], [first.id, second.id]]


def test_pre_step_reject_ends_the_turn_blocked_without_a_step_and_drops_the_batch(kit: Any) -> None:
    model = ScriptedModel([])
    seen: list[Any] = []

    def pre_step(ctx: Any) -> Reject:
        seen.append(ctx.messages)
        return Reject("not allowed")

    agent = Agent(model, hooks={"pre_step": pre_step})
    prompt = kit.user("do something bad")

    kit.run_followup(agent, prompt)
    assert seen == [(prompt,)]
    assert kit.types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "blocked", "message": "not allowed"}]
    assert len(agent.inbox) == 0  # not requeued
    assert model.requests == ()


def test_pre_step_rewrites_keep_the_id_and_added_context_has_a_new_one(kit: Any) -> None:
    model = ScriptedModel(["ok"])
    prompt, dropped = kit.user("fix teh bug"), kit.context("stale notice")
    added = kit.context("repo: dshkit", plugin="workspace")

    async def pre_step(ctx: Any) -> Enter:
        assert [m.id for m in ctx.messages] == [dropped.id, prompt.id]
        assert (ctx.turn, ctx.step) == (1, 1) and not ctx.cancel.cancelled
        return Enter([added, ctx.messages[1].with_content("fix the bug")])

    agent = Agent(model, hooks={"pre_step": pre_step})

    async def main() -> None:
        agent.inject(dropped)
        agent.followup(prompt)
        await agent.when_idle()

    run(main())
    users = kit.of_type(agent.session, "user/message")
    assert [(e.data.id, e.data.text) for e in users] == [(added.id, "repo: dshkit"), (prompt.id, "fix the bug")]
    claim_seq = users[1].source_event_seqs
    assert agent.session.events[claim_seq[0]].data["outcome"] == "claimed"
    assert users[0].source_event_seqs == ()  # added context was never claimed
    assert [m.id for m in model.requests[0].messages] == [added.id, prompt.id]
    assert not agent.session.has_message(dropped.id)


@pytest.mark.parametrize(
    ("make_result", "match"),
    [
        (lambda ctx, kit: Enter([kit.user("other words")]), None),
        (lambda ctx, kit: "enter please", "expected Enter"),
        (lambda ctx, kit: Enter([ctx.messages[0], ctx.messages[0]]), "appears twice"),
    ],
    ids=["new-context-ok", "not-enter", "duplicate"],
)
def test_pre_step_results_are_checked(kit: Any, make_result: Any, match: str | None) -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, hooks={"pre_step": lambda ctx: make_result(ctx, kit)})

    kit.run_followup(agent, kit.user("x"))
    reason = kit.turn_ends(agent.session)[0]
    if match is None:
        assert reason == {"kind": "completed"}
    else:
        assert reason["kind"] == "error" and match in reason["error"]["message"]
        assert "step/start" not in kit.types(agent.session)
        assert "request/header" not in kit.types(agent.session)


def test_a_different_message_under_a_claimed_id_is_a_value_error(kit: Any) -> None:
    import dshkit

    prompt = kit.user("x")
    impostor = dshkit.freeze_message({"id": prompt.id, "role": "user", "content": "x", "source": {"kind": "plugin", "plugin": "p"}})
    agent = Agent(ScriptedModel([]), hooks={"pre_step": lambda ctx: Enter([impostor])})

    kit.run_followup(agent, prompt)
    reason = kit.turn_ends(agent.session)[0]
    assert reason["kind"] == "error" and reason["error"]["name"] == "ValueError"
    assert "different message under claimed id" in reason["error"]["message"]
    assert kit.types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]


def test_added_context_must_have_an_id_new_to_the_session(kit: Any) -> None:
    old = kit.user("old")

    def pre_step(ctx: Any) -> Enter:
        if ctx.turn == 1:
            return Enter(ctx.messages)
        return Enter([old.with_content("again"), *ctx.messages])

    agent = Agent(ScriptedModel(["a"]), hooks={"pre_step": pre_step})

    async def main() -> None:
        agent.followup(old)
        await agent.when_idle()
        agent.followup(kit.user("new"))
        await agent.when_idle()

    run(main())
    reason = kit.turn_ends(agent.session)[1]
    assert reason["kind"] == "error" and "needs an id new to the session" in reason["error"]["message"]


def test_an_empty_admitted_batch_is_a_turn_without_a_step(kit: Any) -> None:
    agent = Agent(ScriptedModel([]), hooks={"pre_step": lambda ctx: Enter([])})

    kit.run_followup(agent, kit.user("ignored"))
    assert kit.types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_a_failing_pre_step_gives_a_turn_without_step_or_header(kit: Any) -> None:
    def pre_step(ctx: Any) -> Any:
        raise LookupError("no such policy")

    agent = Agent(ScriptedModel([]), hooks={"pre_step": pre_step})

    kit.run_followup(agent, kit.user("x"))
    assert kit.types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]
    assert kit.turn_ends(agent.session) == [
        {"kind": "error", "error": {"code": "exception", "name": "LookupError", "message": "no such policy"}}
    ]


@pytest.mark.parametrize("outcome", ["blocked", "stepless", "failed"])
def test_after_a_blocked_failed_or_stepless_turn_pending_work_stays_parked(kit: Any, outcome: str) -> None:
    model = ScriptedModel(["for b"])
    first, parked = kit.user("a"), kit.user("b")

    def pre_step(ctx: Any) -> Any:
        if ctx.messages[-1].id != first.id:
            return Enter(ctx.messages)
        if outcome == "blocked":
            return Reject()
        if outcome == "stepless":
            return Enter([])
        raise RuntimeError("hook broke")

    async def main() -> None:
        agent.followup(first)
        agent.followup(parked)
        await agent.when_idle()
        assert agent.inbox.next_turn == (parked,)
        assert model.requests == ()
        agent.followup(kit.user("c"))  # the next wake runs the parked follow-up first
        await agent.when_idle()

    model = ScriptedModel(["for b", "for c"])
    agent = Agent(model, hooks={"pre_step": pre_step})
    run(main())
    assert [[m.text for m in r.messages if m.role == "user"][-1] for r in model.requests] == ["b", "c"]


def test_after_a_normal_turn_the_next_pending_followup_runs(kit: Any) -> None:
    model = ScriptedModel(["1", "2", "3"])
    agent = Agent(model)

    async def main() -> None:
        for text in "abc":
            agent.followup(kit.user(text))
        await agent.when_idle()

    run(main())
    assert len(model.requests) == 3
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["completed"] * 3


def test_max_tokens_ends_the_turn_and_the_next_pending_turn_still_runs(kit: Any) -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": "trunc"}, {"type": "finish", "reason": "max_tokens"}], "2"])
    agent = Agent(model)

    async def main() -> None:
        agent.followup(kit.user("a"))
        agent.followup(kit.user("b"))
        await agent.when_idle()

    run(main())
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["max_tokens", "completed"]


def test_steering_enters_at_the_next_step_after_every_result_and_never_cancels_a_tool(kit: Any) -> None:
    steer = kit.user("also check the tests")
    finished: list[str] = []
    agent_box: list[Agent] = []

    async def slow(arguments: Any, ctx: Any) -> str:
        if ctx.call_id == "c1":
            agent_box[0].steer(steer)
        await asyncio.sleep(0.001)
        assert not ctx.cancel.cancelled
        finished.append(ctx.call_id)
        return f"slow done {ctx.call_id}"

    model = ScriptedModel([kit.calls_response(("c1", "slow", "{}"), ("c2", "slow", "{}")), "ok, both done"])
    agent = Agent(model, tools=[Tool("slow", "takes a while", {"type": "object"}, slow)])
    agent_box.append(agent)

    kit.run_followup(agent, kit.user("go"))
    assert sorted(finished) == ["c1", "c2"]
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "user", "user", "user"]
    assert [m.source["kind"] for m in second[2:]] == ["tool", "tool", "user"]
    assert second[-1] is steer
    assert len(kit.of_type(agent.session, "turn/start")) == 1  # a steer continues the turn
    types = kit.types(agent.session)
    assert types.index("user/message", types.index("step/start", 4)) > max(
        i for i, t in enumerate(types) if t == "tool/result"
    )


def test_input_injected_after_the_claim_joins_the_next_step_and_continues_the_turn(kit: Any) -> None:
    late = kit.context("a file changed meanwhile")
    model = ScriptedModel(["answer one", "answer two"])
    agent = Agent(model)
    injected: list[bool] = []

    def on_event(event: Any) -> None:
        if event.type == "delta" and not injected:
            injected.append(True)
            agent.inject(late)

    agent.subscribe(on_event)

    kit.run_followup(agent, kit.user("go"))
    first, second = model.requests
    assert late not in first.messages
    assert second.messages[-1] is late
    assert [dict(e.data) for e in kit.of_type(agent.session, "step/start")] == [{"turn": 1, "step": 1}, {"turn": 1, "step": 2}]


def test_turn_stopping_may_steer_to_continue(kit: Any) -> None:
    model = ScriptedModel(["draft", "final"])
    calls: list[tuple[int, int]] = []

    async def turn_stopping(ctx: Any) -> None:
        calls.append((ctx.turn, ctx.step))
        if ctx.step == 1:
            ctx.steer(kit.context("check your answer", plugin="reviewer"))

    agent = Agent(model, hooks={"turn_stopping": turn_stopping})

    kit.run_followup(agent, kit.user("go"))
    assert calls == [(1, 1), (1, 2)]
    assert model.requests[1].messages[-1].text == "check your answer"
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_a_tool_that_concludes_the_turn_stops_it_without_another_model_call(kit: Any) -> None:
    async def finish(arguments: Any, ctx: Any) -> ToolOutput:
        return ToolOutput("handed over", end_turn=True)

    model = ScriptedModel([kit.calls_response(("c1", "finish", "{}"))])
    agent = Agent(model, tools=[Tool("finish", "end the turn", {"type": "object"}, finish)])

    kit.run_followup(agent, kit.user("go"))
    assert len(model.requests) == 1
    assert kit.types(agent.session)[-3:] == ["tool/result", "step/end", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_a_concluding_tool_still_continues_when_next_step_input_is_pending(kit: Any) -> None:
    note = kit.context("one more thing")

    async def finish(arguments: Any, ctx: Any) -> ToolOutput:
        return ToolOutput("done", end_turn=True, context=[note])

    model = ScriptedModel([kit.calls_response(("c1", "finish", "{}")), "noted"])
    agent = Agent(model, tools=[Tool("finish", "end the turn", {"type": "object"}, finish)])

    kit.run_followup(agent, kit.user("go"))
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1] is note


def test_observer_failures_never_change_outcomes(kit: Any, caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([kit.calls_response(("c1", "noop", "{}")), "fine"])
    agent = Agent(model, tools=[noop_tool()])

    def broken(event: Any) -> None:
        raise RuntimeError("observer bug")

    agent.subscribe(broken)
    agent.session.subscribe(broken)

    async def main() -> None:
        agent.followup(kit.user("go"))
        await agent.when_idle()

    with caplog.at_level(logging.ERROR):
        run(main())
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]
    assert agent.session.messages()[-1].text == "fine"
    assert any("observer bug" in record.getMessage() or record.exc_info for record in caplog.records)


def test_step_end_is_written_before_turn_end_when_the_model_fails(kit: Any) -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": "partial"}, ConnectionResetError("reset by peer")]])
    agent = Agent(model)

    kit.run_followup(agent, kit.user("go"))
    types = kit.types(agent.session)
    assert types[-2:] == ["step/end", "turn/end"]
    assert "assistant/message" not in types  # a model error discards its partial output
    reason = kit.turn_ends(agent.session)[0]
    assert reason == {"kind": "error", "error": {"code": "exception", "name": "ConnectionResetError", "message": "reset by peer"}}
    assert len(kit.of_type(agent.session, "assistant/chunk")) == 1  # the chunks stay in the log


def test_a_finish_with_an_error_ends_the_turn_with_that_error(kit: Any) -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": "x"}, {"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "try later"}}]])
    agent = Agent(model)

    kit.run_followup(agent, kit.user("go"))
    assert kit.turn_ends(agent.session) == [{"kind": "error", "error": {"code": "overloaded", "message": "try later"}}]
    assert "assistant/message" not in kit.types(agent.session)


def test_a_provider_stream_finishing_aborted_is_an_error_not_a_cancellation(kit: Any) -> None:
    model = ScriptedModel([[{"type": "text_delta", "text": "x"}, {"type": "finish", "reason": "aborted"}]])
    agent = Agent(model)

    kit.run_followup(agent, kit.user("go"))
    reason = kit.turn_ends(agent.session)[0]
    assert reason["kind"] == "error" and reason["error"]["code"] == "ABORTED"


def test_max_tokens_drops_every_tool_call_and_logs_the_message_even_when_empty(kit: Any) -> None:
    ran: list[str] = []

    async def body(arguments: Any, ctx: Any) -> str:
        ran.append(ctx.call_id)
        return "ran"

    truncated = [kit.tool_call(0, "c1", "t", "{}"), kit.tool_call(1, "c2", "t", '{"a'), {"type": "finish", "reason": "max_tokens"}]
    empty = [{"type": "usage", "usage": {"completion_tokens": 4096}}, {"type": "finish", "reason": "max_tokens"}]
    model = ScriptedModel([truncated, empty])
    agent = Agent(model, tools=[Tool("t", "t", {"type": "object"}, body)])

    async def main() -> None:
        agent.followup(kit.user("a"))
        agent.followup(kit.user("b"))
        await agent.when_idle()

    run(main())
    assert ran == []
    assert "tool/call" not in kit.types(agent.session)
    answers = kit.of_type(agent.session, "assistant/message")
    assert [e.data["message"].content for e in answers] == [(), ()]
    assert answers[1].data["usage"] == {"completion_tokens": 4096}
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["max_tokens", "max_tokens"]
    # an empty assistant message is a usage anchor, not model-visible
    assert [m.role for m in agent.session.messages()] == ["user", "user"]


def test_a_response_with_only_a_finish_still_logs_an_empty_assistant_message(kit: Any) -> None:
    agent = Agent(ScriptedModel([[{"type": "finish", "reason": "stop"}]]))

    kit.run_followup(agent, kit.user("a"))
    (answer,) = kit.of_type(agent.session, "assistant/message")
    assert answer.data["message"].content == ()
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_a_stream_without_finish_is_a_normal_stop(kit: Any) -> None:
    agent = Agent(ScriptedModel([[{"type": "text_delta", "text": "no finish"}]]))

    kit.run_followup(agent, kit.user("a"))
    assert agent.session.messages()[-1].text == "no finish"
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_replay_state_and_usage_are_kept(kit: Any) -> None:
    response = [
        {"type": "reasoning_delta", "text": "think"},
        {"type": "text_delta", "text": "answer"},
        {"type": "usage", "usage": {"prompt_tokens": 5, "prompt_cache_hit_tokens": 2}},
        {"type": "finish", "reason": "stop", "replay_state": {"signature": "abc"}},
    ]
    agent = Agent(ScriptedModel([response], provider="deepseek", model="deepseek-reasoner"))

    kit.run_followup(agent, kit.user("a"))
    (event,) = kit.of_type(agent.session, "assistant/message")
    message = event.data["message"]
    assert dict(message.source) == {"kind": "model", "provider": "deepseek", "model": "deepseek-reasoner", "replay_state": {"signature": "abc"}}
    assert [block["type"] for block in message.content] == ["reasoning", "text"]
    assert event.data["usage"] == {"prompt_tokens": 5, "prompt_cache_hit_tokens": 2}
    assert event.data["finish_reason"] == "stop"
    chunk_seqs = [e.seq for e in kit.of_type(agent.session, "assistant/chunk")]
    assert event.source_event_seqs == tuple(chunk_seqs)


def test_agent_arguments_are_checked() -> None:
    model = ScriptedModel([])
    with pytest.raises(TypeError, match="Agent model"):
        Agent(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model name 'gpt': expected 'provider:model'"):
        Agent("gpt")  # a str is a model's name (dshkit.models.infer_model)
    with pytest.raises(TypeError, match="Agent system"):
        Agent(model, system=["x"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown hook 'pre-step'"):
        Agent(model, hooks={"pre-step": lambda ctx: None})
    with pytest.raises(TypeError, match=r"hooks\['pre_step'\]: expected a callable"):
        Agent(model, hooks={"pre_step": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"Agent tools\[0\]: expected a Tool"):
        Agent(model, tools=[{"name": "x"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="duplicate tool name 'noop'"):
        Agent(model, tools=[noop_tool(), noop_tool()])
    with pytest.raises(TypeError, match="Agent session"):
        Agent(model, session="log.jsonl")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Agent config"):
        Agent(model, config=[("temperature", 0)])  # type: ignore[arg-type]


def test_a_dropped_agent_is_freed_at_once_not_left_in_a_reference_cycle(kit: Any) -> None:
    import gc
    import weakref

    async def noop(arguments: Any, ctx: Any) -> str:
        return "ok"

    model = ScriptedModel([kit.calls_response(("c1", "noop", "{}")), "done"])
    hooks = {"pre_step": lambda ctx: Enter(ctx.messages), "turn_stopping": lambda ctx: None}
    agent = Agent(model, tools=[Tool("noop", "", {}, noop)], hooks=hooks)
    kit.run_followup(agent, kit.user("go"))
    assert [e.data["reason"]["kind"] for e in kit.of_type(agent.session, "turn/end")] == ["completed"]
    dropped = weakref.ref(agent)
    gc.disable()  # freed by reference counting alone, not by a later cycle collection
    try:
        del agent
        assert dropped() is None
    finally:
        gc.enable()
