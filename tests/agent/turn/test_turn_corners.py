"""Turn corner cases: a later batch emptied by `pre_step`, continuing after `max_tokens`, the
request hook's cancel token (issue 9, items 11 and 12)."""

from __future__ import annotations

from typing import Any

from dshkit.agent import Agent, CancelToken, Enter, Tool, ToolOutput
from dshkit.models import ScriptedModel

TRUNCATED = [{"type": "text_delta", "text": "The first half"}, {"type": "finish", "reason": "max_tokens"}]


def test_a_later_batch_emptied_by_pre_step_calls_no_model(kit: Any) -> None:
    model = ScriptedModel(["the answer", "a reply to its own reply", "again", "and again"])
    stopping: list[int] = []

    def pre_step(ctx: Any) -> Enter:
        return Enter(ctx.messages if ctx.step == 1 else ())

    def turn_stopping(ctx: Any) -> None:
        stopping.append(ctx.step)
        ctx.steer(kit.context(f"nudge {len(stopping)}"))  # keeps queuing input

    agent = Agent(model, hooks={"pre_step": pre_step, "turn_stopping": turn_stopping})

    kit.run_followup(agent, kit.user("question"))
    assert len(model.requests) == 1
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]
    assert len(kit.of_type(agent.session, "step/start")) == 1
    assert stopping == [1]
    assert len(agent.inbox) == 0  # the nudge was claimed (and left out by pre_step), not requeued


def test_a_later_batch_emptied_by_pre_step_still_answers_tool_results(kit: Any) -> None:
    async def body(arguments: Any, ctx: Any) -> str:
        return "ok"

    model = ScriptedModel([kit.calls_response(("c1", "t", "{}")), "done"])
    agent = Agent(
        model,
        tools=[Tool("t", "t", {"type": "object"}, body)],
        hooks={"pre_step": lambda ctx: Enter(ctx.messages if ctx.step == 1 else ())},
    )

    kit.run_followup(agent, kit.user("use the tool"))
    assert len(model.requests) == 2  # the model must answer its tool results
    assert model.requests[1].messages[-1].source["kind"] == "tool"
    assert kit.turn_ends(agent.session) == [{"kind": "completed"}]


def test_turn_stopping_is_called_after_max_tokens_and_may_continue_the_turn(kit: Any) -> None:
    model = ScriptedModel([TRUNCATED, " and the second half."])
    seen: list[tuple[int, str]] = []

    def turn_stopping(ctx: Any) -> None:
        seen.append((ctx.step, ctx.reason))
        if ctx.reason == "max_tokens":  # the last step was cut: ask for the rest
            ctx.steer(kit.context("continue where you stopped"))

    agent = Agent(model, hooks={"turn_stopping": turn_stopping})

    kit.run_followup(agent, kit.user("write it all"))
    assert seen == [(1, "max_tokens"), (2, "completed")]
    assert len(model.requests) == 2
    assert [m.text for m in model.requests[1].messages] == ["write it all", "The first half", "continue where you stopped"]
    assert len(kit.of_type(agent.session, "turn/start")) == 1
    assert kit.turn_ends(agent.session) == [{"kind": "max_tokens"}]  # sticky: the turn was cut once


def test_without_a_continuation_max_tokens_still_ends_the_turn(kit: Any) -> None:
    calls: list[str] = []
    model = ScriptedModel([TRUNCATED])
    agent = Agent(model, hooks={"turn_stopping": lambda ctx: calls.append(ctx.reason)})

    kit.run_followup(agent, kit.user("write it all"))
    assert calls == ["max_tokens"]
    assert len(model.requests) == 1
    assert kit.turn_ends(agent.session) == [{"kind": "max_tokens"}]


def test_turn_stopping_is_told_how_the_last_step_stopped(kit: Any) -> None:
    async def finish(arguments: Any, ctx: Any) -> Any:
        return ToolOutput("done", end_turn=True)

    for response, reason in (("fine", "completed"), (kit.calls_response(("c1", "finish", "{}")), "concluded")):
        reasons: list[str] = []
        agent = Agent(
            ScriptedModel([response]),
            tools=[Tool("finish", "end the turn", {"type": "object"}, finish)],
            hooks={"turn_stopping": lambda ctx: reasons.append(ctx.reason)},
        )
        kit.run_followup(agent, kit.user("hi"))
        assert reasons == [reason]


def test_the_request_hook_gets_the_turns_cancel_token(kit: Any) -> None:
    tokens: list[Any] = []

    def pre_step(ctx: Any) -> Enter:
        tokens.append(ctx.cancel)
        return Enter(ctx.messages)

    def request(ctx: Any) -> None:
        tokens.append(ctx.cancel)
        ctx.cancel.cancel("request hook gave up")  # a hook may stop the turn through it

    model = ScriptedModel(["never streamed"])
    agent = Agent(model, hooks={"pre_step": pre_step, "request": request})

    kit.run_followup(agent, kit.user("hi"))
    assert len(tokens) == 2 and isinstance(tokens[1], CancelToken)
    assert tokens[1] is tokens[0]
    assert model.requests == ()
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "request hook gave up"}]
