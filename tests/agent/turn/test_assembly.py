"""Stream assembly (behaviour 20 of the notes, and the max-tokens rule)."""

from __future__ import annotations

import pytest

from dshkit.agent._turn.assembly import StreamAssembler
from dshkit.models import ModelError


def assemble(chunks: list[object]) -> StreamAssembler:
    assembler = StreamAssembler()
    for chunk in chunks:
        assembler.add(chunk)
    return assembler


def call(index: int, id: str | None = None, name: str | None = None, arguments: str = "") -> dict:
    return {"type": "tool_call_delta", "index": index, "id": id, "name": name, "arguments": arguments}


def test_blocks_come_out_in_first_seen_order() -> None:
    assembler = assemble(
        [
            call(1, "b", "second"),
            {"type": "text_delta", "text": "Hi"},
            call(0, "a", "first"),
            {"type": "reasoning_delta", "text": "think"},
            {"type": "text_delta", "text": " there"},
        ]
    )
    assert assembler.content() == [
        {"type": "tool_call", "id": "b", "name": "second", "arguments": ""},
        {"type": "text", "text": "Hi there"},
        {"type": "tool_call", "id": "a", "name": "first", "arguments": ""},
        {"type": "reasoning", "text": "think"},
    ]


def test_argument_fragments_concatenate_by_index() -> None:
    assembler = assemble(
        [
            call(0, "a", "read", '{"pa'),
            call(1, "b", "list", "{"),
            call(0, None, None, 'th": "x.txt"'),
            call(1, None, None, "}"),
            call(0, None, None, "}"),
        ]
    )
    calls = assembler.content()
    assert calls[0]["arguments"] == '{"path": "x.txt"}'
    assert calls[1]["arguments"] == "{}"


def test_a_call_without_an_id_is_named_after_its_index() -> None:
    assembler = assemble([call(3, None, "list", "{}")])
    assert assembler.content()[0]["id"] == "call-3"


def test_a_duplicate_start_is_ignored_first_id_and_name_win() -> None:
    assembler = assemble([call(0, "first-id", "read", "{"), call(0, "other-id", "write", "}")])
    assert assembler.content() == [{"type": "tool_call", "id": "first-id", "name": "read", "arguments": "{}"}]


def test_the_finish_is_authoritative_over_stray_deltas_after_it() -> None:
    assembler = StreamAssembler()
    assert assembler.add({"type": "text_delta", "text": "done"})
    assert assembler.add({"type": "finish", "reason": "stop"})
    assert not assembler.add({"type": "text_delta", "text": " and more"})
    assert not assembler.add(call(0, "late", "read", "{}"))
    assert not assembler.add({"type": "finish", "reason": "max_tokens"})
    assert assembler.content() == [{"type": "text", "text": "done"}]
    assert assembler.finish_reason == "stop"


def test_no_finish_chunk_means_a_normal_stop() -> None:
    assembler = assemble([{"type": "text_delta", "text": "x"}])
    assert not assembler.finished
    assert assembler.finish_reason == "stop"
    assert assembler.final_content() == [{"type": "text", "text": "x"}]


def test_max_tokens_drops_every_tool_call_even_complete_ones() -> None:
    assembler = assemble(
        [
            {"type": "text_delta", "text": "Let me look"},
            call(0, "a", "read", '{"path": "x"}'),
            call(1, "b", "read", '{"pa'),
            {"type": "finish", "reason": "max_tokens"},
        ]
    )
    assert assembler.final_content() == [{"type": "text", "text": "Let me look"}]


def test_usage_later_values_win_key_by_key() -> None:
    assembler = assemble(
        [
            {"type": "usage", "usage": {"prompt_tokens": 10, "completion_tokens": 1}},
            {"type": "usage", "usage": {"completion_tokens": 7}},
        ]
    )
    assert assembler.usage == {"prompt_tokens": 10, "completion_tokens": 7}


def test_finish_carries_replay_state_and_errors() -> None:
    assembler = assemble([{"type": "finish", "reason": "stop", "replay_state": {"k": [1]}}])
    assert assembler.replay_state == {"k": [1]}
    failed = assemble([{"type": "finish", "reason": "error", "error": {"code": "overloaded", "message": "busy"}}])
    assert failed.finish_reason == "error"
    assert failed.error == {"code": "overloaded", "message": "busy"}


def test_a_provider_finishing_aborted_is_an_error_not_a_cancellation() -> None:
    assembler = assemble([{"type": "text_delta", "text": "x"}, {"type": "finish", "reason": "aborted"}])
    assert assembler.finish_reason == "error"
    assert assembler.error is not None and assembler.error["code"] == "ABORTED"


def test_the_visible_prefix_ignores_whitespace_and_tool_calls() -> None:
    assert not assemble([]).has_visible_prefix
    assert not assemble([{"type": "text_delta", "text": " \n"}, call(0, "a", "x", "{}")]).has_visible_prefix
    assert assemble([{"type": "reasoning_delta", "text": "."}]).has_visible_prefix
    prefix = assemble([{"type": "text_delta", "text": "so"}, call(0, "a", "x", "{}")]).prefix_content()
    assert prefix == [{"type": "text", "text": "so"}]


@pytest.mark.parametrize(
    ("chunk", "match"),
    [
        ("text", "expected a chunk mapping"),
        ({"type": "text"}, "unknown chunk type 'text'"),
        ({"type": "text_delta"}, "needs a str 'text'"),
        ({"type": "reasoning_delta", "text": 3}, "needs a str 'text'"),
        ({"type": "tool_call_delta", "index": -1, "arguments": ""}, "int 'index' >= 0"),
        ({"type": "tool_call_delta", "index": True, "arguments": ""}, "int 'index' >= 0"),
        ({"type": "tool_call_delta", "index": 0, "id": 5, "arguments": ""}, "'id' must be a str"),
        ({"type": "tool_call_delta", "index": 0, "name": [], "arguments": ""}, "'name' must be a str"),
        ({"type": "tool_call_delta", "index": 0, "arguments": {}}, "'arguments' must be a str"),
        ({"type": "usage", "usage": 12}, "needs a mapping 'usage'"),
    ],
)
def test_bad_chunks_raise_model_error_naming_the_fault(chunk: object, match: str) -> None:
    with pytest.raises(ModelError, match=match) as info:
        StreamAssembler().add(chunk)
    assert info.value.code == "bad_chunk"
