"""`OpenAIResponsesModel` against a real HTTP server streaming the Responses API wire format."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Mapping

import pytest

from dshkit import create_assistant_message, create_tool_result_message, create_user_message
from dshkit.models.provider import split_options
from dshkit.models import Provider
from dshkit.models.errors import IncompleteStreamError, MalformedResponseError, ProviderStreamError
from dshkit.models.protocol import ModelError
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.models.responses.projection import responses_body


@dataclass(frozen=True)
class Request:
    messages: tuple[Any, ...]
    system: Any = None
    tools: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def hello() -> Request:
    tool = {"name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}
    return Request((create_user_message("Say hello", source={"kind": "user"}),), system="Be brief.", tools=(tool,))


def make(loopback: Any, **options: Any) -> OpenAIResponsesModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("timeout", 5.0)
    options.setdefault("retry_backoff", 0.01)
    transport, own = split_options(options)
    return OpenAIResponsesModel("gpt-test", Provider(loopback.base_url, **transport), **own)


def run(model: OpenAIResponsesModel, request: Any = None) -> tuple[list[dict[str, Any]], BaseException | None]:
    chunks: list[dict[str, Any]] = []

    async def main() -> BaseException | None:
        async with model:
            try:
                async for chunk in model.stream(request or hello()):
                    chunks.append(dict(chunk))
            except ModelError as error:
                return error
        return None

    return chunks, asyncio.run(main())


def test_reasoning_summary_text_usage_and_the_stateless_body(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire("resp_7")
    usage = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1536}, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 2050}
    loopback.reply(r.sse_reply([*r.created(), *r.reasoning(0, "rs_7", [["Think", "ing."]], "gAAAA-enc"), *r.message(1, "msg_7", ["Hi", "!"]), r.completed(usage)]))
    model = make(loopback)
    chunks, error = run(model)
    assert error is None
    assert chunks == [
        {"type": "reasoning_delta", "text": "Think"},
        {"type": "reasoning_delta", "text": "ing."},
        {"type": "text_delta", "text": "Hi"},
        {"type": "text_delta", "text": "!"},
        {"type": "usage", "usage": usage},
        {
            "type": "finish",
            "reason": "stop",
            "replay_state": {
                "api": "openai-responses",
                "id": "resp_7",
                "items": [
                    {"type": "reasoning", "id": "rs_7", "summary": [9], "encrypted_content": "gAAAA-enc"},
                    {"type": "message", "id": "msg_7", "parts": [{"type": "output_text", "length": 3}]},
                ],
            },
        },
    ]
    [received] = loopback.received
    assert received.path == "/v1/responses" and received.headers["Authorization"] == "Bearer sk-test"
    assert received.json == {
        "model": "gpt-test",
        "instructions": "Be brief.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}],
        "tools": [{"type": "function", "name": "now", "description": "The time", "parameters": {"type": "object", "properties": {}}}],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "stream": True,
    }


def test_function_calls_split_across_events_and_whole(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire()
    whole = r.event({"type": "response.output_item.added", "output_index": 1, "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "now", "arguments": ""}})
    whole_done = r.event({"type": "response.output_item.done", "output_index": 1, "item": {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "now", "arguments": "{}"}})
    loopback.reply(r.sse_reply([*r.created(), *r.function_call(0, "fc_a", "call_a", "read", ['{"pa', 'th": "a"}']), whole, whole_done, r.completed()]))
    chunks, _ = run(make(loopback))
    assert [c for c in chunks if c["type"] == "tool_call_delta"] == [
        {"type": "tool_call_delta", "index": 0, "id": "call_a", "name": "read", "arguments": ""},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": '{"pa'},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": 'th": "a"}'},
        {"type": "tool_call_delta", "index": 1, "id": "call_b", "name": "now", "arguments": ""},
        {"type": "tool_call_delta", "index": 1, "id": None, "name": None, "arguments": "{}"},
    ]
    assert chunks[-1]["reason"] == "tool_calls"


def test_incomplete_is_max_tokens(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire()
    loopback.reply(r.sse_reply([*r.created(), *r.message(0, "m", ["cut"]), r.completed(kind="response.incomplete", incomplete_details={"reason": "max_output_tokens"})]))
    chunks, _ = run(make(loopback))
    assert chunks[-1]["reason"] == "max_tokens"


def test_error_events_are_typed_and_transient_ones_retried(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire()
    failed = r.event({"type": "response.failed", "response": r.response("failed", error={"code": "server_error", "message": "try again"})})
    loopback.reply(r.sse_reply([*r.created(), failed]), r.sse_reply(responses_wire().answer("ok now")))
    retries: list[Any] = []
    chunks, error = run(make(loopback, on_retry=lambda *args: retries.append(args)))
    assert error is None and "".join(c.get("text", "") for c in chunks) == "ok now"
    assert isinstance(retries[0][2], ProviderStreamError) and retries[0][2].provider_code == "server_error"

    r = responses_wire()
    bad = r.event({"type": "error", "code": "invalid_prompt", "message": "no", "param": None})
    loopback.reply(r.sse_reply([*r.created(), *r.message(0, "m", ["x"]), bad]))
    chunks, error = run(make(loopback))
    assert isinstance(error, ProviderStreamError) and error.provider_code == "invalid_prompt" and not error.retryable


def test_cut_off_and_malformed_streams(loopback: Any, responses_wire: Any) -> None:
    r = responses_wire()
    loopback.reply(r.sse_reply([*r.created(), *r.message(0, "m", ["x"]), r.Truncate()]))
    _, error = run(make(loopback, max_retries=0))
    assert isinstance(error, IncompleteStreamError)
    r = responses_wire()
    stray = r.event({"type": "response.output_text.delta", "output_index": 3, "content_index": 0, "delta": "x"})
    loopback.reply(r.sse_reply([*r.created(), stray]))
    _, error = run(make(loopback))
    assert isinstance(error, MalformedResponseError) and "output item 3, which is not a message" in str(error)


def test_projection_without_replay_state_and_tool_outputs() -> None:
    assistant = create_assistant_message(
        [{"type": "reasoning", "text": "not encrypted"}, {"type": "text", "text": "Let me look."}, {"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"}],
        provider="anthropic",
        model="m",
    )
    result = create_tool_result_message("c1", [{"type": "text", "text": "42"}])
    body = responses_body(Request((assistant, result), system=[{"type": "text", "text": "Sys"}]), model="m")
    assert body["input"] == [
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Sys"}]},
        {"type": "message", "role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
    ]
    with pytest.raises(ValueError, match="'previous_response_id' is set by the model"):
        responses_body(Request((), config={"previous_response_id": "resp_x"}), model="m")
