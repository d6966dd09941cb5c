"""`AnthropicModel` against a real HTTP server streaming the Messages API wire format."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx
import pytest

from dshkit import create_assistant_message, create_tool_result_message, create_user_message
from dshkit.models import Provider
from dshkit.models.provider import split_options
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.anthropic.projection import anthropic_body
from dshkit.models.projection_parts import UnsupportedContentError
from dshkit.models.errors import IncompleteStreamError, MalformedResponseError, ProviderStreamError, ServerError
from dshkit.models.protocol import ModelError


@dataclass(frozen=True)
class Request:
    messages: tuple[Any, ...]
    system: Any = None
    tools: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def hello() -> Request:
    return Request((create_user_message("Say hello", source={"kind": "user"}),), system="Be brief.")


def make(loopback: Any, **options: Any) -> AnthropicModel:
    options.setdefault("api_key", "sk-ant-test")
    options.setdefault("timeout", 5.0)
    options.setdefault("retry_backoff", 0.01)
    transport, own = split_options(options)
    return AnthropicModel("claude-test", Provider(loopback.base_url.removesuffix("/v1"), **transport), **own)


def run(model: AnthropicModel, request: Any = None) -> tuple[list[dict[str, Any]], BaseException | None]:
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


def test_thinking_text_usage_and_headers(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(
        a.sse_reply(
            [
                a.message_start("msg_9", {"input_tokens": 12, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2048, "output_tokens": 1}),
                *a.thinking(0, ["Greet ", "them."], "sig-A"),
                a.PING,
                *a.text(1, ["Hel", "lo!"]),
                a.message_delta("end_turn", 17),
                a.MESSAGE_STOP,
            ]
        )
    )
    model = make(loopback)
    chunks, error = run(model)
    assert error is None
    assert chunks[:4] == [
        {"type": "reasoning_delta", "text": "Greet "},
        {"type": "reasoning_delta", "text": "them."},
        {"type": "text_delta", "text": "Hel"},
        {"type": "text_delta", "text": "lo!"},
    ]
    # Usage: message_start's counts, then message_delta's cumulative output, in one chunk.
    assert chunks[4] == {
        "type": "usage",
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2048, "output_tokens": 17},
    }
    assert chunks[5] == {
        "type": "finish",
        "reason": "stop",
        "replay_state": {
            "api": "anthropic-messages",
            "id": "msg_9",
            "blocks": [{"type": "thinking", "length": 11, "signature": "sig-A"}, {"type": "text", "length": 6}],
        },
    }
    [received] = loopback.received
    assert received.path == "/v1/messages"
    assert received.headers["x-api-key"] == "sk-ant-test" and received.headers["anthropic-version"] == "2023-06-01"
    assert "Authorization" not in received.headers
    assert received.json == {
        "model": "claude-test",
        "max_tokens": 8192,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Say hello"}]}],
        "stream": True,
    }


def test_parallel_tool_calls_split_across_events(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(
        a.sse_reply(
            [
                a.message_start(),
                *a.tool_use(0, "toolu_a", "read", ['{"pa', 'th": "a"}']),
                *a.tool_use(1, "toolu_b", "now", []),  # no input streamed: still a JSON object
                a.message_delta("tool_use"),
                a.MESSAGE_STOP,
            ]
        )
    )
    chunks, _ = run(make(loopback))
    calls = [c for c in chunks if c["type"] == "tool_call_delta"]
    assert calls == [
        {"type": "tool_call_delta", "index": 0, "id": "toolu_a", "name": "read", "arguments": ""},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": '{"pa'},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": 'th": "a"}'},
        {"type": "tool_call_delta", "index": 1, "id": "toolu_b", "name": "now", "arguments": ""},
        {"type": "tool_call_delta", "index": 1, "id": None, "name": None, "arguments": "{}"},
    ]
    assert chunks[-1]["reason"] == "tool_calls"


def test_overloaded_error_event_before_output_is_retried(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(
        a.sse_reply([a.message_start(), a.error("overloaded_error", "Overloaded")]),
        a.error_reply(529, "overloaded_error", "Overloaded"),
        a.sse_reply(a.answer("third time")),
    )
    retries: list[Any] = []
    chunks, error = run(make(loopback, on_retry=lambda *args: retries.append(args)))
    assert error is None and "".join(c.get("text", "") for c in chunks) == "third time"
    assert isinstance(retries[0][2], ProviderStreamError) and retries[0][2].provider_code == "overloaded_error"
    assert isinstance(retries[1][2], ServerError) and retries[1][2].status == 529 and retries[1][2].request_id == "req_529"


def test_error_event_after_output_is_raised_typed(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(a.sse_reply([a.message_start(), *a.text(0, ["partial"]), a.error("invalid_request_error", "bad thing")]))
    chunks, error = run(make(loopback))
    assert chunks == [{"type": "text_delta", "text": "partial"}]
    assert isinstance(error, ProviderStreamError) and not error.retryable
    assert error.provider_code == "invalid_request_error" and error.message == "bad thing"


def test_cut_off_stream_and_refusal(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(
        a.sse_reply([a.message_start(), *a.text(0, ["half"]), a.Truncate()]),
        a.sse_reply([a.message_start(), a.message_delta("refusal"), a.MESSAGE_STOP]),
    )
    _, error = run(make(loopback, max_retries=0))
    assert isinstance(error, IncompleteStreamError)
    chunks, _ = run(make(loopback))
    assert chunks[-1]["reason"] == "error" and chunks[-1]["error"]["code"] == "refusal"


def test_malformed_events_name_what_was_wrong(loopback: Any, anthropic_wire: Any) -> None:
    a = anthropic_wire
    loopback.reply(a.sse_reply([a.message_start(), a.delta(4, {"type": "text_delta", "text": "x"})]))
    _, error = run(make(loopback))
    assert isinstance(error, MalformedResponseError) and "block 4, which never started" in str(error)


def test_a_callers_http_client_is_used_and_left_open(loopback: Any, anthropic_wire: Any) -> None:
    loopback.reply(anthropic_wire.sse_reply(anthropic_wire.answer("hi")))

    async def main() -> bool:
        async with httpx.AsyncClient(headers={"X-Proxy-Auth": "yes"}) as client:
            model = make(loopback, http_client=client)
            async with model:
                assert [c async for c in model.stream(hello())]
            return client.is_closed

    assert asyncio.run(main()) is False
    assert loopback.received[0].headers["X-Proxy-Auth"] == "yes"
    with pytest.raises(TypeError, match="http_client: expected an httpx.AsyncClient"):
        AnthropicModel("m", Provider("https://api.anthropic.com", http_client=object()))  # type: ignore[arg-type]


def test_base_url_forms() -> None:
    assert AnthropicModel("m").url == "https://api.anthropic.com/v1/messages"
    assert AnthropicModel("m", Provider("https://proxy.example/v1/")).url == "https://proxy.example/v1/messages"
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicModel("m", settings={"max_tokens": 0})


# --- projection --------------------------------------------------------------------------------


def test_without_replay_state_reasoning_is_dropped_and_turns_are_merged() -> None:
    assistant = create_assistant_message(
        [
            {"type": "reasoning", "text": "unsigned"},
            {"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"},
            {"type": "tool_call", "id": "c2", "name": "f", "arguments": '{"x": 1}'},
        ],
        provider="deepseek",
        model="m",
        replay_state={"response_id": "r"},
    )
    results = [create_tool_result_message(call, [{"type": "text", "text": "ok"}], is_error=call == "c2") for call in ("c1", "c2")]
    system_note = create_user_message("later", source={"kind": "user"})
    body = anthropic_body(Request((assistant, *results, system_note)), model="m", max_tokens=5)
    assert body["messages"] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "f", "input": {}},
                {"type": "tool_use", "id": "c2", "name": "f", "input": {"x": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "ok"}]},
                {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "ok"}], "is_error": True},
                {"type": "text", "text": "later"},
            ],
        },
    ]


def test_replay_state_that_does_not_fit_the_content_is_not_used() -> None:
    state = {"api": "anthropic-messages", "blocks": [{"type": "thinking", "length": 99, "signature": "s"}, {"type": "text", "length": 2}]}
    edited = create_assistant_message([{"type": "reasoning", "text": "short"}, {"type": "text", "text": "hi"}], provider="anthropic", model="m", replay_state=state)
    body = anthropic_body(Request((edited,)), model="m", max_tokens=5)
    assert body["messages"] == [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]


def test_bad_content_is_refused_naming_the_block() -> None:
    call = create_assistant_message([{"type": "tool_call", "id": "c", "name": "f", "arguments": "[1]"}], provider="p", model="m")
    with pytest.raises(UnsupportedContentError, match=r"content\[0\]: tool_call 'arguments' is not a JSON object"):
        anthropic_body(Request((call,)), model="m", max_tokens=5)
    with pytest.raises(ValueError, match="'system' is set by the model"):
        anthropic_body(Request((), config={"system": "x"}), model="m", max_tokens=5)
