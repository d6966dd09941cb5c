"""langchain and pydantic-ai carry `source.replay_state`, and their own Anthropic signatures become it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from interop_histories import histories

from dshkit.interop.blocks import ConversionError
from dshkit.models.anthropic.projection import anthropic_messages

FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EXPECTED_TURN = [
    {"type": "thinking", "thinking": "Add them.", "signature": "SIG+/="},
    {"type": "redacted_thinking", "data": "REDACTED=="},
    {"type": "text", "text": "Calling add."},
    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
]


@FEW
@given(histories(reasoning="plain", signed=True))
def test_langchain_and_pydantic_ai_keep_the_replay_state(messages: list[Any]) -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("pydantic_ai")
    from dshkit.interop.langchain import from_langchain, to_langchain
    from dshkit.interop.pydantic_ai import from_pydantic_ai, to_pydantic_ai

    states = [m.source.get("replay_state") for m in messages]
    assert [m.source.get("replay_state") for m in from_langchain(to_langchain(messages))] == states
    assert [m.source.get("replay_state") for m in from_pydantic_ai(to_pydantic_ai(messages))] == states


def test_a_langchain_anthropic_message_imports_its_signatures_as_replay_state() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    from dshkit.interop.langchain import from_langchain

    native = [{**block, "index": position} for position, block in enumerate(EXPECTED_TURN)]  # langchain adds "index"
    message = lc.AIMessage(content=native, tool_calls=[{"id": "toolu_1", "name": "add", "args": {"a": 1}}], id="lc-1")
    [imported] = from_langchain([message])
    assert [block["type"] for block in imported.content] == ["reasoning", "text", "tool_call"]
    assert anthropic_messages([imported])[1] == [{"role": "assistant", "content": EXPECTED_TURN}]


def test_pydantic_ai_anthropic_signatures_become_replay_state_and_others_are_refused() -> None:
    pa = pytest.importorskip("pydantic_ai.messages")
    from dshkit.interop.pydantic_ai import from_pydantic_ai

    response = pa.ModelResponse(
        parts=[
            pa.ThinkingPart(content="Add them.", signature="SIG+/=", provider_name="anthropic"),
            pa.ThinkingPart(content="", id="redacted_thinking", signature="REDACTED==", provider_name="anthropic"),
            pa.TextPart(content="Calling add."),
            pa.ToolCallPart(tool_name="add", args=json.dumps({"a": 1}), tool_call_id="toolu_1"),
        ],
        provider_name="anthropic",
    )
    [imported] = from_pydantic_ai([response])
    assert [block["type"] for block in imported.content] == ["reasoning", "text", "tool_call"]
    assert anthropic_messages([imported])[1] == [{"role": "assistant", "content": EXPECTED_TURN}]

    openai = pa.ModelResponse(parts=[pa.ThinkingPart(content="r", id="rs_1", signature="gAAAA", provider_name="openai")], provider_name="openai")
    with pytest.raises(ConversionError, match=r"pydantic_ai item 0 \(thinking signatures of \['openai'\]"):
        from_pydantic_ai([openai])
    [dropped] = from_pydantic_ai([openai], lossy=True)
    assert "replay_state" not in dropped.source and dropped.content == ({"type": "reasoning", "text": "r"},)
