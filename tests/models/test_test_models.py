"""Test models anyone can write: plain `ScriptedModel` replies, `FunctionModel(fn)`, `TestModel`."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from dshkit.agent import Agent, ModelCallFailed, tool
from dshkit.models import FunctionModel, ScriptedModel, TestModel, call, output
from dshkit.models.test import example_of

SEEN: list[tuple[str, Any]] = []


@tool
def greet(name: Annotated[str, Field(min_length=4)], mood: Literal["calm", "glad"], times: Annotated[int, Field(ge=2)] = 2) -> str:
    """Greet someone."""
    SEEN.append(("greet", (name, mood, times)))
    return f"hello {name}"


@tool
def count(items: list[int]) -> int:
    """Count items."""
    SEEN.append(("count", items))
    return len(items)


class Report(BaseModel):
    title: str
    score: Annotated[float, Field(gt=0, le=1)]
    tags: list[Literal["a", "b"]]


def test_test_model_calls_each_tool_once_with_valid_arguments_then_answers_validly() -> None:
    SEEN.clear()
    model = TestModel()
    result = Agent(model, tools=[greet, count]).run_sync("go", output_type=Report)
    assert sorted(name for name, _ in SEEN) == ["count", "greet"]  # each body ran: the gate found the arguments valid
    assert isinstance(result.output, Report) and result.usage.tool_calls == 2 and result.usage.requests == 2


def test_test_model_answers_text_without_an_output_type() -> None:
    assert Agent(TestModel(text="ok")).run_sync("hi").output == "ok"


def test_example_of_follows_refs_bounds_and_unions() -> None:
    schema = {
        "$defs": {"Inner": {"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 5}}, "required": ["n"]}},
        "type": "object",
        "properties": {"inner": {"$ref": "#/$defs/Inner"}, "maybe": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 3}]}},
        "required": ["inner", "maybe"],
    }
    assert example_of(schema) == {"inner": {"n": 6}, "maybe": "aaa"}


def test_scripted_plain_replies() -> None:
    model = ScriptedModel([[call("count", items=[1, 2]), call("count", _id="mine", items=[])], "two"])
    agent = Agent(model, tools=[count])
    assert agent.run_sync("n").output == "two"
    calls = [e.data for e in agent.session.events if e.type == "tool/call"]
    assert [(c["call_id"], c["arguments"]) for c in calls] == [("call_0_0", '{"items": [1, 2]}'), ("mine", '{"items": []}')]


def test_a_scripted_exception_reply_fails_the_call() -> None:
    with pytest.raises(ModelCallFailed, match="script says no"):
        Agent(ScriptedModel([_model_error("script says no")])).run_sync("hi")


def _model_error(text: str) -> Exception:
    from dshkit.models import ModelError

    return ModelError(text, code="scripted_failure")


@pytest.mark.parametrize(
    ("responses", "error", "message"),
    [
        ([[call("a"), {"type": "finish", "reason": "stop"}]], TypeError, r"responses\[0\]\[0\]: a list mixes call\(...\) with chunks"),
        ([3.5], TypeError, r"responses\[0\]: expected a str or a list of chunks, got float \(a reply may also be call"),
    ],
)
def test_bad_scripted_replies_are_refused_with_their_place(responses: list[Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        ScriptedModel(responses)


def test_output_reply_without_an_output_type_is_a_clear_error() -> None:
    with pytest.raises(Exception, match=r"output\(...\) reply: the request asks for no structured output"):
        Agent(ScriptedModel([output(1)])).run_sync("hi")


def test_function_model_async_function_and_requests() -> None:
    async def echo(request: Any) -> str:
        await asyncio.sleep(0)
        return "echo: " + request.messages[-1].text

    model = FunctionModel(echo)
    assert Agent(model).run_sync("ping").output == "echo: ping"
    assert model.model == "echo" and len(model.requests) == 1


def test_function_model_refuses_a_non_callable() -> None:
    with pytest.raises(TypeError, match="FunctionModel fn: expected a callable taking the request, got str"):
        FunctionModel("no")  # type: ignore[arg-type]


def test_usage_cost_from_genai_prices_when_it_knows_the_model() -> None:
    answer = [{"type": "text_delta", "text": "hi"}, {"type": "usage", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}]
    known = Agent(ScriptedModel([answer], provider="openai", model="gpt-4.1-mini")).run_sync("hi")
    assert isinstance(known.usage.cost, Decimal) and known.usage.cost > 0
    unknown = Agent(ScriptedModel([answer])).run_sync("hi")
    assert unknown.usage.cost is None and unknown.usage.input_tokens == 1000
