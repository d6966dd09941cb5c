"""`Agent.run` / `run_sync`: the result read from the log, typed errors that are raised, never
returned silently, `last_turn` for `when_idle` users, and input arriving during a run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import dshkit
from dshkit.agent import (
    Agent,
    ModelCallFailed,
    RunCancelled,
    RunError,
    RunResult,
    Tool,
    ToolRetriesExhausted,
    UsageLimits,
    tool,
)
from dshkit.models import ScriptedModel, call
from dshkit.models.errors import IncompleteStreamError
from dshkit.session import Session


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"type": "usage", "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def test_run_sync_returns_the_answer_and_what_the_log_holds() -> None:
    asks = {"type": "tool_call_delta", "index": 0, "id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'}
    model = ScriptedModel([[asks, usage(10, 4), {"type": "finish", "reason": "tool_calls"}], "It is 5."])
    agent = Agent(model, tools=[add])
    result = agent.run_sync("What is 2 + 3?")
    assert result.status == "completed" and result.error is None
    assert result.output == "It is 5." and result.message is not None and result.message.text == "It is 5."
    events = agent.session.events
    assert events[result.seqs[0]].type == "turn/start" and events[result.seqs[-1]].type == "turn/end"
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert result.messages[0].text == "What is 2 + 3?" and result.message_ids == tuple(m.id for m in result.messages)
    assert (result.usage.requests, result.usage.tool_calls) == (2, 1)
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.total_tokens) == (10, 4, 14)


def test_run_takes_a_message_and_keeps_its_id() -> None:
    prompt = dshkit.create_user_message("hello", source={"kind": "user"})
    agent = Agent(ScriptedModel(["hi"]))
    result = asyncio.run(agent.run(prompt))
    assert result.messages[0].id == prompt.id and result.output == "hi"


def test_a_failed_stream_raises_from_run_with_the_partial_result() -> None:
    dropped = IncompleteStreamError("the stream ended before the response finished")
    agent = Agent(ScriptedModel([[{"type": "text_delta", "text": "Hal"}, dropped]]))
    with pytest.raises(ModelCallFailed, match="the stream ended before the response finished") as caught:
        agent.run_sync("hi")
    assert isinstance(caught.value, dshkit.models.ModelError)  # a model error to old code too
    assert caught.value.code == "incomplete_stream" and caught.value.retryable
    assert caught.value.result is not None and caught.value.result.status == "error"
    assert caught.value.result.messages[0].text == "hi" and caught.value.result.message is None


def test_a_spent_tool_retry_budget_raises_tool_retries_exhausted_naming_the_tool() -> None:
    bad = '{"a": "two", "b": 3}'
    chunks = [{"type": "tool_call_delta", "index": 0, "id": "c", "name": "add", "arguments": bad}, {"type": "finish", "reason": "tool_calls"}]
    agent = Agent(ScriptedModel([chunks, chunks]), tools=[Tool.from_function(_add_fn(), retries=1)])
    with pytest.raises(ToolRetriesExhausted, match="'add' was called with invalid arguments 2 times") as caught:
        agent.run_sync("add")
    assert caught.value.tool == "add" and caught.value.code == "tool_retries_exhausted"
    assert caught.value.result is not None and caught.value.result.usage.tool_calls == 2


def _add_fn() -> Any:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return add


def test_run_sync_inside_a_running_loop_is_a_clear_error() -> None:
    agent = Agent(ScriptedModel(["never"]))

    async def main() -> None:
        with pytest.raises(RuntimeError, match=r"run_sync: called inside a running asyncio event loop.*await agent.run"):
            agent.run_sync("hi")

    asyncio.run(main())
    assert agent.model.remaining == 1 and len(agent.session.events) == 0  # nothing queued, nothing run


@pytest.mark.parametrize(
    ("call_kwargs", "error", "message"),
    [
        ({"prompt": 42}, TypeError, "Agent.run prompt: expected a str or a user Message, got int"),
        ({"prompt": "x", "limits": {"requests": 1}}, TypeError, "Agent.run limits: expected a dshkit.agent.UsageLimits, got dict"),
        ({"prompt": "x", "output_retries": -1}, ValueError, "Agent.run output_retries: expected an int >= 0, got -1"),
        ({"prompt": "x", "output_type": object()}, TypeError, "output_type <object object at"),
    ],
)
def test_bad_run_arguments_are_refused_before_anything_is_queued(call_kwargs: dict[str, Any], error: type, message: str) -> None:
    agent = Agent(ScriptedModel(["never"]))
    prompt = call_kwargs.pop("prompt")
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        agent.run_sync(prompt, **call_kwargs)
    assert len(agent.session.events) == 0 and len(agent.inbox) == 0


def test_a_cancelled_run_raises_run_cancelled() -> None:
    agent = Agent(ScriptedModel(["one two three four five six"], delay=0.05))

    async def main() -> None:
        task = asyncio.ensure_future(agent.run("talk"))
        while agent.session.events.__len__() == 0 or not any(e.type == "assistant/chunk" for e in agent.session.events):
            await asyncio.sleep(0.01)
        agent.cancel("user")
        with pytest.raises(RunCancelled, match=r"cancelled \(user\)") as caught:
            await task
        assert caught.value.cause == "user" and caught.value.result is not None
        assert caught.value.result.status == "aborted"

    asyncio.run(main())


def test_last_turn_gives_when_idle_users_the_outcome() -> None:
    agent = Agent(ScriptedModel([[{"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "busy"}}], "fine"]))
    assert agent.last_turn is None

    async def main() -> None:
        agent.followup(dshkit.create_user_message("one", source={"kind": "user"}))
        await agent.when_idle()
        failed = agent.last_turn
        assert failed is not None and failed.status == "error"
        assert isinstance(failed.error, ModelCallFailed) and failed.error.code == "overloaded"
        agent.followup(dshkit.create_user_message("two", source={"kind": "user"}))
        await agent.when_idle()
        assert agent.last_turn is not None and agent.last_turn.status == "completed" and agent.last_turn.error is None

    asyncio.run(main())


def test_a_followup_during_a_run_gets_its_own_turn_and_the_run_returns_its_own() -> None:
    agent = Agent(ScriptedModel(["first answer", "second answer"], delay=0.01))

    async def main() -> None:
        task = asyncio.ensure_future(agent.run("first"))
        await asyncio.sleep(0)
        agent.followup(dshkit.create_user_message("second", source={"kind": "user"}))
        result = await task
        assert result.output == "first answer" and result.messages[0].text == "first"
        await agent.when_idle()
        assert agent.last_turn is not None and agent.last_turn.output == "second answer"

    asyncio.run(main())


def test_a_steer_during_a_run_joins_its_turn() -> None:
    model = ScriptedModel([call("add", a=1, b=1), "done"])
    agent = Agent(model, tools=[add])

    async def main() -> RunResult:
        task = asyncio.ensure_future(agent.run("go"))
        await asyncio.sleep(0)
        agent.steer(dshkit.create_user_message("and be brief", source={"kind": "user"}))
        return await task

    result = asyncio.run(main())
    assert "and be brief" in [m.text for m in result.messages]
    assert result.output == "done"


def test_a_run_queued_behind_a_failed_turn_still_runs() -> None:
    agent = Agent(ScriptedModel([RuntimeError("boom"), "second"]))

    async def main() -> None:
        agent.followup(dshkit.create_user_message("first", source={"kind": "user"}))
        result = await agent.run("second")  # queued while the first turn runs; that turn fails
        assert result.output == "second"

    asyncio.run(main())


def test_reopening_the_log_gives_the_same_result(tmp_path: Any) -> None:
    path = tmp_path / "log.jsonl"
    session = Session.create(path)
    agent = Agent(ScriptedModel([call("add", a=2, b=3), "5"]), session=session, tools=[add])
    result = agent.run_sync("2+3?")
    session.close()
    reopened = RunResult.from_log(Session.open(path))
    assert (reopened.output, reopened.message_ids, reopened.seqs, reopened.usage) == (
        result.output, result.message_ids, result.seqs, result.usage,
    )


def test_run_error_is_the_one_base_class() -> None:
    from dshkit.agent import errors

    for name in errors.__all__:
        value = getattr(errors, name)
        if isinstance(value, type):
            assert issubclass(value, RunError), name


def test_usage_limits_refuses_negative_bounds() -> None:
    with pytest.raises(ValueError, match="UsageLimits requests: expected an int >= 0 or None, got -1"):
        UsageLimits(requests=-1)


@pytest.mark.parametrize(
    ("response", "error_class", "code"),
    [
        ([{"type": "finish", "reason": "error", "error": {"code": "context_window_exceeded", "message": "too long"}}], "ContextWindowExceeded", "context_window_exceeded"),
        ([{"type": "finish", "reason": "error", "error": {"code": "http_429", "status": 429, "message": "slow down"}}], "ModelHTTPError", "http_429"),
        ([{"type": "finish", "reason": "error", "error": {"code": "content_filter", "message": "filtered"}}], "ModelCallFailed", "content_filter"),
    ],
)
def test_each_logged_failure_raises_its_typed_error(response: list[Any], error_class: str, code: str) -> None:
    from dshkit.agent import errors

    with pytest.raises(getattr(errors, error_class)) as caught:
        Agent(ScriptedModel([response])).run_sync("hi")
    assert type(caught.value).__name__ == error_class and caught.value.code == code
    assert RunResult.from_log(caught.value.result.session).error.__class__ is type(caught.value)  # the log says the same


def test_a_rejected_prompt_raises_run_blocked() -> None:
    from dshkit.agent import Reject, RunBlocked

    agent = Agent(ScriptedModel(["never"]), hooks={"pre_step": lambda ctx: Reject("not today")})
    with pytest.raises(RunBlocked, match="rejected the run's input: not today"):
        agent.run_sync("hi")
    assert agent.model.remaining == 1


def test_a_hook_that_raises_is_run_failed() -> None:
    from dshkit.agent import RunFailed

    def broken(ctx: Any) -> None:
        raise KeyError("missing")

    with pytest.raises(RunFailed, match="KeyError: 'missing'"):
        Agent(ScriptedModel(["never"]), hooks={"request": broken}).run_sync("hi")


def test_a_run_on_a_closed_agent_is_refused_and_leaves_nothing_behind() -> None:
    agent = Agent(ScriptedModel(["never"]))

    async def main() -> None:
        await agent.close()
        with pytest.raises(RuntimeError, match="followup: the agent is closed"):
            await agent.run("hi")
        assert agent._turns.runs == {} and len(agent.session.events) == 0

    asyncio.run(main())


def test_a_run_cancelled_while_its_prompt_waits_takes_the_prompt_back_and_leaves_the_running_turn() -> None:
    agent = Agent(ScriptedModel(["first answer", "never"], delay=0.01))

    async def main() -> None:
        agent.followup(dshkit.create_user_message("first", source={"kind": "user"}))
        waiting = asyncio.ensure_future(agent.run("second"))
        await asyncio.sleep(0)  # its prompt is queued behind the running turn
        assert len(agent.inbox) == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await agent.when_idle()

    asyncio.run(main())
    assert len(agent.inbox) == 0 and agent.model.remaining == 1  # the second prompt never ran
    discards = [event.data for event in agent.session.events if event.type == "agent/inbox/spliced" and event.data["outcome"] == "discarded"]
    assert [data.get("cause") for data in discards] == ["run_cancelled"]
    assert agent.last_turn is not None and agent.last_turn.status == "completed" and agent.last_turn.output == "first answer"
    assert agent.runs == {}


def test_a_run_whose_waiting_prompt_a_cancel_discards_raises_run_cancelled() -> None:
    agent = Agent(ScriptedModel(["one two three four five six"], delay=0.05))

    async def main() -> None:
        agent.followup(dshkit.create_user_message("first", source={"kind": "user"}))
        waiting = asyncio.ensure_future(agent.run("second"))
        while not any(event.type == "assistant/chunk" for event in agent.session.events):
            await asyncio.sleep(0.01)
        agent.cancel("user")  # aborts the first turn and discards what is pending: the run's prompt
        with pytest.raises(RunCancelled, match="discarded before its turn started"):
            await waiting

    asyncio.run(main())
    assert agent.runs == {} and len(agent.inbox) == 0


def test_two_runs_at_once_each_get_their_own_turns_result() -> None:
    agent = Agent(ScriptedModel(["to the first", "to the second"], delay=0.01))

    async def main() -> tuple[RunResult, RunResult]:
        return await asyncio.gather(agent.run("first"), agent.run("second"))  # type: ignore[return-value]

    first, second = asyncio.run(main())
    assert (first.turn, first.output, first.messages[0].text) == (1, "to the first", "first")
    assert (second.turn, second.output, second.messages[0].text) == (2, "to the second", "second")
