"""`Agent.run` over real HTTP (a loopback server): a 401 and a dropped stream raise the typed error
from `run`, never a silent return; tool-mode structured output over the three APIs sends the
schema as a tool and the retry carries the validation error."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from dshkit.agent import Agent, ModelCallFailed, ModelHTTPError, RunError
from dshkit.models import errors as model_errors
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.provider import Provider
from dshkit.models.responses.model import OpenAIResponsesModel


class City(BaseModel):
    name: str
    population: int


class ToolModeChat(OpenAICompatibleModel):
    """Chat Completions held to the tool mode of structured output (a final-answer tool), whatever
    the API's native support: the agent's side of the contract, tested over the wire."""

    native_output = False


def make(loopback: Any) -> OpenAICompatibleModel:
    return ToolModeChat(
        "deepseek-chat", Provider(loopback.base_url, api_key="sk-test", name="deepseek", timeout=5.0, retry_backoff=0.01, max_retries=0)
    )


def run(model: Any, prompt: str, **options: Any) -> Any:
    async def main() -> Any:
        async with model:
            return await Agent(model).run(prompt, **options)

    return asyncio.run(main())


def test_a_401_raises_model_http_error_from_run(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.error_reply(401, "Authentication Fails", kind="authentication_error"))
    with pytest.raises(ModelHTTPError, match=r"HTTP 401: Authentication Fails \(request id req-401\)") as caught:
        run(make(loopback), "hi")
    error = caught.value
    assert (error.status, error.code, error.request_id) == (401, "http_401", "req-401")
    assert isinstance(error, RunError) and isinstance(error, model_errors.ModelHTTPError)  # old handlers still catch it
    assert error.info["name"] == "AuthenticationError"
    assert error.result is not None and error.result.status == "error" and error.result.usage.requests == 0
    assert [m.text for m in error.result.messages] == ["hi"]


def test_a_dropped_stream_raises_from_run(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(role="assistant", content="Hal"), wire.Truncate()]))
    with pytest.raises(ModelCallFailed) as caught:
        run(make(loopback), "hi")
    assert caught.value.code == "incomplete_stream" and caught.value.result is not None
    assert caught.value.result.message is None  # the cut answer is discarded, never a result


def final_call(call_id: str, arguments: str) -> list[bytes]:
    return [
        wire_chunk(tool_calls=[{"index": 0, "id": call_id, "type": "function", "function": {"name": "final_result", "arguments": arguments}}]),
        wire_chunk(finish="tool_calls"),
        b"data: [DONE]\n\n",
    ]


def wire_chunk(**delta_and_finish: Any) -> bytes:
    finish = delta_and_finish.pop("finish", None)
    payload = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta_and_finish, "finish_reason": finish}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def test_tool_mode_over_http_sends_the_schema_and_the_retry_carries_the_error(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(final_call("a", '{"name": "Oslo"}')), wire.sse_reply(final_call("b", '{"name": "Oslo", "population": 7}')))
    result = run(make(loopback), "city?", output_type=City)
    assert result.output == City(name="Oslo", population=7)
    first, retry = (received.json for received in loopback.received)
    tools = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert tools["final_result"]["parameters"]["required"] == ["name", "population"]
    assert "response_format" not in first  # a model asked for a tool ignores output_schema
    error = [m for m in retry["messages"] if m["role"] == "tool"][-1]
    assert "/population: Field required" in json.dumps(error)


class ToolModeAnthropic(AnthropicModel):
    """The Messages API held to the tool mode of structured output (see `ToolModeChat`)."""

    native_output = False


def test_tool_mode_over_the_messages_api_retries_with_the_validation_error(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire

    def final(call_id: str, pieces: list[str]) -> Any:
        return a.sse_reply([a.message_start(), *a.tool_use(0, call_id, "final_result", pieces), a.message_delta("tool_use"), a.MESSAGE_STOP])

    loopback.reply(final("toolu_1", ['{"name": "Li', 'ma"}']), final("toolu_2", ['{"name": "Lima", ', '"population": 10}']))
    model = ToolModeAnthropic(
        "claude-test", Provider(loopback.base_url.removesuffix("/v1"), api_key="sk-ant-test", timeout=5.0, retry_backoff=0.01)
    )
    result = run(model, "city?", output_type=City)
    assert result.output == City(name="Lima", population=10) and result.usage.requests == 2
    first, retry = (received.json for received in loopback.received)
    assert [tool["name"] for tool in first["tools"]] == ["final_result"] and "tool_choice" not in first
    assert first["tools"][0]["input_schema"]["required"] == ["name", "population"]
    answer = retry["messages"][-1]["content"][0]
    assert answer["type"] == "tool_result" and answer["is_error"] is True and "/population: Field required" in json.dumps(answer)


class ToolModeResponses(OpenAIResponsesModel):
    """The Responses API held to the tool mode of structured output (see `ToolModeChat`)."""

    native_output = False


def test_tool_mode_over_the_responses_api_retries_with_the_validation_error(loopback: Any, responses_wire: Any) -> None:
    def final(call_id: str, arguments: str) -> Any:
        r = responses_wire(f"resp_{call_id}")
        return r.sse_reply([*r.created(), *r.function_call(0, f"fc_{call_id}", call_id, "final_result", [arguments]), r.completed()])

    loopback.reply(final("a", '{"population": 3}'), final("b", '{"name": "Quito", "population": 3}'))
    model = ToolModeResponses("gpt-test", Provider(loopback.base_url, api_key="sk-test", timeout=5.0, retry_backoff=0.01))
    result = run(model, "city?", output_type=City)
    assert result.output == City(name="Quito", population=3)
    first, retry = (received.json for received in loopback.received)
    assert [tool["name"] for tool in first["tools"]] == ["final_result"] and "text" not in first
    assert first["tools"][0]["parameters"]["required"] == ["name", "population"]
    outputs = [item for item in retry["input"] if item.get("type") == "function_call_output"]
    assert "/name: Field required" in outputs[-1]["output"]
