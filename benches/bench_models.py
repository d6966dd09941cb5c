"""Stream parsing cost per event, for each wire format, beside the vendor SDKs' own parsing.

One round parses one recorded-shape response body (bytes, as they come off the socket) into
what the caller consumes:

- `dshkit`: `SSEDecoder` + the format's translator (protocol chunks, replay state, usage).
- `openai_sdk` / `anthropic_sdk`: the SDK's own `Stream` over an `httpx.Response` holding the same
  bytes, iterated to the end (each event becomes the SDK's typed model). That is the SDK's raw
  event stream, without its higher-level accumulators (`MessageStream`, `ChatCompletionStream`),
  so the comparison is generous to the SDK.

The SDK rows are skipped when the package is not installed (`pip install openai anthropic`, the
`bench` extra). `extra_info["events"]` is the number of events per round; divide a row's time by
it for the cost per event (the report's `per` does).

`sse-decode-8mib-line` (issue 9): one event whose data line is 8 MiB, arriving in 64 KiB reads,
decoded by `SSEDecoder` beside `rejoin_per_read`, the decoder as it was before: it joined the
unterminated line with each new read (so work grew with the square of the line's length).
"""

from __future__ import annotations

import codecs
import json
from typing import Any, Callable

import httpx
import pytest

from dshkit.models.anthropic.stream import AnthropicStreamTranslator
from dshkit.models.chat.stream import ChatStreamTranslator
from dshkit.models.responses.stream import ResponsesStreamTranslator
from dshkit.models.http.sse import SSEDecoder

WORDS = 150  # text deltas per response (and as many reasoning deltas)
ARGUMENT_PIECES = 20


def _data(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _named(payload: dict[str, Any]) -> bytes:
    return b"event: " + payload["type"].encode() + b"\n" + _data(payload)


def chat_body() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _data({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
                      "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": f"thought {i} "}) for i in range(WORDS)]
    events += [chunk({"content": f"word{i} "}) for i in range(WORDS)]
    events.append(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "read", "arguments": ""}}]}))
    events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": f'"k{i}": 1, '}}]}) for i in range(ARGUMENT_PIECES)]
    events.append(chunk({}, "tool_calls"))
    events.append(_data({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m", "choices": [],
                         "usage": {"prompt_tokens": 100, "completion_tokens": 300, "total_tokens": 400}}))
    return b"".join(events) + b"data: [DONE]\n\n"


def anthropic_body() -> bytes:
    usage = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
    events = [_named({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                                                          "model": "claude", "stop_reason": None, "stop_sequence": None, "usage": usage}})]
    events.append(_named({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
    events += [_named({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": f"thought {i} "}}) for i in range(WORDS)]
    events.append(_named({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCkYIBhgC" * 8}}))
    events.append(_named({"type": "content_block_stop", "index": 0}))
    events.append(_named({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}))
    events += [_named({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": f"word{i} "}}) for i in range(WORDS)]
    events.append(_named({"type": "content_block_stop", "index": 1}))
    events.append(_named({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}}))
    events += [_named({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": f'"k{i}": 1, '}}) for i in range(ARGUMENT_PIECES)]
    events.append(_named({"type": "content_block_stop", "index": 2}))
    events.append(_named({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 300}}))
    events.append(_named({"type": "message_stop"}))
    return b"".join(events)


def responses_body() -> bytes:
    sequence = iter(range(10**6))

    def event(payload: dict[str, Any]) -> bytes:
        return _named({**payload, "sequence_number": next(sequence)})

    response = {"id": "resp_1", "object": "response", "created_at": 1700000000, "status": "in_progress", "model": "gpt", "output": []}
    events = [event({"type": "response.created", "response": response})]
    events.append(event({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}))
    part = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
    events.append(event({"type": "response.reasoning_summary_part.added", **part, "part": {"type": "summary_text", "text": ""}}))
    events += [event({"type": "response.reasoning_summary_text.delta", **part, "delta": f"thought {i} "}) for i in range(WORDS)]
    events.append(event({"type": "response.output_item.done", "output_index": 0,
                         "item": {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA" * 40}}))
    events.append(event({"type": "response.output_item.added", "output_index": 1,
                         "item": {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}}))
    where = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    events.append(event({"type": "response.content_part.added", **where, "part": {"type": "output_text", "text": "", "annotations": []}}))
    events += [event({"type": "response.output_text.delta", **where, "delta": f"word{i} ", "logprobs": []}) for i in range(WORDS)]
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read", "arguments": "", "status": "in_progress"}
    events.append(event({"type": "response.output_item.added", "output_index": 2, "item": call}))
    events += [event({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 2, "delta": f'"k{i}": 1, '}) for i in range(ARGUMENT_PIECES)]
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 300,
             "output_tokens_details": {"reasoning_tokens": 150}, "total_tokens": 400}
    events.append(event({"type": "response.completed", "response": {**response, "status": "completed", "usage": usage}}))
    return b"".join(events)


BODIES = {"chat": chat_body(), "anthropic": anthropic_body(), "responses": responses_body()}
TRANSLATORS = {"chat": ChatStreamTranslator, "anthropic": AnthropicStreamTranslator, "responses": ResponsesStreamTranslator}
EVENTS = {api: body.count(b"\n\n") for api, body in BODIES.items()}

TARGETS = [
    {"name": f"{api} stream parsing faster than the {sdk} SDK's", "group": f"stream-parse-{api}", "versus": f"{sdk}_sdk", "max_ratio": 1.0}
    for api, sdk in (("chat", "openai"), ("anthropic", "anthropic"), ("responses", "openai"))
]
TARGETS.append(
    {"name": "an 8 MiB SSE line decodes >= 3x faster than re-joining it per read", "group": "sse-decode-8mib-line",
     "versus": "rejoin_per_read", "min_speedup": 3.0}
)


def dshkit_parse(api: str) -> Callable[[], list[Any]]:
    body, translator_type = BODIES[api], TRANSLATORS[api]

    def parse() -> list[Any]:
        decoder, translator = SSEDecoder(), translator_type()
        chunks: list[Any] = []
        for event in decoder.feed(body) + decoder.close():
            chunks.extend(translator.feed(event))
            if translator.done:
                break
        chunks.extend(translator.finish())
        return chunks

    return parse


def _response(body: bytes) -> Any:
    """An HTTP response holding `body`, of the HTTP library the SDKs use (newer ones: httpx2)."""
    try:
        import httpx2 as http  # type: ignore[import-not-found]
    except ImportError:
        http = httpx
    return http.Response(200, headers={"content-type": "text/event-stream"}, content=body,
                         request=http.Request("POST", "http://127.0.0.1/v1"))


def openai_parse(api: str) -> Callable[[], list[Any]]:
    openai = pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionChunk
    from openai.types.responses import ResponseStreamEvent

    client = openai.OpenAI(api_key="sk-bench", base_url="http://127.0.0.1:9/v1")
    cast_to: Any = ChatCompletionChunk if api == "chat" else ResponseStreamEvent
    body = BODIES[api]

    def parse() -> list[Any]:
        return list(openai.Stream(cast_to=cast_to, response=_response(body), client=client))

    return parse


def anthropic_parse(api: str) -> Callable[[], list[Any]]:
    anthropic = pytest.importorskip("anthropic")
    from anthropic.types import RawMessageStreamEvent

    client = anthropic.Anthropic(api_key="sk-bench", base_url="http://127.0.0.1:9")
    body = BODIES[api]

    def parse() -> list[Any]:
        return list(anthropic.Stream(cast_to=RawMessageStreamEvent, response=_response(body), client=client))  # type: ignore[arg-type]

    return parse


ROWS = [
    ("chat", "dshkit", dshkit_parse),
    ("chat", "openai_sdk", openai_parse),
    ("anthropic", "dshkit", dshkit_parse),
    ("anthropic", "anthropic_sdk", anthropic_parse),
    ("responses", "dshkit", dshkit_parse),
    ("responses", "openai_sdk", openai_parse),
]


@pytest.mark.parametrize(("api", "row", "factory"), ROWS, ids=[f"{api}-{row}" for api, row, _ in ROWS])
def test_stream_parse(benchmark: Any, api: str, row: str, factory: Callable[[str], Callable[[], list[Any]]]) -> None:
    parse = factory(api)
    parsed = parse()
    # Checked once, outside the timing: every row really parsed the whole body.
    assert len(parsed) >= 2 * WORDS, (row, len(parsed))
    benchmark.group = f"stream-parse-{api}"
    benchmark.extra_info["events"] = EVENTS[api]
    benchmark.extra_info["row"] = row
    benchmark(parse)


# --- one long line (issue 9) ---------------------------------------------------------------------

LINE_READ = b"x" * (64 * 1024)
LINE_READS = [b"event: big\ndata: "] + [LINE_READ] * 128 + [b"\n\n"]  # 8 MiB of data in 64 KiB reads


class RejoiningSSEDecoder:
    """The line handling of `SSEDecoder` before issue 9 (data lines only): the pending line is
    concatenated with every new read, which copies the whole line each time."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._pending = ""
        self._skip_lf = False
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[str]:
        text = self._text.decode(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if "\r" in text:
            self._skip_lf = text.endswith("\r")
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = text.split("\n")
        if self._pending:
            lines[0] = self._pending + lines[0]
        self._pending = lines.pop()
        events = []
        for line in lines:
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith("data:"):
                self._data.append(line[6:] if line.startswith("data: ") else line[5:])
        return events


def _decode_long_line(decoder: Any) -> str:
    events = [event for read in LINE_READS for event in decoder.feed(read)]
    (event,) = events
    return event if isinstance(event, str) else event.data


LONG_LINE_ROWS: dict[str, Callable[[], str]] = {
    "dshkit": lambda: _decode_long_line(SSEDecoder()),
    "rejoin_per_read": lambda: _decode_long_line(RejoiningSSEDecoder()),
}


@pytest.mark.parametrize("row", sorted(LONG_LINE_ROWS))
def test_sse_decode_long_line(benchmark: Any, row: str) -> None:
    decode = LONG_LINE_ROWS[row]
    assert len(decode()) == 128 * len(LINE_READ)  # checked once, outside the timing
    benchmark.group = "sse-decode-8mib-line"
    benchmark.extra_info["row"] = row
    benchmark.pedantic(decode, rounds=5, iterations=1, warmup_rounds=1)
