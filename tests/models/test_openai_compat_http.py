"""`OpenAICompatibleModel` against a real HTTP server on 127.0.0.1 (see conftest `loopback`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

import dshkit.models
from dshkit import create_user_message
from dshkit.agent.cancel import CancelToken
from dshkit.models.provider import split_options
from dshkit.models import Provider
from dshkit.models.errors import (
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    MalformedResponseError,
    ModelConnectionError,
    ModelTimeoutError,
    ProviderStreamError,
    RateLimitError,
    ServerError,
)
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.protocol import Model, ModelError

DISCONNECT_WAIT = 10.0  # generous bound for the server to see the client go (behaviour, not speed)


@dataclass(frozen=True)
class Request:
    messages: tuple[Any, ...]
    system: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def hello() -> Request:
    return Request((create_user_message("Say hello", source={"kind": "user"}),), system="Be brief.")


def make(loopback: Any, **options: Any) -> OpenAICompatibleModel:
    options.setdefault("api_key", "sk-test")
    options.setdefault("timeout", 5.0)
    options.setdefault("retry_backoff", 0.01)
    transport, own = split_options(options)
    return OpenAICompatibleModel("test-model", Provider(loopback.base_url, **transport), **own)


async def collect(model: OpenAICompatibleModel, request: Any, cancel: Any = None) -> list[dict[str, Any]]:
    return [dict(chunk) async for chunk in model.stream(request, cancel)]


def run_collect(model: OpenAICompatibleModel, request: Any = None) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        async with model:
            return await collect(model, request or hello())

    return asyncio.run(main())


def run_failing(model: OpenAICompatibleModel, request: Any = None) -> tuple[list[dict[str, Any]], BaseException]:
    chunks: list[dict[str, Any]] = []

    async def main() -> BaseException:
        async with model:
            try:
                async for chunk in model.stream(request or hello()):
                    chunks.append(dict(chunk))
            except ModelError as error:
                return error
        raise AssertionError(f"the stream did not fail: {chunks}")

    return chunks, asyncio.run(main())


def text_of(chunks: list[dict[str, Any]], kind: str = "text_delta") -> str:
    return "".join(chunk["text"] for chunk in chunks if chunk["type"] == kind)


# --- responses -------------------------------------------------------------------------------


def test_plain_answer(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("Hello there friend")))
    model = make(loopback)
    chunks = run_collect(model)
    assert text_of(chunks) == "Hello there friend"
    assert chunks[-2] == {"type": "usage", "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}
    assert chunks[-1] == {"type": "finish", "reason": "stop", "replay_state": {"response_id": "chatcmpl-1"}}
    [received] = loopback.received
    assert received.path == "/v1/chat/completions"
    assert received.headers["Authorization"] == "Bearer sk-test"
    assert received.headers["Accept"] == "text/event-stream"
    assert received.headers["Content-Type"] == "application/json"
    assert received.body == model.request_body(hello())
    assert received.json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hello"},
    ]
    assert received.json["model"] == "test-model" and received.json["stream"] is True


def test_reasoning_then_answer(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.sse_reply(
            [
                wire.chunk(role="assistant", content=None, reasoning=""),
                wire.chunk(reasoning="The user "),
                wire.chunk(reasoning="wants a greeting."),
                wire.chunk(content="Hi!"),
                wire.chunk(finish="stop"),
                wire.DONE,
            ]
        )
    )
    chunks = run_collect(make(loopback))
    assert text_of(chunks, "reasoning_delta") == "The user wants a greeting."
    assert text_of(chunks) == "Hi!"
    assert [c["type"] for c in chunks] == ["reasoning_delta", "reasoning_delta", "text_delta", "finish"]


def test_parallel_tool_calls_with_fragmented_arguments(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.sse_reply(
            [
                wire.chunk(role="assistant", content=None),
                wire.chunk(tool_calls=[wire.tool_call_start(0, "call_0", "read_file")]),
                wire.chunk(tool_calls=[wire.tool_call_args(0, '{"pa')]),
                wire.chunk(tool_calls=[wire.tool_call_start(1, "call_1", "list_dir")]),
                wire.chunk(tool_calls=[wire.tool_call_args(0, 'th": "notes.md"}')]),
                wire.chunk(tool_calls=[wire.tool_call_args(1, '{"dir": ')]),
                wire.chunk(tool_calls=[wire.tool_call_args(1, '"."}')]),
                wire.chunk(finish="tool_calls"),
                wire.DONE,
            ]
        )
    )
    chunks = run_collect(make(loopback))
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if chunk["type"] == "tool_call_delta":
            call = calls.setdefault(chunk["index"], {"id": None, "name": None, "arguments": ""})
            call["id"] = call["id"] or chunk["id"]
            call["name"] = call["name"] or chunk["name"]
            call["arguments"] += chunk["arguments"]
    assert calls == {
        0: {"id": "call_0", "name": "read_file", "arguments": '{"path": "notes.md"}'},
        1: {"id": "call_1", "name": "list_dir", "arguments": '{"dir": "."}'},
    }
    assert chunks[-1]["reason"] == "tool_calls"


def test_usage_with_cached_tokens(loopback: Any, wire: Any) -> None:
    usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "prompt_cache_hit_tokens": 1024,
        "prompt_cache_miss_tokens": 176,
    }
    loopback.reply(wire.sse_reply([wire.chunk(content="ok"), wire.chunk(finish="stop"), wire.usage(usage), wire.DONE]))
    chunks = run_collect(make(loopback))
    assert chunks[-2] == {"type": "usage", "usage": usage}


def test_sse_split_at_awkward_places(loopback: Any, wire: Any) -> None:
    body = b"".join([wire.chunk(content="é, "), b": keep-alive\r\n\r\n", wire.chunk(content="深度"), wire.DONE])
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    loopback.reply(wire.sse_reply(pieces))
    assert text_of(run_collect(make(loopback))) == "é, 深度"


def test_server_ignoring_stream_answers_in_one_json(loopback: Any, wire: Any) -> None:
    completion = {
        "id": "cmpl-9",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Done.",
                    "reasoning_content": "Easy.",
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    loopback.reply(wire.Reply(headers={"Content-Type": "application/json"}, pieces=[json.dumps(completion).encode()]))
    assert run_collect(make(loopback)) == [
        {"type": "reasoning_delta", "text": "Easy."},
        {"type": "text_delta", "text": "Done."},
        {"type": "tool_call_delta", "index": 0, "id": "c", "name": "f", "arguments": "{}"},
        {"type": "usage", "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
        {"type": "finish", "reason": "tool_calls", "replay_state": {"response_id": "cmpl-9"}},
    ]


def test_same_request_sends_byte_identical_bodies_and_reuses_the_connection(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("one")), wire.sse_reply(wire.answer("two")))
    model = make(loopback)
    request = hello()

    async def main() -> list[str]:
        async with model:
            return [text_of(await collect(model, request)), text_of(await collect(model, request))]

    assert asyncio.run(main()) == ["one", "two"]
    first, second = loopback.received
    assert first.body == second.body
    assert first.client == second.client  # the body was read to its end: keep-alive worked


# --- HTTP failures ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_authentication_errors_are_not_retried(loopback: Any, wire: Any, status: int) -> None:
    loopback.reply(wire.error_reply(status, "Authentication Fails, Your api key is invalid", kind="authentication_error"))
    retries: list[Any] = []
    chunks, error = run_failing(make(loopback, max_retries=3, on_retry=lambda *a: retries.append(a)))
    assert isinstance(error, AuthenticationError)
    assert (error.status, error.request_id, error.retryable) == (status, f"req-{status}", False)
    assert error.message == "Authentication Fails, Your api key is invalid"
    assert error.provider_code == "authentication_error"
    assert f"HTTP {status}: Authentication Fails" in str(error) and f"req-{status}" in str(error)
    assert error.to_info() == {
        "code": f"http_{status}",
        "message": "Authentication Fails, Your api key is invalid",
        "status": status,
        "request_id": f"req-{status}",
    }
    assert chunks == [] and retries == [] and len(loopback.received) == 1


def test_rate_limit_is_retried_after_retry_after(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.error_reply(429, "Rate limit reached", headers={"Retry-After": "0"}),
        wire.sse_reply(wire.answer("finally")),
    )
    retries: list[tuple[int, float, Any]] = []
    chunks = run_collect(make(loopback, on_retry=lambda *a: retries.append(a)))
    assert text_of(chunks) == "finally"
    [(attempt, delay, error)] = retries
    assert (attempt, delay) == (1, 0.0)
    assert isinstance(error, RateLimitError) and error.retry_after == 0.0
    assert len(loopback.received) == 2
    assert loopback.received[0].body == loopback.received[1].body


def test_retry_after_ms_and_dates(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.error_reply(503, "busy", headers={"retry-after-ms": "20"}),
        wire.error_reply(503, "busy", headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        wire.sse_reply(wire.answer("up")),
    )
    retries: list[tuple[int, float, Any]] = []
    assert text_of(run_collect(make(loopback, on_retry=lambda *a: retries.append(a)))) == "up"
    assert [(attempt, delay) for attempt, delay, _ in retries] == [(1, 0.02), (2, 0.0)]


def test_server_errors_back_off_up_to_max_retries(loopback: Any, wire: Any) -> None:
    loopback.reply(*(wire.error_reply(status, "upstream failed") for status in (500, 502, 503)))
    retries: list[tuple[int, float, Any]] = []
    chunks, error = run_failing(make(loopback, max_retries=2, retry_backoff=0.01, on_retry=lambda *a: retries.append(a)))
    assert isinstance(error, ServerError) and error.status == 503 and error.retryable
    assert [attempt for attempt, _, _ in retries] == [1, 2]
    # Exponential backoff with +-25% jitter: 0.01 then 0.02.
    assert 0.0075 <= retries[0][1] <= 0.0125 and 0.015 <= retries[1][1] <= 0.025
    assert [type(e) for _, _, e in retries] == [ServerError, ServerError]
    assert len(loopback.received) == 3


def test_retry_after_longer_than_max_retry_wait_is_not_waited_for(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.error_reply(429, "quota", headers={"Retry-After": "3600"}))
    _, error = run_failing(make(loopback, max_retry_wait=60))
    assert isinstance(error, RateLimitError) and error.retry_after == 3600.0
    assert len(loopback.received) == 1


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b'{"object": "error", "message": "model not found", "type": "NotFoundError", "code": 404}', "application/json", "model not found"),
        (b'{"detail": "Not Found"}', "application/json", "Not Found"),
        (b"<html><body>Bad gateway</body></html>", "text/html", "<html><body>Bad gateway</body></html>"),
        (b"", "text/plain", "Not Found"),
    ],
)
def test_error_bodies_of_other_servers(loopback: Any, wire: Any, body: bytes, content_type: str, message: str) -> None:
    loopback.reply(wire.Reply(status=404, headers={"Content-Type": content_type}, pieces=[body] if body else []))
    _, error = run_failing(make(loopback))
    assert isinstance(error, BadRequestError) and not error.retryable
    assert error.message == message and error.status == 404
    assert error.body == body.decode()


# --- broken streams --------------------------------------------------------------------------


def test_non_json_event_is_malformed_and_names_it(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(content="partial"), b"data: {oops\n\n", wire.DONE]))
    chunks, error = run_failing(make(loopback))
    assert isinstance(error, MalformedResponseError)
    assert "{oops" in str(error) and error.received == "{oops"
    assert text_of(chunks) == "partial"
    assert len(loopback.received) == 1  # output was already streamed: never retried


def test_invalid_utf8_is_malformed(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([b"data: \xff\xfe\n\n"]))
    _, error = run_failing(make(loopback, max_retries=0))
    assert isinstance(error, MalformedResponseError) and "not UTF-8" in str(error)


def test_html_instead_of_an_event_stream(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.Reply(headers={"Content-Type": "text/html; charset=utf-8"}, pieces=[b"<html>Login</html>"]))
    _, error = run_failing(make(loopback))
    assert isinstance(error, MalformedResponseError)
    assert "got text/html" in str(error) and "<html>Login</html>" in str(error)


def test_error_event_inside_a_200_stream(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.sse_reply([wire.chunk(content="so far"), wire.event({"error": {"message": "Internal error", "code": "server_error"}})])
    )
    chunks, error = run_failing(make(loopback))
    assert isinstance(error, ProviderStreamError)
    assert error.message == "Internal error" and error.provider_code == "server_error" and error.status == 200
    assert text_of(chunks) == "so far"


def test_json_error_with_status_200(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.Reply(headers={"Content-Type": "application/json"}, pieces=[b'{"error": {"message": "insufficient balance"}}']))
    _, error = run_failing(make(loopback))
    assert isinstance(error, ProviderStreamError) and error.message == "insufficient balance"


def test_body_cut_mid_stream_is_incomplete_and_not_retried(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(content="half"), wire.Truncate()]), wire.sse_reply(wire.answer("unused")))
    chunks, error = run_failing(make(loopback))
    assert isinstance(error, IncompleteStreamError)
    assert text_of(chunks) == "half"
    assert len(loopback.received) == 1


def test_body_ending_early_without_chunking_is_incomplete(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(content="half")], chunked=False))
    chunks, error = run_failing(make(loopback))
    assert isinstance(error, IncompleteStreamError) and "without a finish_reason" in str(error)


def test_body_cut_before_any_output_is_retried(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.Truncate()]), wire.sse_reply(wire.answer("second try")))
    retries: list[Any] = []
    assert text_of(run_collect(make(loopback, on_retry=lambda *a: retries.append(a)))) == "second try"
    assert isinstance(retries[0][2], IncompleteStreamError)


# --- transport failures, timeouts and cancellation ----------------------------------------


def test_connection_refused(closed_port: int) -> None:
    retries: list[Any] = []
    model = OpenAICompatibleModel("m", Provider(f"http://127.0.0.1:{closed_port}/v1", max_retries=1, retry_backoff=0.01, on_retry=lambda *a: retries.append(a)))
    _, error = run_failing(model)
    assert isinstance(error, ModelConnectionError) and error.retryable
    assert f"127.0.0.1:{closed_port}" in str(error)
    assert len(retries) == 1 and isinstance(retries[0][2], ModelConnectionError)


def test_timeout_waiting_for_the_response(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.Reply(stall_before_headers=True))
    _, error = run_failing(make(loopback, timeout=0.2, max_retries=0))
    assert isinstance(error, ModelTimeoutError) and "timed out after 0.2s" in str(error)
    assert error.code == "timeout"


def test_stall_mid_stream_times_out_keeping_nothing_retried(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(content="Thinking about"), wire.Stall()]))
    chunks, error = run_failing(make(loopback, timeout=1.0))
    assert isinstance(error, ModelTimeoutError)
    assert text_of(chunks) == "Thinking about"
    assert loopback.disconnected.wait(DISCONNECT_WAIT)
    assert len(loopback.received) == 1


def _stalling(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(content="The answer is"), wire.Stall()]))


def test_cancel_token_closes_the_stream(loopback: Any, wire: Any) -> None:
    _stalling(loopback, wire)
    model = make(loopback, timeout=30)
    cancel = CancelToken()

    async def main() -> list[dict[str, Any]]:
        chunks: list[dict[str, Any]] = []
        async with model:
            async for chunk in model.stream(hello(), cancel):
                chunks.append(dict(chunk))
                asyncio.get_running_loop().call_later(0.05, cancel.cancel, "user")
        return chunks

    chunks = asyncio.run(main())
    assert chunks == [{"type": "text_delta", "text": "The answer is"}]  # no finish: it was cancelled
    assert loopback.disconnected.wait(DISCONNECT_WAIT)


def test_closing_the_iterator_closes_the_stream(loopback: Any, wire: Any) -> None:
    _stalling(loopback, wire)
    model = make(loopback, timeout=30)

    async def main() -> None:
        async with model:
            stream = model.stream(hello(), CancelToken())
            assert (await stream.__anext__())["text"] == "The answer is"
            await stream.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())
    assert loopback.disconnected.wait(DISCONNECT_WAIT)


def test_cancelling_the_reading_task_closes_the_stream(loopback: Any, wire: Any) -> None:
    _stalling(loopback, wire)
    model = make(loopback, timeout=30)

    async def main() -> None:
        got_text = asyncio.Event()

        async def read() -> None:
            async for _ in model.stream(hello()):
                got_text.set()

        async with model:
            task = asyncio.ensure_future(read())
            await got_text.wait()
            await asyncio.sleep(0.05)  # let the reader block on the stalled socket
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert loopback.disconnected.wait(DISCONNECT_WAIT)


def test_already_cancelled_sends_nothing(loopback: Any) -> None:
    cancel = CancelToken()
    cancel.cancel("user")
    model = make(loopback)

    async def main() -> list[dict[str, Any]]:
        async with model:
            return await collect(model, hello(), cancel)

    assert asyncio.run(main()) == []
    assert loopback.received == []


# --- construction ------------------------------------------------------------------------------


def test_from_env() -> None:
    model = OpenAICompatibleModel.from_env(
        {"DSHKIT_BASE_URL": "https://api.deepseek.com", "DSHKIT_MODEL": "deepseek-chat", "DSHKIT_API_KEY": "sk-1"},
        timeout=9,
    )
    assert (model.provider, model.model, model.url, model.timeout) == (
        "deepseek",
        "deepseek-chat",
        "https://api.deepseek.com/chat/completions",
        9.0,
    )
    keyless = OpenAICompatibleModel.from_env({"DSHKIT_BASE_URL": "http://localhost:8080/v1", "DSHKIT_MODEL": "qwen"})
    assert keyless.provider == "openai-compatible"


def test_from_env_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="DSHKIT_BASE_URL and DSHKIT_MODEL not set"):
        OpenAICompatibleModel.from_env({})
    with pytest.raises(ValueError, match="^DSHKIT_MODEL not set"):
        OpenAICompatibleModel.from_env({"DSHKIT_BASE_URL": "https://api.openai.com/v1"})


def test_keyless_requests_send_no_authorization(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("hi")))
    run_collect(make(loopback, api_key=None, headers={"X-Title": "dshkit tests"}))
    headers = loopback.received[0].headers
    assert "Authorization" not in headers and headers["X-Title"] == "dshkit tests"


@pytest.mark.parametrize(
    ("url", "endpoint", "provider"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions", "openai"),
        ("https://openrouter.ai/api/v1/", "https://openrouter.ai/api/v1/chat/completions", "openrouter"),
        ("http://127.0.0.1:8000/v1/chat/completions", "http://127.0.0.1:8000/v1/chat/completions", "openai-compatible"),
        ("http://[::1]:8000", "http://[::1]:8000/chat/completions", "openai-compatible"),
    ],
)
def test_endpoint_and_provider_from_base_url(url: str, endpoint: str, provider: str) -> None:
    model = OpenAICompatibleModel("m", Provider(url))
    assert (model.url, model.provider) == (endpoint, provider)
    assert OpenAICompatibleModel("m", Provider(url, name="mine")).provider == "mine"


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"base_url": "api.deepseek.com"}, "base_url: expected an http"),
        ({"base_url": ""}, "base_url"),
        ({"base_url": "http://x", "timeout": 0}, "timeout: expected a finite number > 0"),
        ({"base_url": "http://x", "max_retries": -1}, "max_retries"),
        ({"base_url": "http://x", "retry_backoff": float("nan")}, "retry_backoff"),
        ({"base_url": "http://x", "name": ""}, "name"),
    ],
)
def test_bad_construction(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        OpenAICompatibleModel("m", Provider(**options))
    with pytest.raises(ValueError, match="model: expected a non-empty str"):
        OpenAICompatibleModel("", Provider("http://x"))


def test_it_is_a_protocol_model_exported_lazily() -> None:
    assert dshkit.models.OpenAICompatibleModel is OpenAICompatibleModel
    assert isinstance(OpenAICompatibleModel("m", Provider("http://x")), Model)


def test_bad_request_fails_at_call_time_without_sending(loopback: Any) -> None:
    bad = Request((create_user_message([{"type": "audio", "data": "x"}], source={"kind": "user"}),))
    model = make(loopback)
    with pytest.raises(ValueError, match="'audio' blocks cannot be sent"):
        model.stream(bad, CancelToken())
    assert loopback.received == []


# --- review fixes: each test pins a bug found in review ------------------------------------------


def test_parallel_tool_calls_sharing_one_index_stay_apart(loopback: Any, wire: Any) -> None:
    # Ollama (and some gateways) label every call of a parallel batch with index 0, each with
    # its own id: merging them by index would glue two argument objects into invalid JSON.
    loopback.reply(
        wire.sse_reply(
            [
                wire.chunk(tool_calls=[{"index": 0, "id": "call_a", "function": {"name": "read", "arguments": '{"path":'}}]),
                wire.chunk(tool_calls=[{"index": 0, "function": {"arguments": '"a"}'}}]),
                wire.chunk(tool_calls=[{"index": 0, "id": "call_b", "function": {"name": "read", "arguments": '{"path":'}}]),
                wire.chunk(tool_calls=[{"index": 0, "function": {"arguments": '"b"}'}}]),
                wire.chunk(finish="tool_calls"),
                wire.DONE,
            ]
        )
    )
    calls: dict[int, dict[str, Any]] = {}
    for chunk in run_collect(make(loopback)):
        if chunk["type"] == "tool_call_delta":
            call = calls.setdefault(chunk["index"], {"id": None, "arguments": ""})
            call["id"] = call["id"] or chunk["id"]
            call["arguments"] += chunk["arguments"]
    assert list(calls.values()) == [
        {"id": "call_a", "arguments": '{"path":"a"}'},
        {"id": "call_b", "arguments": '{"path":"b"}'},
    ]


def test_an_api_key_that_cannot_be_a_header_is_refused_without_echoing_it() -> None:
    # httpx's own message would quote the whole Authorization header (and the key was then
    # logged in turn/end and retried as a "connection error").
    for key in ("sk-secret-123\n", "sk-secret-123 ", "sk-sécret-123"):
        with pytest.raises(ValueError, match="api_key") as caught:
            OpenAICompatibleModel("m", Provider("http://127.0.0.1:1/v1", api_key=key))
        assert "secret" not in str(caught.value) and "sécret" not in str(caught.value)
    for value in ("sk-secret\r\n", " sk-secret"):
        with pytest.raises(ValueError, match="headers\\['api-key'\\]") as caught:
            OpenAICompatibleModel("m", Provider("http://127.0.0.1:1/v1", headers={"api-key": value}))
        assert "secret" not in str(caught.value)


def test_from_env_ignores_whitespace_around_the_key(loopback: Any, wire: Any) -> None:
    # A key pasted into a .env file or read from a key file usually ends in a newline.
    loopback.reply(wire.sse_reply(wire.answer("hi")))
    env = {"DSHKIT_BASE_URL": loopback.base_url, "DSHKIT_MODEL": "test-model", "DSHKIT_API_KEY": " sk-test\n"}
    assert text_of(run_collect(OpenAICompatibleModel.from_env(env, timeout=5.0))) == "hi"
    assert loopback.received[0].headers["Authorization"] == "Bearer sk-test"


def test_base_url_with_a_query_keeps_the_query_after_the_path(loopback: Any, wire: Any) -> None:
    # Azure-style endpoints put the API version in the query string.
    loopback.reply(wire.sse_reply(wire.answer("hi")))
    model = OpenAICompatibleModel("test-model", Provider(loopback.base_url + "/?api-version=2024-06-01", timeout=5.0))
    assert text_of(run_collect(model)) == "hi"
    assert loopback.received[0].path == "/v1/chat/completions?api-version=2024-06-01"


def test_a_password_in_the_base_url_is_never_shown(closed_port: int) -> None:
    model = OpenAICompatibleModel("m", Provider(f"http://user:s3cret@127.0.0.1:{closed_port}/v1", max_retries=0))
    assert "s3cret" not in repr(model) and "s3cret" not in model.url
    assert model.url == f"http://user:***@127.0.0.1:{closed_port}/v1/chat/completions"
    _, error = run_failing(model)
    assert isinstance(error, ModelConnectionError)
    assert "s3cret" not in str(error) and "s3cret" not in str(error.to_info())


def test_extra_headers_replace_defaults_whatever_their_case(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("hi")))
    run_collect(make(loopback, headers={"authorization": "Bearer other", "user-agent": "mine/1"}))
    received = loopback.received[0].headers
    assert [value for name, value in received.items() if name.lower() == "authorization"] == ["Bearer other"]
    assert [value for name, value in received.items() if name.lower() == "user-agent"] == ["mine/1"]


@pytest.mark.parametrize("cut", ["truncate", "stall"])
def test_a_body_that_breaks_after_the_finish_reason_keeps_the_answer(loopback: Any, wire: Any, cut: str) -> None:
    # The response said it was finished; only the usage and [DONE] were lost. Failing the turn
    # (after a whole read timeout, for a stall) would throw a complete answer away.
    loopback.reply(
        wire.sse_reply([wire.chunk(content="All done."), wire.chunk(finish="stop"), wire.Truncate() if cut == "truncate" else wire.Stall()])
    )
    chunks = run_collect(make(loopback, timeout=1.0))
    assert text_of(chunks) == "All done."
    assert chunks[-1] == {"type": "finish", "reason": "stop", "replay_state": {"response_id": "chatcmpl-1"}}
    assert len(loopback.received) == 1
