"""Native structured output over each HTTP API, against loopback servers: the call setting
``output_schema`` goes out in the API's own form (Chat ``response_format``, Responses
``text.format``, Anthropic a forced tool) and never as itself; the answer streams back as text."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent
from dshkit.models import AnthropicModel, OpenAICompatibleModel, OpenAIResponsesModel, Provider, ScriptedModel, supports_native_output
from dshkit.session import ModelRequest

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}}, "required": ["city", "population"], "additionalProperties": False}
OUTPUT = {"name": "final_result", "schema": SCHEMA, "description": "The biggest city.", "strict": True}
ANSWER = '{"city": "Lisbon", "population": 545000}'
PIECES = ['{"city": "Lis', 'bon", "population": 545', "000}"]
TOOL = {"name": "lookup", "description": "Look up a fact.", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}


def request(config: dict[str, Any] | None = None, tools: tuple[Any, ...] = ()) -> ModelRequest:
    return ModelRequest((create_user_message("Biggest city of Portugal?", source={"kind": "user"}),), tools=tools, config=config or {"output_schema": OUTPUT})


def collect(model: Any, req: ModelRequest) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        async with model:
            return [dict(chunk) async for chunk in model.stream(req)]

    return asyncio.run(main())


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(chunk["text"] for chunk in chunks if chunk["type"] == "text_delta")


def test_the_http_models_are_native_and_the_scripted_one_is_not() -> None:
    assert supports_native_output(OpenAICompatibleModel("m", Provider("http://127.0.0.1:9/v1"))) is True
    assert supports_native_output(AnthropicModel("m")) is supports_native_output(OpenAIResponsesModel("m")) is True
    assert supports_native_output(ScriptedModel([])) is False
    assert supports_native_output(type("Truthy", (), {"native_output": 1})()) is False  # only True itself


def test_chat_completions_sends_response_format_and_streams_the_json_back(loopback: Any, wire: Any) -> None:
    pieces = [wire.chunk(role="assistant", content="")] + [wire.chunk(content=piece) for piece in PIECES]
    loopback.reply(wire.sse_reply([*pieces, wire.chunk(finish="stop"), wire.DONE]))
    model = OpenAICompatibleModel("gpt-test", Provider(loopback.base_url, api_key="sk", name="openai", timeout=5.0))
    chunks = collect(model, request({"temperature": 0, "output_schema": OUTPUT}))
    assert loopback.received[0].json == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "Biggest city of Portugal?"}],
        "temperature": 0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "final_result", "schema": SCHEMA, "strict": True, "description": "The biggest city."},
        },
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert text_of(chunks) == ANSWER and chunks[-1]["reason"] == "stop"


def test_responses_sends_text_format_beside_other_text_settings(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire("resp_o")
    loopback.reply(r.sse_reply([*r.created(), *r.message(0, "msg_o", PIECES), r.completed()]))
    model = OpenAIResponsesModel("gpt-test", Provider(loopback.base_url, api_key="sk", timeout=5.0))
    chunks = collect(model, request({"text": {"verbosity": "low"}, "output_schema": {**OUTPUT, "description": ""}}))
    sent = loopback.received[0].json
    assert sent["text"] == {"verbosity": "low", "format": {"type": "json_schema", "name": "final_result", "schema": SCHEMA, "strict": True}}
    assert "output_schema" not in sent and list(sent)[-1] == "stream"
    assert text_of(chunks) == ANSWER and chunks[-1]["reason"] == "stop"


def anthropic_output_reply(anthropic_wire: Any, name: str = "final_result") -> Any:
    a = anthropic_wire
    return a.sse_reply([a.message_start("msg_o"), *a.tool_use(0, "toolu_o", name, PIECES), a.message_delta("tool_use"), a.MESSAGE_STOP])


def test_anthropic_forces_the_output_tool_and_streams_its_input_as_text(loopback: Any, anthropic_wire: Any) -> None:
    loopback.reply(anthropic_output_reply(anthropic_wire))
    model = AnthropicModel("claude-test", Provider(loopback.base_url.removesuffix("/v1"), api_key="sk-ant", timeout=5.0))
    chunks = collect(model, request())
    assert loopback.received[0].json == {
        "model": "claude-test",
        "max_tokens": 8192,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Biggest city of Portugal?"}]}],
        "tools": [{"name": "final_result", "description": "The biggest city.", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "final_result"},
        "stream": True,
    }
    assert [chunk["type"] for chunk in chunks] == ["text_delta"] * 3 + ["usage", "finish"]
    assert text_of(chunks) == ANSWER
    finish = chunks[-1]
    assert finish["reason"] == "stop"
    assert finish["replay_state"]["blocks"] == [{"type": "text", "length": len(ANSWER)}]


def test_anthropic_with_tools_lets_the_model_call_them_or_answer(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(a.sse_reply([a.message_start(), *a.tool_use(0, "toolu_1", "lookup", ['{"q": "Portugal"}']), a.message_delta("tool_use"), a.MESSAGE_STOP]))
    model = AnthropicModel("claude-test", Provider(loopback.base_url.removesuffix("/v1"), api_key="sk-ant", timeout=5.0))
    chunks = collect(model, request(tools=(TOOL,)))
    sent = loopback.received[0].json
    assert [tool["name"] for tool in sent["tools"]] == ["lookup", "final_result"]
    assert sent["tool_choice"] == {"type": "any"}  # forcing the output tool would forbid every other tool
    assert chunks[0]["type"] == "tool_call_delta" and chunks[0]["name"] == "lookup" and chunks[-1]["reason"] == "tool_calls"


def test_an_agent_logs_the_output_as_text_and_sends_it_back_as_text(loopback: Any, anthropic_wire: Any) -> None:
    loopback.reply(anthropic_output_reply(anthropic_wire), anthropic_wire.sse_reply(anthropic_wire.answer("Noted.")))
    model = AnthropicModel("claude-test", Provider(loopback.base_url.removesuffix("/v1"), api_key="sk-ant", timeout=5.0))

    async def main() -> Agent:
        async with model:
            agent = Agent(model, config={"output_schema": OUTPUT})
            for text in ("Biggest city of Portugal?", "Thanks."):
                agent.followup(create_user_message(text, source={"kind": "user"}))
                await agent.when_idle()
            return agent

    agent = asyncio.run(main())
    answer = agent.session.messages()[1]
    assert answer.to_dict()["content"] == [{"type": "text", "text": ANSWER}] and answer.tool_calls == ()
    resent = loopback.received[1].json["messages"][1]
    assert resent == {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}
    assert json.loads(resent["content"][0]["text"]) == {"city": "Lisbon", "population": 545000}


@pytest.mark.parametrize(
    ("make", "config", "message"),
    [
        (lambda: OpenAICompatibleModel("m", Provider("http://127.0.0.1:9/v1")), {"response_format": {"type": "json_object"}}, r"config\['response_format'\]"),
        (lambda: OpenAIResponsesModel("m"), {"text": {"format": {"type": "text"}}}, r"config\['text'\]: cannot set 'format'"),
        (lambda: AnthropicModel("m"), {"tool_choice": {"type": "auto"}}, r"config\['tool_choice'\]"),
        (lambda: OpenAIResponsesModel("m"), {}, None),
    ],
)
def test_a_setting_that_would_contradict_the_output_is_refused(make: Any, config: dict[str, Any], message: str | None) -> None:
    req = request({**config, "output_schema": OUTPUT})
    if message is None:
        assert "text" in json.loads(make().request_body(req))
        return
    with pytest.raises(ValueError, match=message):
        make().request_body(req)


@pytest.mark.parametrize("bad", [{"name": "x"}, {"schema": SCHEMA, "name": ""}, "a schema"])
def test_a_malformed_output_schema_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"config\['output_schema'\]"):
        OpenAIResponsesModel("m").request_body(request({"output_schema": bad}))


def test_the_output_tool_may_not_shadow_a_tool() -> None:
    with pytest.raises(ValueError, match="its name 'lookup' is also the name of a tool"):
        AnthropicModel("m").request_body(request({"output_schema": {**OUTPUT, "name": "lookup"}}, tools=(TOOL,)))


def test_a_run_in_native_mode_retries_with_the_validation_error_and_re_opens_to_the_same_output(
    loopback: Any, wire: Any, tmp_path: Any
) -> None:
    # The whole path over the wire: Agent.run asks for a typed output, the Chat model sends it as
    # response_format, an invalid answer goes back as a user message naming the failing path, the
    # retry's valid answer is the output, and the re-opened log gives the same output.
    from dataclasses import dataclass

    from dshkit.agent.result import RunResult
    from dshkit.session import Session

    @dataclass
    class City:
        city: str
        population: int

    def text_reply(text: str) -> Any:
        return wire.sse_reply([wire.chunk(role="assistant", content=""), wire.chunk(content=text), wire.chunk(finish="stop"), wire.DONE])

    loopback.reply(text_reply('{"city": "Lisbon"}'), text_reply(ANSWER))
    path = tmp_path / "log.jsonl"

    async def main() -> Any:
        model = OpenAICompatibleModel("gpt-test", Provider(loopback.base_url, api_key="sk", timeout=5.0, max_retries=0))
        async with model:
            with Session.create(path) as session:
                return await Agent(model, session=session).run("Biggest city of Portugal?", output_type=City)

    result = asyncio.run(main())
    assert result.output == City("Lisbon", 545000) and result.usage.requests == 2
    first, retry = (received.json for received in loopback.received)
    assert first["response_format"]["type"] == "json_schema" and "tools" not in first
    assert first["response_format"]["json_schema"]["schema"]["required"] == ["city", "population"]
    correction = retry["messages"][-1]
    assert correction["role"] == "user" and "population" in correction["content"]
    with Session.open(path, read_only=True) as session:
        again = RunResult.from_log(session, output_type=City)
    assert again.output == result.output
