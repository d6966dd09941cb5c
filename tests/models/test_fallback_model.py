"""`FallbackModel` over real loopback servers: a failure before the first chunk (an HTTP status, a
refused connection, a context overflow) moves on to the next model, which answers; the assistant
message names it; a failure after output is not hidden by another model's answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent
from dshkit.models import AnthropicModel, FallbackModel, OpenAICompatibleModel, Provider, ScriptedModel, supports_native_output
from dshkit.models.errors import AuthenticationError, ServerError
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, ModelError
from dshkit.session import ModelRequest
from tests.models.conftest import LoopbackServer


@pytest.fixture
def second() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def chat(server_url: str, name: str) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(f"{name}-model", Provider(server_url, api_key="sk-test", name=name, timeout=5.0, max_retries=0))


def claude(server: LoopbackServer) -> AnthropicModel:
    return AnthropicModel("claude-test", Provider(server.base_url.removesuffix("/v1"), api_key="sk-ant", timeout=5.0, max_retries=0))


def ask(model: Any, text: str = "Hello") -> tuple[Agent, Any]:
    async def main() -> tuple[Agent, Any]:
        async with model:  # closes every HTTP model's pool
            agent = Agent(model)
            agent.followup(create_user_message(text, source={"kind": "user"}))
            await agent.when_idle()
            return agent, agent.session.messages()[-1]

    return asyncio.run(main())


def turn_end(agent: Agent) -> dict[str, Any]:
    """The last turn's end reason (``kind``, and ``error`` when it failed)."""
    return dict([event for event in agent.session.events if event.type == "turn/end"][-1].data["reason"])


def overflow_reply(wire: Any) -> Any:
    return wire.Reply(
        status=400,
        headers={"Content-Type": "application/json"},
        pieces=[b'{"error": {"message": "maximum context length is 8192 tokens", "type": "invalid_request_error", "code": "context_length_exceeded"}}'],
    )


@pytest.mark.parametrize("failure", ["500", "401", "overflow"])
def test_a_failure_before_the_first_chunk_moves_on_and_the_message_names_who_answered(
    loopback: Any, second: LoopbackServer, anthropic_wire: Any, wire: Any, failure: str, caplog: Any
) -> None:
    reply = {"500": wire.error_reply(500, "boom"), "401": wire.error_reply(401, "bad key"), "overflow": overflow_reply(wire)}[failure]
    loopback.reply(reply)
    second.reply(anthropic_wire.sse_reply(anthropic_wire.answer("Hi from Claude")))
    model = FallbackModel([chat(loopback.base_url, "first"), claude(second)])
    with caplog.at_level(logging.WARNING, logger="dshkit.models"):
        agent, message = ask(model)
    assert message.role == "assistant" and message.to_dict()["content"] == [{"type": "text", "text": "Hi from Claude"}]
    assert (message.source["provider"], message.source["model"]) == ("anthropic", "claude-test")
    assert (model.provider, model.model) == ("anthropic", "claude-test")
    assert turn_end(agent)["kind"] == "completed"
    assert len(loopback.received) == 1 and len(second.received) == 1
    assert second.received[0].json["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    [(failed, error)] = model.last_failures
    expected = {"500": ServerError, "401": AuthenticationError, "overflow": ModelError}[failure]
    assert failed.provider == "first" and isinstance(error, expected)
    if failure == "overflow":
        assert error.code == CONTEXT_WINDOW_EXCEEDED
    assert any("first/first-model failed before answering" in record.getMessage() for record in caplog.records)


def test_a_refused_connection_moves_on(closed_port: int, loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("Second here")))
    model = FallbackModel([chat(f"http://127.0.0.1:{closed_port}/v1", "down"), chat(loopback.base_url, "up")])
    _, message = ask(model)
    assert message.source["provider"] == "up" and message.to_dict()["content"][0]["text"] == "Second here"
    assert model.last_failures[0][1].code == "connection_error"


def test_when_every_model_fails_the_last_failure_ends_the_turn(loopback: Any, second: LoopbackServer, wire: Any) -> None:
    loopback.reply(wire.error_reply(500, "first down"))
    second.reply(wire.error_reply(401, "second refuses"))
    model = FallbackModel([chat(loopback.base_url, "a"), chat(second.base_url, "b")])
    agent, _ = ask(model)
    end = turn_end(agent)
    assert end["kind"] == "error" and end["error"]["status"] == 401 and "second refuses" in end["error"]["message"]
    assert [failed.provider for failed, _ in model.last_failures] == ["a"]


def test_a_failure_after_output_is_raised_not_hidden_by_another_answer(loopback: Any, second: LoopbackServer, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(role="assistant", content="Half"), wire.Truncate()]))
    second.reply(wire.sse_reply(wire.answer("never asked")))
    model = FallbackModel([chat(loopback.base_url, "a"), chat(second.base_url, "b")])

    async def main() -> tuple[list[Any], BaseException | None]:
        chunks: list[Any] = []
        async with model:
            try:
                async for chunk in model.stream(ModelRequest((create_user_message("Hi", source={"kind": "user"}),))):
                    chunks.append(chunk)
            except ModelError as error:
                return chunks, error
        return chunks, None

    chunks, error = asyncio.run(main())
    assert [chunk.get("text") for chunk in chunks] == ["Half"]
    assert error is not None and error.code == "incomplete_stream"
    assert second.received == [] and model.provider == "a"


def test_an_error_finish_as_the_first_chunk_moves_on() -> None:
    failing = ScriptedModel([[{"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "busy"}}]], provider="p1")
    answering = ScriptedModel(["Fine."], provider="p2")
    _, message = ask(FallbackModel([failing, answering]))
    assert message.source["provider"] == "p2"


def test_native_output_only_when_every_model_has_it_and_bad_input_is_refused(loopback: Any) -> None:
    http = chat(loopback.base_url, "a")
    assert supports_native_output(FallbackModel([http, claude(loopback)])) is True
    assert supports_native_output(FallbackModel([http, ScriptedModel([])])) is False
    assert FallbackModel([OpenAICompatibleModel("m", Provider(loopback.base_url), context_window=1000), http]).context_window == 1000
    with pytest.raises(TypeError, match="non-empty list of models"):
        FallbackModel([])
    with pytest.raises(TypeError, match=r"models\[1\]: expected a model, got str"):
        FallbackModel([http, "openai:gpt-4.1-mini"])  # type: ignore[list-item]
