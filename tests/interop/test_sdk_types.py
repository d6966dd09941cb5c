"""The produced values validate against each SDK's own types; what a format cannot say is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from interop_histories import histories

import dshkit
from dshkit.interop.anthropic import to_anthropic
from dshkit.interop.blocks import ConversionError
from dshkit.interop.openai_chat import to_chat_messages
from dshkit.interop.openai_responses import to_response_items

FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FEW
@given(histories(reasoning="plain"))
def test_chat_messages_are_chat_completion_message_params(messages: list[Any]) -> None:
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessageParam
    from pydantic import TypeAdapter

    chat = to_chat_messages(messages, system="be brief")
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(chat, strict=True)


@FEW
@given(histories(reasoning="plain", responses_items=True))
def test_response_items_are_response_input_items(messages: list[Any]) -> None:
    pytest.importorskip("openai")
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    TypeAdapter(list[ResponseInputItemParam]).validate_python(to_response_items(messages), strict=True)


@FEW
@given(histories(reasoning="plain", signed=True))
def test_anthropic_params_are_message_params(messages: list[Any]) -> None:
    pytest.importorskip("anthropic")
    from anthropic.types import MessageParam, TextBlockParam
    from pydantic import TypeAdapter

    system, params = to_anthropic(messages)
    TypeAdapter(list[MessageParam]).validate_python(params, strict=True)
    TypeAdapter(str | list[TextBlockParam] | None).validate_python(system, strict=True)


def _assistant(*blocks: dict[str, Any]) -> dshkit.Message:
    return dshkit.create_assistant_message(list(blocks), provider="p", model="m")


def test_chat_refuses_a_signature_naming_message_and_block_unless_lossy() -> None:
    user = dshkit.create_user_message("q", source={"kind": "user"})
    answer = _assistant({"type": "reasoning", "text": "r", "signature": "s"}, {"type": "text", "text": "a"})
    with pytest.raises(ConversionError, match=rf"message 1 \(id {answer.id}\) content\[0\] \(a reasoning block's 'signature'\)"):
        to_chat_messages([user, answer])
    assert to_chat_messages([user, answer], lossy=True)[1] == {"role": "assistant", "content": "a", "reasoning_content": "r"}


def test_anthropic_refuses_unsigned_reasoning_and_a_late_system_message() -> None:
    answer = _assistant({"type": "reasoning", "text": "r"}, {"type": "text", "text": "a"})
    with pytest.raises(ValueError, match=r"message 0 .* content\[0\] \(reasoning without the signature"):
        to_anthropic([answer])
    late = dshkit.create_message(role="system", content="late", source={"kind": "plugin", "plugin": "t"})
    with pytest.raises(ValueError, match=r"message 1 .*a system message after the conversation started"):
        to_anthropic([answer.with_content("a"), late])
    assert to_anthropic([answer, late], lossy=True) == (None, [{"role": "assistant", "content": [{"type": "text", "text": "a"}]}])


def test_responses_refuses_reasoning_without_its_item_and_an_error_result() -> None:
    answer = _assistant({"type": "reasoning", "text": "r"}, {"type": "tool_call", "id": "c", "name": "f", "arguments": "{}"})
    with pytest.raises(ValueError, match=r"content\[0\] \(reasoning without the Responses item id"):
        to_response_items([answer])
    failed = dshkit.create_tool_result_message("c", "boom", is_error=True)
    with pytest.raises(ValueError, match=r"message 1 .* content\[0\] \(a tool result's is_error flag\)"):
        to_response_items([answer.with_content([answer.content[1]]), failed])


def test_importing_an_unknown_block_is_refused_unless_lossy() -> None:
    from dshkit.interop.anthropic import from_anthropic
    from dshkit.interop.openai_chat import from_chat_messages

    params = [{"role": "user", "content": [{"type": "document", "source": {}}, {"type": "text", "text": "t"}]}]
    with pytest.raises(ValueError, match=r"anthropic item 0 content\[0\] \('document' block\)"):
        from_anthropic(params)
    assert from_anthropic(params, lossy=True)[0].content == ({"type": "text", "text": "t"},)
    with pytest.raises(ValueError, match="role 'function' cannot be imported"):
        from_chat_messages([{"role": "function", "name": "f", "content": "x"}])


def test_a_non_message_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="message 0: expected a dshkit Message, not dict"):
        to_chat_messages([{"role": "user", "content": "x"}])  # type: ignore[list-item]
