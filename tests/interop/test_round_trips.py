"""Round trips through every format keep ids, roles, text, reasoning, tool calls and tool results.

Two directions per format: dshkit -> format -> dshkit keeps each message's essence (the id comes
back by itself where the format has an id field, from `ids=` where it has none); and
format -> dshkit -> format gives the very same foreign values (what replay needs).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from interop_histories import essence, histories

from dshkit.interop.anthropic import from_anthropic, to_anthropic
from dshkit.interop.openai_chat import from_chat_messages, to_chat_messages
from dshkit.interop.openai_responses import from_response_items, to_response_items

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


@FAST
@given(histories(reasoning="plain"))
def test_chat_round_trip(messages: list[Any]) -> None:
    chat = to_chat_messages(messages)
    back = from_chat_messages(chat, ids=_ids(messages))
    assert [essence(m) for m in back] == [essence(m) for m in messages]
    assert to_chat_messages(back) == chat


@FAST
@given(histories(reasoning="plain", signed=True))
def test_anthropic_round_trip(messages: list[Any]) -> None:
    system, params = to_anthropic(messages)
    back = from_anthropic(params, system=system, ids=_ids(messages))
    assert [essence(m) for m in back] == [essence(m) for m in messages]
    assert to_anthropic(back) == (system, params)


@FAST
@given(histories(reasoning="plain", responses_items=True))
def test_responses_round_trip(messages: list[Any]) -> None:
    items = to_response_items(messages)
    # An assistant message whose first item carries an id (rs_...) takes that id on import;
    # the others take theirs from ids= (a sequence is consumed only where no id is given).
    expected = [essence(m) for m in messages]
    given_ids = []
    for position, message in enumerate(messages):
        state = message.source.get("replay_state")
        if message.role == "assistant" and state:
            expected[position] = (state["items"][0]["id"], *expected[position][1:])
        else:
            given_ids.append(message.id)
    back = from_response_items(items, ids=given_ids)
    assert [essence(m) for m in back] == expected
    assert to_response_items(back) == items
    # Reasoning replays byte for byte: the encrypted content and item id survive.
    reasoning = [item for item in items if item["type"] == "reasoning"]
    for item in reasoning:
        assert item["id"].startswith("rs_") and isinstance(item["encrypted_content"], str)


@FAST
@given(histories(reasoning="plain", signed=True))
def test_langchain_round_trip(messages: list[Any]) -> None:
    pytest.importorskip("langchain_core")
    from dshkit.interop.langchain import from_langchain, to_langchain

    converted = to_langchain(messages)
    assert [item.id for item in converted] == _ids(messages)
    back = from_langchain(converted)
    assert [essence(m) for m in back] == [essence(m) for m in messages]
    assert to_langchain(back) == converted


@FAST
@given(histories(reasoning="plain", signed=True))
def test_pydantic_ai_round_trip(messages: list[Any]) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from dshkit.interop.pydantic_ai import from_pydantic_ai, to_pydantic_ai

    converted = to_pydantic_ai(messages)
    back = from_pydantic_ai(converted)
    assert [essence(m) for m in back] == [essence(m) for m in messages]
    # Through pydantic-ai's own JSON storage too (how its histories are usually kept).
    stored = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(converted))
    assert [essence(m) for m in from_pydantic_ai(stored)] == [essence(m) for m in messages]


def test_a_foreign_id_is_kept_and_a_missing_one_is_minted_once() -> None:
    chat = [{"role": "user", "content": "hi"}]
    first, second = from_chat_messages(chat), from_chat_messages(chat)
    assert first[0].id != second[0].id and len(first[0].id) == 26
    assert from_chat_messages(chat, ids=lambda item: "fixed-" + item["content"])[0].id == "fixed-hi"
    items = [{"type": "message", "id": "msg_abc", "role": "assistant", "status": "completed",
              "content": [{"type": "output_text", "text": "x", "annotations": []}]}]
    assert from_response_items(items)[0].id == "msg_abc"


def test_ids_sequence_that_runs_out_is_an_error() -> None:
    with pytest.raises(ValueError, match="ran out at openai_chat item 1"):
        from_chat_messages([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], ids=["only-one"])


def test_one_anthropic_message_with_two_results_becomes_two_tool_messages() -> None:
    params = [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "b", "input": {"x": 1}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "one", "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}], "is_error": True},
        ]},
    ]
    messages = from_anthropic(params, ids=lambda item: "m-" + item["role"])
    assert [m.id for m in messages] == ["m-assistant", "m-user", "m-user.1"]
    assert [m.source["call_id"] for m in messages[1:]] == ["t1", "t2"]
    assert messages[2].content[0]["is_error"] is True
    _, again = to_anthropic(messages)
    assert again[1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert again[1]["content"][1]["is_error"] is True
