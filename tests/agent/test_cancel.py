"""Cancellation: interrupted prefix, tools, causes, latching (notes 2, 4, 6, 7, 18, 19)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit.agent import Agent, Enter, Tool, ToolOutput
from dshkit.models import ScriptedModel


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def cancel_on_delta(agent: Agent, count: int = 1, **kwargs: Any) -> None:
    """Cancel the agent as the `count`-th stream delta arrives (deterministic, no timing)."""
    seen = [0]

    def on_event(event: Any) -> None:
        if event.type == "delta":
            seen[0] += 1
            if seen[0] == count:
                agent.cancel(**kwargs)

    agent.subscribe(on_event)


def test_cancel_mid_stream_keeps_the_prefix_as_an_interrupted_message(kit: Any) -> None:
    response = [
        {"type": "reasoning_delta", "text": "Let me think. "},
        {"type": "usage", "usage": {"prompt_tokens": 12}},
        {"type": "text_delta", "text": "The answer"},
        kit.tool_call(0, "c1", "read", '{"path": "a'),
        {"type": "text_delta", "text": " is 42"},
        {"type": "finish", "reason": "stop"},
    ]
    model = ScriptedModel([response], delay=0.001)
    agent = Agent(model)
    cancel_on_delta(agent, 4, cause="user pressed stop")

    kit.run_followup(agent, kit.user("question"))
    types = kit.types(agent.session)
    assert types[-3:] == ["assistant/message", "step/end", "turn/end"]
    (event,) = kit.of_type(agent.session, "assistant/message")
    message = event.data["message"]
    assert event.data["interrupted"] is True
    assert event.data["usage"] == {"prompt_tokens": 12}  # usage already received is kept
    assert [dict(block) for block in message.content] == [
        {"type": "reasoning", "text": "Let me think. "},
        {"type": "text", "text": "The answer"},
    ]  # never a tool call, even a half-streamed one
    assert message.tool_calls == ()
    assert event.source_event_seqs == tuple(e.seq for e in kit.of_type(agent.session, "assistant/chunk"))
    assert len(event.source_event_seqs) == 4
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "user pressed stop"}]
    assert agent.session.messages()[-1] is message  # the prefix stays model-visible


@pytest.mark.parametrize("prefix", [[], [{"type": "text_delta", "text": "  \n"}], [{"type": "usage", "usage": {"x": 1}}]])
def test_an_empty_or_blank_prefix_appends_nothing(kit: Any, prefix: list[Any]) -> None:
    model = ScriptedModel([[*prefix, {"type": "text_delta", "text": "late"}]], delay=0.001)
    agent = Agent(model)
    if prefix:
        cancel_on_delta(agent, 1)
    else:
        agent.subscribe(lambda event: agent.cancel() if event.type == "request" else None)

    kit.run_followup(agent, kit.user("q"))
    assert "assistant/message" not in kit.types(agent.session)
    assert kit.types(agent.session)[-2:] == ["step/end", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "user"}]


def test_a_model_that_ignores_the_cancel_signal_is_still_cut_at_once(kit: Any) -> None:
    closed: list[bool] = []

    class Stubborn:
        provider, model = "stubborn", "v1"

        async def stream(self, request: Any, cancel: Any) -> Any:
            try:
                yield {"type": "text_delta", "text": "I will not stop"}
                await asyncio.Event().wait()  # never ends on its own
            finally:
                closed.append(True)

    agent = Agent(Stubborn())  # type: ignore[arg-type]
    cancel_on_delta(agent, 1)

    kit.run_followup(agent, kit.user("q"))
    assert closed == [True]
    assert agent.session.messages()[-1].text == "I will not stop"


def test_the_first_cause_wins(kit: Any) -> None:
    model = ScriptedModel(["one two three"], delay=0.001)
    agent = Agent(model)

    def on_event(event: Any) -> None:
        if event.type == "delta":
            agent.cancel("first")
            agent.cancel("second")

    agent.subscribe(on_event)

    kit.run_followup(agent, kit.user("q"))
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "first"}]


def test_a_cancelled_turn_ends_aborted_even_if_a_hook_also_threw(kit: Any) -> None:
    holder: list[Agent] = []

    def pre_step(ctx: Any) -> Any:
        holder[0].cancel("stop now")
        raise RuntimeError("hook failed after the cancel")

    agent = Agent(ScriptedModel([]), hooks={"pre_step": pre_step})
    holder.append(agent)

    kit.run_followup(agent, kit.user("q"))
    assert kit.types(agent.session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "stop now"}]


def test_cancel_in_pre_step_gives_no_step_and_no_header(kit: Any) -> None:
    holder: list[Agent] = []

    async def pre_step(ctx: Any) -> Enter:
        holder[0].cancel()
        assert ctx.cancel.cancelled and ctx.cancel.cause == "user"
        return Enter(ctx.messages)

    agent = Agent(ScriptedModel([]), hooks={"pre_step": pre_step})
    holder.append(agent)

    kit.run_followup(agent, kit.user("q"))
    assert "step/start" not in kit.types(agent.session)
    assert "request/header" not in kit.types(agent.session)
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "user"}]


def test_cancel_during_tools_lets_started_calls_finish_and_answers_the_rest(kit: Any) -> None:
    holder: list[Agent] = []
    started: list[str] = []

    async def slow(arguments: Any, ctx: Any) -> str:
        started.append(ctx.call_id)
        if ctx.call_id == "c2":
            holder[0].cancel("user")
        await asyncio.sleep(0.001)
        return f"real result of {ctx.call_id} (cancelled={ctx.cancel.cancelled})"

    async def write(arguments: Any, ctx: Any) -> str:
        started.append(ctx.call_id)
        return "written"

    model = ScriptedModel(
        [kit.calls_response(("c1", "slow", "{}"), ("c2", "slow", "{}"), ("c3", "write", "{}"), ("c4", "slow", "{}"))]
    )
    tools = [Tool("slow", "slow", {"type": "object"}, slow), Tool("write", "exclusive", {"type": "object"}, write, parallel=False)]
    agent = Agent(model, tools=tools)
    holder.append(agent)

    kit.run_followup(agent, kit.user("q"))
    assert started == ["c1", "c2"]
    assert [e.data["call_id"] for e in kit.of_type(agent.session, "tool/call")] == ["c1", "c2"]
    results = kit.of_type(agent.session, "tool/result")
    assert [e.data["message"].source["call_id"] for e in results] == ["c1", "c2", "c3", "c4"]
    texts = [e.data["message"].content[0]["content"][0]["text"] for e in results]
    assert texts[:2] == ["real result of c1 (cancelled=True)", "real result of c2 (cancelled=True)"]
    for event in results[2:]:
        assert event.data["error"] == {"name": "Aborted", "code": "aborted_before_dispatch"}
        assert event.data["message"].content[0]["is_error"] is True
    assert kit.types(agent.session)[-2:] == ["step/end", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "user"}]
    assert agent.session.pending_tool_calls() == ()


def test_cancel_clears_pending_input_durably_unless_asked_to_keep_it(kit: Any) -> None:
    for keep in (False, True):
        model = ScriptedModel(["one two three"], delay=0.001)
        agent = Agent(model)
        cancel_on_delta(agent, 1, keep_inbox=keep)
        current, queued, context = kit.user("now"), kit.user("later"), kit.context("ctx")

        async def main() -> None:
            agent.followup(current)
            agent.followup(queued)
            agent.inject(context)
            await agent.when_idle()

        run(main())
        # the claimed message is never requeued either way
        assert current.id not in agent.inbox
        if keep:
            assert agent.inbox.next_turn == (queued,)
            assert agent.inbox.next_step == ()  # the inject was claimed with the first step
        else:
            assert len(agent.inbox) == 0
            discards = [e.data for e in kit.of_type(agent.session, "agent/inbox/spliced") if e.data["outcome"] == "discarded"]
            assert [(d["target"], d["cause"]) for d in discards] == [("next_turn", "user")]
        assert len(kit.of_type(agent.session, "turn/start")) == 1  # parked after an abort


def test_cancelling_an_idle_agent_does_nothing(kit: Any) -> None:
    agent = Agent(ScriptedModel([]))
    agent.inject(kit.user("pending"))
    before = len(agent.session.events)
    agent.cancel()
    assert len(agent.session.events) == before
    assert len(agent.inbox) == 1
    with pytest.raises(TypeError, match="cancel cause"):
        agent.cancel(3)  # type: ignore[arg-type]


def test_a_waking_send_during_an_abort_goes_to_the_next_turn_and_runs_when_it_settles(kit: Any) -> None:
    holder: list[Agent] = []
    late_steer = kit.user("actually, do this instead")

    async def tool(arguments: Any, ctx: Any) -> str:
        holder[0].cancel("user")
        holder[0].steer(late_steer)  # while the turn is being aborted: next turn, latched
        assert holder[0].inbox.next_turn == (late_steer,)
        assert holder[0].inbox.next_step == ()
        return "finished anyway"

    model = ScriptedModel([kit.calls_response(("c1", "tool", "{}")), "doing it instead"])
    agent = Agent(model, tools=[Tool("tool", "t", {"type": "object"}, tool)])
    holder.append(agent)

    kit.run_followup(agent, kit.user("do that"))
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["aborted", "completed"]
    assert model.requests[1].messages[-1] is late_steer


def test_a_plain_cancel_clears_the_latch(kit: Any) -> None:
    holder: list[Agent] = []

    async def tool(arguments: Any, ctx: Any) -> str:
        holder[0].cancel("user")
        holder[0].followup(kit.user("latched"))
        holder[0].cancel("user again")  # clears queue and latch
        return "done"

    model = ScriptedModel([kit.calls_response(("c1", "tool", "{}"))])
    agent = Agent(model, tools=[Tool("tool", "t", {"type": "object"}, tool)])
    holder.append(agent)

    kit.run_followup(agent, kit.user("go"))
    assert [r["kind"] for r in kit.turn_ends(agent.session)] == ["aborted"]
    assert len(agent.inbox) == 0


def test_cancel_with_keep_inbox_keeps_a_latched_send_but_nothing_claimed(kit: Any) -> None:
    holder: list[Agent] = []
    latched = kit.user("latched")

    async def tool(arguments: Any, ctx: Any) -> str:
        holder[0].cancel("user")
        holder[0].followup(latched)
        holder[0].cancel("again", keep_inbox=True)
        return "done"

    model = ScriptedModel([kit.calls_response(("c1", "tool", "{}")), "ran the latched one"])
    agent = Agent(model, tools=[Tool("tool", "t", {"type": "object"}, tool)])
    holder.append(agent)

    kit.run_followup(agent, kit.user("go"))
    assert [r for r in kit.turn_ends(agent.session)] == [{"kind": "aborted", "cause": "user"}, {"kind": "completed"}]
    assert model.requests[1].messages[-1] is latched


def test_closing_the_agent_aborts_never_latches_and_refuses_input(kit: Any) -> None:
    model = ScriptedModel(["one two three four"], delay=0.001)
    agent = Agent(model)

    async def main() -> None:
        streaming = asyncio.Event()
        agent.subscribe(lambda event: streaming.set() if event.type == "delta" else None)
        agent.followup(kit.user("q"))
        agent.followup(kit.user("queued"))
        await streaming.wait()
        await agent.close()
        assert agent.status == "idle"
        with pytest.raises(RuntimeError, match="closed"):
            agent.followup(kit.user("too late"))

    run(main())
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "disposed"}]
    assert len(agent.inbox) == 0


def test_an_aborted_or_failed_turn_never_requeues_its_claim(kit: Any) -> None:
    model = ScriptedModel([[{"type": "finish", "reason": "error", "error": {"code": "x", "message": "y"}}]])
    agent = Agent(model)
    prompt = kit.user("q")

    kit.run_followup(agent, prompt)
    assert len(agent.inbox) == 0
    assert agent.session.has_message(prompt.id)


def test_tool_context_produced_after_a_cancel_is_dropped(kit: Any) -> None:
    holder: list[Agent] = []

    async def tool(arguments: Any, ctx: Any) -> ToolOutput:
        holder[0].cancel()
        return ToolOutput("ok", context=[kit.context("for a next step that never comes")])

    agent = Agent(ScriptedModel([kit.calls_response(("c1", "tool", "{}"))]), tools=[Tool("tool", "t", {"type": "object"}, tool)])
    holder.append(agent)

    kit.run_followup(agent, kit.user("go"))
    assert len(agent.inbox) == 0
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "user"}]


def test_a_driver_cancelled_by_loop_shutdown_still_closes_the_turn(kit: Any) -> None:
    model = ScriptedModel(["slow words here"], delay=0.01)
    agent = Agent(model)

    async def main() -> None:
        streaming = asyncio.Event()
        agent.subscribe(lambda event: streaming.set() if event.type == "delta" else None)
        agent.followup(kit.user("q"))
        await streaming.wait()
        # returning now makes asyncio.run cancel the still-running driver task

    run(main())
    assert kit.types(agent.session)[-2:] == ["step/end", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "task_cancelled"}]
    assert agent.status == "idle"


def test_a_driver_cancelled_during_tools_still_answers_every_call(kit: Any) -> None:
    from dshkit.session._verify import check_events

    running: list[str] = []

    async def slow(arguments: Any, ctx: Any) -> str:
        running.append(ctx.call_id)
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel(
        [kit.calls_response(("c1", "slow", "{}"), ("c2", "slow", "{}"), ("c3", "write", "{}"), ("c4", "slow", "{}"))]
    )
    tools = [Tool("slow", "s", {"type": "object"}, slow), Tool("write", "w", {"type": "object"}, slow, parallel=False)]
    agent = Agent(model, tools=tools)

    async def main() -> None:
        started = asyncio.Event()
        agent.subscribe(lambda event: started.set() if event.type == "tool_call" and event.data["call_id"] == "c2" else None)
        agent.followup(kit.user("q"))
        await started.wait()
        await asyncio.sleep(0)  # both bodies are running
        # returning now makes asyncio.run cancel the driver task in the middle of the tools

    run(main())
    assert running == ["c1", "c2"]
    results = kit.of_type(agent.session, "tool/result")
    assert [e.data["message"].source["call_id"] for e in results] == ["c1", "c2", "c3", "c4"]
    assert [e.data["error"]["code"] for e in results] == [
        "aborted_while_running", "aborted_while_running", "aborted_before_dispatch", "aborted_before_dispatch",
    ]
    assert agent.session.pending_tool_calls() == ()
    assert kit.types(agent.session)[-2:] == ["step/end", "turn/end"]
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "task_cancelled"}]
    assert check_events(agent.session.events) == []


@pytest.mark.parametrize("tool_kind", ["async", "sync"])
def test_a_cancel_from_another_task_lands_within_a_step_when_nothing_ever_waits(kit: Any, tool_kind: str) -> None:
    # An offline model and tools that answer at once: the loop still runs other tasks once a
    # step, so a cancel from one of them is not held back until the turn ends.
    async def answer_async(arguments: Any, ctx: Any) -> str:
        return "ok"

    def answer_sync(arguments: Any, ctx: Any) -> str:
        return "ok"

    body = answer_async if tool_kind == "async" else answer_sync
    steps = 20
    model = ScriptedModel([kit.calls_response((f"c{step}", "answer", "{}")) for step in range(steps)] + ["done"])
    agent = Agent(model, tools=[Tool("answer", "a", {"type": "object"}, body)])

    async def cancel_after_two_results() -> None:
        while len(kit.of_type(agent.session, "tool/result")) < 2:
            await asyncio.sleep(0)
        agent.cancel(cause="watcher")

    async def main() -> None:
        watcher = asyncio.create_task(cancel_after_two_results())
        agent.followup(kit.user("q"))
        await agent.when_idle()
        await watcher

    run(main())
    assert kit.turn_ends(agent.session) == [{"kind": "aborted", "cause": "watcher"}]
    assert 2 <= len(kit.of_type(agent.session, "tool/result")) <= 3


@pytest.mark.parametrize("shape", ["tool steps", "text turns"])
def test_the_loop_runs_other_tasks_once_a_model_call_when_nothing_ever_waits(kit: Any, shape: str) -> None:
    async def answer(arguments: Any, ctx: Any) -> str:
        return "ok"

    calls = 20
    if shape == "tool steps":
        script: list[Any] = [kit.calls_response((f"c{n}", "answer", "{}")) for n in range(calls - 1)] + ["done"]
        prompts = [kit.user("q")]
    else:
        script = [f"answer {n}" for n in range(calls)]
        prompts = [kit.user(f"q{n}") for n in range(calls)]
    agent = Agent(ScriptedModel(script), tools=[Tool("answer", "a", {"type": "object"}, answer)])
    ticks = 0

    async def main() -> None:
        nonlocal ticks
        for prompt in prompts:
            agent.followup(prompt)
        idle = asyncio.ensure_future(agent.when_idle())
        while not idle.done():
            ticks += 1
            await asyncio.sleep(0)

    run(main())
    assert len(agent.model.requests) == calls
    assert ticks >= calls  # at least one loop iteration per model call
