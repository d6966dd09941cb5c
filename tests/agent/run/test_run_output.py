"""Structured output: the schema in the request header, tool and native modes, validation errors
carried back to the model naming each failing path, retries, and `OutputValidationError`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Union

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from dshkit.agent import Agent, OutputValidationError, RunResult, tool
from dshkit.models import FunctionModel, ScriptedModel, call, output
from dshkit.session import Session


class City(BaseModel):
    """A city and how many live there."""

    name: str
    population: int = Field(ge=1)


@dataclass
class Point:
    x: int
    y: int


class Pair(TypedDict):
    left: str
    right: str


def final(arguments: str, call_id: str = "f") -> list[dict[str, Any]]:
    return [
        {"type": "tool_call_delta", "index": 0, "id": call_id, "name": "final_result", "arguments": arguments},
        {"type": "finish", "reason": "tool_calls"},
    ]


def tool_result_texts(session: Session) -> list[str]:
    return [e.data["message"].content[0]["content"][0]["text"] for e in session.events if e.type == "tool/result"]


def test_the_header_carries_the_output_schema_and_tool_mode_adds_the_final_tool() -> None:
    model = ScriptedModel([output(City(name="Paris", population=2_100_000))])
    result = Agent(model).run_sync("Which city?", output_type=City)
    assert result.output == City(name="Paris", population=2_100_000)
    request = model.requests[0]
    entry = request.config["output_schema"]
    assert (entry["name"], entry["strict"], entry["description"]) == ("final_result", False, "A city and how many live there.")
    assert entry["schema"]["required"] == ("name", "population")
    assert [spec["name"] for spec in request.tools] == ["final_result"]
    assert request.tools[0]["parameters"] == entry["schema"]
    assert tool_result_texts(result.session) == ["Final result accepted."]


def test_a_run_without_output_type_has_no_output_schema() -> None:
    model = ScriptedModel(["plain"])
    agent = Agent(model, config={"temperature": 0})
    assert agent.run_sync("hi").output == "plain"
    assert "output_schema" not in model.requests[0].config and model.requests[0].tools == ()


def test_tool_mode_retry_carries_the_validation_error_naming_each_path() -> None:
    model = ScriptedModel([final('{"name": 7, "population": 0}'), final('{"name": "Oslo", "population": 700000}', "g")])
    result = Agent(model).run_sync("city", output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    error = tool_result_texts(result.session)[0]
    assert "/name: Input should be a valid string (got 7)" in error
    assert "/population: Input should be greater than or equal to 1 (got 0)" in error
    # The retry request holds the failed call and its error result: the model sees why.
    retry = model.requests[1]
    assert retry.messages[-1].content[0]["is_error"] is True and "/population" in retry.messages[-1].content[0]["content"][0]["text"]


def test_spent_output_retries_raise_output_validation_error_naming_each_path() -> None:
    bad = final('{"name": "X"}')
    agent = Agent(ScriptedModel([bad, bad, bad]))
    with pytest.raises(OutputValidationError, match=r"failed validation 3 times \(output_retries=2\).*/population: Field required") as caught:
        agent.run_sync("city", output_type=City, output_retries=2)
    assert caught.value.problems == ('/population: Field required (got {"name":"X"})',)
    assert caught.value.result is not None and caught.value.result.status == "error"
    assert len(caught.value.result.messages) == 7  # prompt + 3 x (answer, error result): nothing hidden


def test_a_text_answer_in_tool_mode_is_sent_back_as_a_retry() -> None:
    model = ScriptedModel(["It is Paris.", output({"name": "Paris", "population": 3})])
    result = Agent(model).run_sync("city", output_type=City)
    assert result.output.name == "Paris"
    assert "the final result must be given by calling final_result" in model.requests[1].messages[-1].text


def test_native_mode_sends_no_tool_and_retries_with_a_user_message() -> None:
    model = ScriptedModel(['{"name": "Rome"}', output(City(name="Rome", population=4))], native_output=True)
    result = Agent(model).run_sync("city", output_type=City)
    assert result.output == City(name="Rome", population=4)
    assert model.requests[0].tools == () and model.requests[0].config["output_schema"]["name"] == "final_result"
    retry = model.requests[1].messages[-1]
    assert retry.role == "user" and "/population: Field required" in retry.text and retry.source["kind"] == "plugin"


@pytest.mark.parametrize(
    ("output_type", "value", "wire"),
    [
        (Point, Point(1, 2), {"x": 1, "y": 2}),
        (Pair, {"left": "a", "right": "b"}, {"left": "a", "right": "b"}),
        (int, 42, {"response": 42}),
        (list[City], [City(name="A", population=1)], {"response": [{"name": "A", "population": 1}]}),
        (Union[City, int], 5, {"response": 5}),
    ],
)
def test_output_types(output_type: Any, value: Any, wire: Any) -> None:
    model = ScriptedModel([output(value)])
    result = Agent(model).run_sync("go", output_type=output_type)
    assert result.output == value
    calls = [e for e in result.session.events if e.type == "tool/call"]
    assert json.loads(calls[0].data["arguments"]) == wire


def test_a_non_object_type_is_wrapped_in_the_schema() -> None:
    model = ScriptedModel([output(3)])
    Agent(model).run_sync("n", output_type=int)
    schema = model.requests[0].config["output_schema"]["schema"]
    assert schema["properties"]["response"] == {"type": "integer"} and schema["required"] == ("response",)


def test_reopening_the_log_gives_the_same_typed_output(tmp_path: Any) -> None:
    path = tmp_path / "run.jsonl"
    session = Session.create(path)
    model = ScriptedModel([final('{"name": "Lima"}'), output(City(name="Lima", population=10))])
    result = Agent(model, session=session).run_sync("city", output_type=City)
    session.close()
    reopened = RunResult.from_log(Session.open(path), output_type=City)
    assert reopened.output == result.output == City(name="Lima", population=10)
    assert reopened.usage == result.usage and reopened.message_ids == result.message_ids


def test_reopening_a_native_mode_log_gives_the_same_output(tmp_path: Any) -> None:
    path = tmp_path / "run.jsonl"
    session = Session.create(path)
    result = Agent(ScriptedModel(['{"name": "Kyiv", "population": 3}'], native_output=True), session=session).run_sync("c", output_type=City)
    session.close()
    assert RunResult.from_log(Session.open(path), output_type=City).output == result.output


def test_other_tools_in_the_final_answer_step_run_and_do_not_count_the_final_tool() -> None:
    @tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    model = ScriptedModel([[call("note", text="x"), call("final_result", name="Bern", population=1)]])
    result = Agent(model, tools=[note]).run_sync("c", output_type=City)
    assert result.output.name == "Bern" and result.usage.tool_calls == 1


def test_an_agent_tool_named_like_the_output_tool_is_an_error() -> None:
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(Exception, match="output tool name 'final_result' is also the name of one of the agent's tools"):
        Agent(ScriptedModel(["x"]), tools=[final_result]).run_sync("c", output_type=City)


def test_function_model_sees_the_schema_and_answers_by_it() -> None:
    def answer(request: Any) -> Any:
        schema = request.config["output_schema"]["schema"]
        return call("final_result", **{name: (1 if spec.get("type") == "integer" else "z") for name, spec in schema["properties"].items()})

    assert Agent(FunctionModel(answer)).run_sync("c", output_type=City).output == City(name="z", population=1)


def test_a_request_rebuilt_from_the_log_carries_the_output_schema_and_a_later_plain_run_drops_it() -> None:
    from dshkit.session import project_request

    model = ScriptedModel([output(City(name="Bonn", population=3)), "plain"], native_output=True)
    agent = Agent(model)
    agent.run_sync("city", output_type=City)
    first_chunk = next(e.seq for e in agent.session.events if e.type == "assistant/chunk")
    assert project_request(agent.session, at_seq=first_chunk - 1) == model.requests[0]
    assert agent.run_sync("and now?").output == "plain"
    assert "output_schema" not in model.requests[1].config
    headers = [e.data["reason"] for e in agent.session.events if e.type == "request/header"]
    assert headers == ["initial", "change"]
