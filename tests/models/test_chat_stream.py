"""Chat-completions stream events -> protocol chunks, on recorded provider shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dshkit.models.chat.stream import ChatStreamTranslator
from dshkit.models.stream_translation import map_finish_reason, usage_summary
from dshkit.models.errors import IncompleteStreamError, MalformedResponseError, ProviderStreamError
from dshkit.models.http.sse import ServerSentEvent


def ev(payload: Any, event: str = "message") -> ServerSentEvent:
    return ServerSentEvent(event=event, data=payload if isinstance(payload, str) else json.dumps(payload))


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> ServerSentEvent:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return ev({"id": "resp-1", "object": "chat.completion.chunk", "choices": [choice], **extra})


def translate(*events: ServerSentEvent) -> list[dict[str, Any]]:
    translator = ChatStreamTranslator()
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(translator.feed(event))  # type: ignore[arg-type]
    out.extend(translator.finish())  # type: ignore[arg-type]
    return out


DONE = ev("[DONE]")


def test_plain_answer() -> None:
    chunks = translate(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hello"}),
        chunk({"content": " world"}),
        chunk({}, finish="stop"),
        DONE,
    )
    assert chunks == [
        {"type": "text_delta", "text": "Hello"},
        {"type": "text_delta", "text": " world"},
        {"type": "finish", "reason": "stop", "replay_state": {"response_id": "resp-1"}},
    ]


def test_deepseek_reasoning_then_answer() -> None:
    chunks = translate(
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
        chunk({"content": None, "reasoning_content": "Think"}),
        chunk({"content": None, "reasoning_content": "ing."}),
        chunk({"content": "42", "reasoning_content": None}),
        chunk({"content": ""}, finish="stop"),
        DONE,
    )
    assert [c["type"] for c in chunks] == ["reasoning_delta", "reasoning_delta", "text_delta", "finish"]
    assert "".join(c["text"] for c in chunks if c["type"] == "reasoning_delta") == "Thinking."


def test_reasoning_field_of_openrouter_and_vllm() -> None:
    assert translate(chunk({"reasoning": "hmm"}), DONE)[0] == {"type": "reasoning_delta", "text": "hmm"}


def test_refusal_is_shown_as_text() -> None:
    assert translate(chunk({"refusal": "I can't"}), DONE)[0] == {"type": "text_delta", "text": "I can't"}


def test_parallel_tool_calls_with_fragmented_arguments() -> None:
    chunks = translate(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.txt"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": "}"}}]}),
        chunk({}, finish="tool_calls"),
        DONE,
    )
    deltas = [c for c in chunks if c["type"] == "tool_call_delta"]
    assert deltas == [
        {"type": "tool_call_delta", "index": 0, "id": "call_a", "name": "read", "arguments": ""},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": '{"pa'},
        {"type": "tool_call_delta", "index": 1, "id": "call_b", "name": "list", "arguments": "{"},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": 'th": "a.txt"}'},
        {"type": "tool_call_delta", "index": 1, "id": None, "name": None, "arguments": "}"},
    ]
    assert chunks[-1]["reason"] == "tool_calls"


def test_repeated_ids_and_names_are_not_news() -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    deltas = translate(chunk({"tool_calls": [call]}), chunk({"tool_calls": [call]}), DONE)[:2]
    assert [(d["id"], d["name"], d["arguments"]) for d in deltas] == [("c1", "f", "{}"), (None, None, "{}")]


def test_tool_calls_without_index_get_one_index_per_id() -> None:
    # Some servers send each whole call in its own chunk and leave out "index".
    deltas = translate(
        chunk({"tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": '{"x":1}'}}]}),
        chunk({"tool_calls": [{"id": "c2", "function": {"name": "b", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": " "}}]}),
        chunk({}, finish="tool_calls"),
    )[:3]
    assert [(d["index"], d["id"]) for d in deltas] == [(0, "c1"), (1, "c2"), (1, None)]


def test_arguments_sent_as_an_object_are_serialised() -> None:
    delta = translate(chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": {"a": "é"}}}]}), DONE)[0]
    assert delta["arguments"] == '{"a":"é"}'


def test_usage_after_finish_comes_before_the_finish_chunk() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 64},
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    chunks = translate(chunk({"content": "x"}), chunk({}, finish="stop"), ev({"id": "resp-1", "choices": [], "usage": usage}), DONE)
    assert chunks[-2] == {"type": "usage", "usage": usage}
    assert chunks[-1]["type"] == "finish"
    assert usage_summary(chunks[-2]["usage"]) == {
        "input_tokens": 100,
        "cached_input_tokens": 64,
        "output_tokens": 20,
        "reasoning_tokens": 12,
        "total_tokens": 120,
    }


def test_usage_summary_of_deepseek_cache_fields() -> None:
    assert usage_summary({"prompt_tokens": 9, "prompt_cache_hit_tokens": 5, "completion_tokens": 1}) == {
        "input_tokens": 9,
        "cached_input_tokens": 5,
        "output_tokens": 1,
    }


def test_a_usage_on_every_chunk_keeps_the_last() -> None:
    chunks = translate(
        chunk({"content": "a"}, usage={"completion_tokens": 1}),
        chunk({"content": "b"}, usage={"completion_tokens": 2}),
        chunk({}, finish="stop", usage=None),
        DONE,
    )
    assert [c for c in chunks if c["type"] == "usage"] == [{"type": "usage", "usage": {"completion_tokens": 2}}]


@pytest.mark.parametrize(
    ("reason", "tools", "expected"),
    [
        ("stop", False, "stop"),
        ("length", False, "max_tokens"),
        ("length", True, "max_tokens"),
        ("tool_calls", True, "tool_calls"),
        ("function_call", True, "tool_calls"),
        ("stop", True, "tool_calls"),
        ("content_filter", False, "error"),
        ("abort", False, "error"),
        ("insufficient_system_resource", False, "error"),
    ],
)
def test_finish_reasons(reason: str, tools: bool, expected: str) -> None:
    assert map_finish_reason(reason, saw_tool_calls=tools)["reason"] == expected


def test_error_finishes_say_why() -> None:
    assert map_finish_reason("abort", saw_tool_calls=False)["error"]["code"] == "ABORTED"
    assert map_finish_reason("content_filter", saw_tool_calls=False)["error"]["code"] == "content_filter"
    unknown = map_finish_reason("weird", saw_tool_calls=False)["error"]
    assert "'weird'" in unknown["message"]


def test_done_without_finish_reason_is_a_stop() -> None:
    assert translate(chunk({"content": "x"}), DONE)[-1]["reason"] == "stop"


def test_finish_reason_without_done_is_complete() -> None:
    assert translate(chunk({"content": "x"}), chunk({}, finish="length"))[-1]["reason"] == "max_tokens"


def test_events_after_done_are_ignored() -> None:
    assert translate(chunk({"content": "x"}), DONE, chunk({"content": "late"}))[:-1] == [{"type": "text_delta", "text": "x"}]


def test_empty_data_and_other_choices_are_skipped() -> None:
    other = ev({"choices": [{"index": 1, "delta": {"content": "second choice"}, "finish_reason": None}]})
    assert translate(ev(""), other, chunk({"content": "first"}), DONE)[0] == {"type": "text_delta", "text": "first"}


def test_a_stream_cut_off_is_incomplete() -> None:
    translator = ChatStreamTranslator(status=200, request_id="req-9")
    translator.feed(chunk({"content": "half"}))
    with pytest.raises(IncompleteStreamError, match="without a finish_reason or \\[DONE\\]") as caught:
        translator.finish()
    assert caught.value.request_id == "req-9"
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("data", "what"),
    [
        ("{not json", "event 1 is not JSON"),
        ("[1, 2]", "event 1 is JSON list, expected an object"),
        ('{"choices": {"0": {}}}', "'choices' is not a list"),
        ('{"choices": [{"index": 0, "delta": "text"}]}', r"choices\[0\]\.delta is not an object"),
        ('{"choices": [{"index": 0, "delta": {"content": 5}}]}', r"delta\.content is not a string"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": -1}]}}]}', "index is not a non-negative integer"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "x"}}]}}]}', "neither an index nor an id"),
        ('{"choices": [], "usage": 3}', "'usage' is not an object"),
    ],
)
def test_malformed_events_name_what_was_received(data: str, what: str) -> None:
    translator = ChatStreamTranslator(status=200, request_id="req-1")
    with pytest.raises(MalformedResponseError, match=what) as caught:
        translator.feed(ev(data))
    assert caught.value.received == data
    assert repr(data[:20])[1:-1] in str(caught.value)
    assert caught.value.code == "malformed_response"


def test_error_object_inside_the_stream() -> None:
    translator = ChatStreamTranslator(status=200, request_id="req-2")
    translator.feed(chunk({"content": "partial"}))
    with pytest.raises(ProviderStreamError, match="Upstream overloaded") as caught:
        translator.feed(ev({"error": {"message": "Upstream overloaded", "code": 502}}))
    assert caught.value.provider_code == "502"
    assert caught.value.request_id == "req-2"


def test_error_event_type() -> None:
    with pytest.raises(ProviderStreamError, match="boom"):
        ChatStreamTranslator().feed(ev('{"message": "boom"}', event="error"))
