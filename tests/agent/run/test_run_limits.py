"""`UsageLimits`: a limit of N allows exactly N and refuses the N+1th, ending the turn in error."""

from __future__ import annotations

from typing import Any

import pytest

from dshkit.agent import Agent, UsageLimitExceeded, UsageLimits, tool
from dshkit.models import ScriptedModel, call

RAN: list[int] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(a + b)
    return a + b


def answer_with_usage(text: str, prompt: int, completion: int) -> list[dict[str, Any]]:
    return [
        {"type": "text_delta", "text": text},
        {"type": "usage", "usage": {"prompt_tokens": prompt, "completion_tokens": completion}},
        {"type": "finish", "reason": "stop"},
    ]


def three_requests() -> ScriptedModel:
    return ScriptedModel([call("add", a=1, b=1), call("add", a=2, b=2), "done"])


def test_requests_at_exactly_the_limit_succeed() -> None:
    model = three_requests()
    result = Agent(model, tools=[add]).run_sync("go", limits=UsageLimits(requests=3))
    assert result.output == "done" and result.usage.requests == 3 and len(model.requests) == 3


def test_one_request_past_the_limit_is_never_sent() -> None:
    model = three_requests()
    agent = Agent(model, tools=[add])
    with pytest.raises(UsageLimitExceeded, match=r"usage limit requests=2 exceeded \(the run would use 3\)") as caught:
        agent.run_sync("go", limits=UsageLimits(requests=2))
    assert caught.value.limit == "requests" and caught.value.code == "usage_limit_exceeded"
    assert len(model.requests) == 2 and caught.value.result is not None and caught.value.result.usage.requests == 2
    reason = agent.session.events[-1].data["reason"]
    assert reason["kind"] == "error" and reason["error"]["code"] == "usage_limit_exceeded" and reason["error"]["limit"] == "requests"


def test_max_steps_at_and_past_the_limit() -> None:
    assert Agent(three_requests(), tools=[add]).run_sync("go", limits=UsageLimits(max_steps=3)).output == "done"
    model = three_requests()
    with pytest.raises(UsageLimitExceeded, match="max_steps=2"):
        Agent(model, tools=[add]).run_sync("go", limits=UsageLimits(max_steps=2))
    assert len(model.requests) == 2


def test_tool_calls_at_exactly_the_limit_run_and_one_more_runs_none_of_the_batch() -> None:
    RAN.clear()
    model = ScriptedModel([[call("add", a=1, b=1), call("add", a=2, b=2)], "done"])
    assert Agent(model, tools=[add]).run_sync("go", limits=UsageLimits(tool_calls=2)).usage.tool_calls == 2
    assert RAN == [2, 4]
    RAN.clear()
    model = ScriptedModel([[call("add", a=1, b=1), call("add", a=2, b=2)], "done"])
    agent = Agent(model, tools=[add])
    with pytest.raises(UsageLimitExceeded, match=r"tool_calls=1 exceeded \(the run would use 2\)"):
        agent.run_sync("go", limits=UsageLimits(tool_calls=1))
    assert RAN == [] and len(model.requests) == 1
    # Each refused call still has its result in the log (the next request stays valid).
    results = [e for e in agent.session.events if e.type == "tool/result"]
    assert len(results) == 2 and all("not run" in e.data["message"].content[0]["content"][0]["text"] for e in results)
    assert agent.session.pending_tool_calls() == ()


@pytest.mark.parametrize(
    ("limit", "at", "past"),
    [("input_tokens", 30, 29), ("output_tokens", 7, 6), ("total_tokens", 37, 36)],
)
def test_token_limits_at_and_past_the_limit(limit: str, at: int, past: int) -> None:
    def model() -> ScriptedModel:
        return ScriptedModel([
            [{"type": "tool_call_delta", "index": 0, "id": "c", "name": "add", "arguments": '{"a": 1, "b": 1}'},
             {"type": "usage", "usage": {"prompt_tokens": 10, "completion_tokens": 3}}, {"type": "finish", "reason": "tool_calls"}],
            answer_with_usage("done", 20, 4),
        ])

    result = Agent(model(), tools=[add]).run_sync("go", limits=UsageLimits(**{limit: at}))
    assert result.output == "done" and (result.usage.input_tokens, result.usage.output_tokens) == (30, 7)
    with pytest.raises(UsageLimitExceeded, match=rf"{limit}={past} exceeded") as caught:
        Agent(model(), tools=[add]).run_sync("go", limits=UsageLimits(**{limit: past}))
    assert caught.value.limit == limit


def test_limits_are_per_run() -> None:
    agent = Agent(ScriptedModel(["one", "two"]))
    limits = UsageLimits(requests=1)
    assert agent.run_sync("a", limits=limits).output == "one"
    assert agent.run_sync("b", limits=limits).output == "two"
