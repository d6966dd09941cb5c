"""Hostile responses against all three HTTP models, on a real server on 127.0.0.1 (issue 9, item 8):
an endless line, a body that trickles forever, and huge error or JSON bodies must each end in a
typed error without the model reading (or holding) the whole thing."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from dshkit import create_user_message
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.errors import MalformedResponseError, ModelHTTPError, ModelTimeoutError
from dshkit.models.http.model import HTTPModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.protocol import ModelError
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.models.http.sse import DEFAULT_MAX_EVENT_BYTES
from dshkit.session import ModelRequest
from tests.models.conftest import AnthropicWire, Reply, ResponsesWire, Trickle, Wire

MiB = 1024 * 1024
# What the kernel may still accept after the client stopped reading (socket buffers on both ends)
# is a few MiB; a body read whole would send all of it.
NOT_READ_WHOLE = 16 * MiB

MODELS: dict[str, Callable[..., HTTPModel]] = {
    "openai_compat": lambda base_url, **options: OpenAICompatibleModel("test-model", Provider(base_url, **options)),
    "anthropic": lambda base_url, **options: AnthropicModel("claude-test", Provider(base_url, **options)),
    "responses": lambda base_url, **options: OpenAIResponsesModel("gpt-test", Provider(base_url, **options)),
}


# One ordinary streamed answer in each API's wire format.
ANSWERS: dict[str, Callable[[str], list[bytes]]] = {
    "openai_compat": Wire.answer,
    "anthropic": AnthropicWire.answer,
    "responses": lambda text: ResponsesWire().answer(text),
}


@pytest.fixture(params=sorted(MODELS))
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(provider: str, loopback: Any) -> Callable[..., HTTPModel]:
    factory = MODELS[provider]

    def make(**options: Any) -> HTTPModel:
        options.setdefault("api_key", "sk-test")
        options.setdefault("timeout", 5.0)
        options.setdefault("retry_backoff", 0.01)
        return factory(loopback.base_url, **options)

    return make


def hello() -> ModelRequest:
    return ModelRequest([create_user_message("Say hello", source={"kind": "user"})])


def run_failing(model: HTTPModel) -> tuple[list[dict[str, Any]], ModelError]:
    chunks: list[dict[str, Any]] = []

    async def main() -> ModelError:
        async with model:
            try:
                async for chunk in model.stream(hello()):
                    chunks.append(dict(chunk))
            except ModelError as error:
                return error
        raise AssertionError(f"the stream did not fail: {chunks}")

    return chunks, asyncio.run(main())


def run_text(model: HTTPModel) -> str:
    async def main() -> str:
        async with model:
            return "".join([chunk["text"] async for chunk in model.stream(hello()) if chunk["type"] == "text_delta"])

    return asyncio.run(main())


def test_an_endless_line_fails_at_max_event_bytes_without_reading_on(loopback: Any, wire: Any, make: Any) -> None:
    # 32 MiB of one line in 16 KiB pieces, never a newline: refused once 256 KiB are pending.
    loopback.reply(wire.sse_reply([b"data: "] + [b"x" * (16 * 1024)] * 2048))
    model = make(max_event_bytes=256 * 1024)
    _, error = run_failing(model)
    assert isinstance(error, MalformedResponseError) and not error.retryable
    assert "limit of 262144 bytes (max_event_bytes)" in error.message
    assert f"pass a larger max_event_bytes to the Provider of {type(model).__name__}" in error.message
    assert len(loopback.received) == 1  # not retried: the same request would get the same answer
    (sent,) = loopback.wait_played(1)
    assert sent < NOT_READ_WHOLE, sent


def test_events_below_the_limit_stream_normally(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("a quite ordinary answer")))
    model = OpenAICompatibleModel("m", Provider(loopback.base_url, timeout=5.0, stream_timeout=30, max_event_bytes=400))

    assert run_text(model) == "a quite ordinary answer"


def test_stream_timeout_closes_a_trickling_stream_and_retries_it_before_output(
    loopback: Any, make: Any, provider: str
) -> None:
    # Keep-alive comments every 20 ms: the per-read timeout (5 s) never fires, the deadline does.
    # The retry is answered at once. The deadline is generous because it bounds the retry too: on a
    # loaded machine a 0.3 s one could cut the retry off before the server recorded its request.
    loopback.reply(Reply(pieces=[Trickle(b": keep-alive\n")]), Reply(pieces=[*ANSWERS[provider]("hello again")]))
    retries: list[ModelError] = []
    model = make(stream_timeout=1.0, max_retries=1, on_retry=lambda attempt, delay, error: retries.append(error))
    assert run_text(model) == "hello again"
    (error,) = retries
    assert isinstance(error, ModelTimeoutError) and error.retryable and error.code == "timeout"
    assert "took longer than stream_timeout=1s" in error.message
    assert len(loopback.received) == 2
    loopback.wait_played(2)  # the trickle ended: the client closed its connection
    assert loopback.disconnected.is_set()


def test_stream_timeout_after_output_is_not_retried(loopback: Any, wire: Any) -> None:
    loopback.reply(
        wire.sse_reply([wire.chunk(role="assistant", content="Hel"), wire.Trickle(b"data: ")]),
        wire.sse_reply(wire.answer("never asked for")),
    )
    model = OpenAICompatibleModel("m", Provider(loopback.base_url, timeout=5.0, stream_timeout=1.0, max_retries=2))
    chunks, error = run_failing(model)
    assert [chunk["text"] for chunk in chunks if chunk["type"] == "text_delta"] == ["Hel"]
    assert isinstance(error, ModelTimeoutError) and "stream_timeout=1s" in error.message
    assert len(loopback.received) == 1
    loopback.wait_played(1)


def test_a_64_mib_error_body_is_not_read_whole(loopback: Any, wire: Any, make: Any) -> None:
    loopback.reply(wire.Reply(status=500, headers={"Content-Type": "application/json"}, pieces=[b"x" * MiB] * 64))
    _, error = run_failing(make(max_retries=0))
    assert isinstance(error, ModelHTTPError) and error.status == 500
    assert len(error.body) == 64 * 1024
    (sent,) = loopback.wait_played(1)
    assert sent < NOT_READ_WHOLE, sent


def test_a_64_mib_json_answer_is_refused_past_max_event_bytes(loopback: Any, wire: Any, make: Any) -> None:
    # A server ignoring "stream" answers in one JSON body: that answer is the response's one event.
    loopback.reply(wire.Reply(headers={"Content-Type": "application/json"}, pieces=[b"[" + b" " * (MiB - 1)] * 64))
    model = make(max_retries=0, max_event_bytes=MiB)
    _, error = run_failing(model)
    assert isinstance(error, MalformedResponseError)
    assert "larger than the limit of 1048576 bytes (max_event_bytes)" in error.message
    assert f"pass a larger max_event_bytes to the Provider of {type(model).__name__}" in error.message
    assert len(error.received) == 64 * 1024
    (sent,) = loopback.wait_played(1)
    assert sent < NOT_READ_WHOLE, sent


def test_limits_default_and_are_validated(make: Any) -> None:
    model = make()
    assert (model.stream_timeout, model.max_event_bytes) == (None, DEFAULT_MAX_EVENT_BYTES) == (None, 16 * MiB)
    assert (make(stream_timeout=90).stream_timeout, make(max_event_bytes=1).max_event_bytes) == (90.0, 1)
    name = "Provider"  # the limits are the provider's, whichever model uses them
    for bad in (0, -1.0, float("inf"), float("nan"), "60", True):
        with pytest.raises(ValueError, match=f"{name} stream_timeout: expected a finite number > 0"):
            make(stream_timeout=bad)
    for bad in (0, -5, 1.5, None, "16", True):
        with pytest.raises(ValueError, match=f"{name} max_event_bytes: expected an int >= 1"):
            make(max_event_bytes=bad)
