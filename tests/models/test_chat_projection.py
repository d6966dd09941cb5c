"""Request -> chat-completions body: every block kind, determinism, and what cannot be sent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from dshkit import (
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
)
from dshkit.models.chat.projection import chat_body, chat_messages, chat_tools
from dshkit.models.projection_parts import UnsupportedContentError, encode_body

USER = {"kind": "user"}


@dataclass(frozen=True)
class Request:
    """The fields of a `ModelRequest` the projection reads."""

    messages: tuple[Any, ...]
    system: str | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def tool_round_trip() -> tuple[Any, ...]:
    prompt = create_user_message("List the files, then read a.txt", source=USER)
    call = create_assistant_message(
        [
            {"type": "reasoning", "text": "I should list first."},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_call", "id": "call_1", "name": "list", "arguments": "{}"},
            {"type": "tool_call", "id": "call_2", "name": "read", "arguments": '{"path": "a.txt"}'},
        ],
        provider="deepseek",
        model="deepseek-chat",
    )
    first = create_tool_result_message("call_1", "a.txt\nb.txt")
    second = create_tool_result_message("call_2", "hello", is_error=False)
    answer = create_assistant_message("a.txt says hello", provider="deepseek", model="deepseek-chat")
    return (prompt, call, first, second, answer)


def test_system_prompt_first_then_messages_in_order() -> None:
    messages = chat_messages(tool_round_trip(), system="Be brief.")
    assert messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List the files, then read a.txt"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning_content": "I should list first.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "list", "arguments": "{}"}},
                {"id": "call_2", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
        {"role": "tool", "tool_call_id": "call_2", "content": "hello"},
        {"role": "assistant", "content": "a.txt says hello"},
    ]


def test_tool_calls_without_text_have_null_content() -> None:
    message = create_assistant_message(
        [{"type": "tool_call", "id": "c", "name": "f", "arguments": ""}], provider="p", model="m"
    )
    assert chat_messages([message])[0]["content"] is None


def test_reasoning_field_is_configurable() -> None:
    message = create_assistant_message(
        [{"type": "reasoning", "text": "r"}, {"type": "text", "text": "t"}], provider="p", model="m"
    )
    assert chat_messages([message], reasoning_field="reasoning") == [{"role": "assistant", "content": "t", "reasoning": "r"}]
    assert chat_messages([message], reasoning_field=None) == [{"role": "assistant", "content": "t"}]


def test_interrupted_reasoning_only_prefix() -> None:
    message = create_assistant_message([{"type": "reasoning", "text": "half a thought"}], provider="p", model="m")
    assert chat_messages([message]) == [{"role": "assistant", "content": "", "reasoning_content": "half a thought"}]


def test_images_and_several_text_blocks_become_parts() -> None:
    message = create_user_message(
        [
            {"type": "text", "text": "What is in these?"},
            {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
            {"type": "image", "url": "https://example.com/cat.jpg", "detail": "low"},
            {"type": "text", "text": "Thanks."},
        ],
        source=USER,
    )
    assert chat_messages([message])[0]["content"] == [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg", "detail": "low"}},
        {"type": "text", "text": "Thanks."},
    ]


def test_tool_images_follow_the_run_of_tool_messages() -> None:
    call = create_assistant_message(
        [
            {"type": "tool_call", "id": "c1", "name": "shot", "arguments": "{}"},
            {"type": "tool_call", "id": "c2", "name": "echo", "arguments": "{}"},
        ],
        provider="p",
        model="m",
    )
    shot = create_tool_result_message(
        "c1", [{"type": "text", "text": "captured"}, {"type": "image", "media_type": "image/png", "data": "AAAA"}]
    )
    echo = create_tool_result_message("c2", "ok")
    roles = [(m["role"], m.get("tool_call_id")) for m in chat_messages([call, shot, echo])]
    assert roles == [("assistant", None), ("tool", "c1"), ("tool", "c2"), ("user", None)]
    assert chat_messages([call, shot, echo])[-1]["content"] == [
        {"type": "text", "text": "Images returned by tool call c1:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]


def test_empty_tool_result_and_error_result() -> None:
    assert chat_messages([create_tool_result_message("c", [])]) == [{"role": "tool", "tool_call_id": "c", "content": ""}]
    error = create_tool_result_message("c", "ValueError: boom", is_error=True)
    assert chat_messages([error]) == [{"role": "tool", "tool_call_id": "c", "content": "ValueError: boom"}]


def test_system_messages_in_the_history_stay_in_place() -> None:
    note = create_message(role="system", content="Context changed.", source={"kind": "plugin", "plugin": "x"})
    prompt = create_user_message("hi", source=USER)
    assert chat_messages([prompt, note], system="S") == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Context changed."},
    ]


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (
            lambda: create_assistant_message([{"type": "image", "url": "u"}], provider="p", model="m"),
            "'image' blocks cannot be sent in an assistant message",
        ),
        (lambda: create_user_message([{"type": "audio", "data": "x"}], source=USER), "'audio' blocks cannot be sent"),
        (
            lambda: create_assistant_message(
                [{"type": "tool_call", "id": "", "name": "f", "arguments": "{}"}], provider="p", model="m"
            ),
            "tool_call needs a non-empty 'id' and 'name'",
        ),
        (
            lambda: create_tool_result_message("c", [{"type": "document", "text": "x"}]),
            r"content\[0\]\.content\[0\]: 'document' blocks cannot be sent in a tool result",
        ),
    ],
)
def test_unsupported_blocks_name_message_and_block(message: Any, match: str) -> None:
    built = message()
    with pytest.raises(UnsupportedContentError, match=match) as caught:
        chat_messages([built])
    assert built.id in str(caught.value)


def test_tools_become_function_schemas_in_given_order() -> None:
    schema = {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}, "required": ["z"]}
    tools = chat_tools([{"name": "read", "description": "Read a file", "parameters": freeze(schema)}, {"name": "noop"}])
    assert json.loads(encode_body({"tools": tools}))["tools"] == [
        {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": schema}},
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
    ]
    # The schema's property order is what the model reads: it is kept, not sorted.
    assert list(json.loads(encode_body({"tools": tools}))["tools"][0]["function"]["parameters"]["properties"]) == ["z", "a"]


@pytest.mark.parametrize(("tools", "error"), [([{"description": "x"}], ValueError), (["read"], TypeError)])
def test_bad_tools(tools: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"request tools\[0\]"):
        chat_tools(tools)


def test_body_layout_and_call_settings() -> None:
    request = Request(
        messages=(create_user_message("hi", source=USER),),
        system="S",
        tools=({"name": "t", "description": "d", "parameters": {"type": "object"}},),
        config=freeze({"temperature": 0.2, "max_tokens": 100}),
    )
    body = chat_body(request, model="deepseek-chat")
    assert list(body) == ["model", "messages", "tools", "temperature", "max_tokens", "stream", "stream_options"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "stream_options" not in chat_body(request, model="m", include_usage=False)


def test_config_may_replace_stream_options_but_not_owned_keys() -> None:
    prompt = (create_user_message("hi", source=USER),)
    body = chat_body(Request(prompt, config={"stream_options": {"include_usage": False}}), model="m")
    assert body["stream_options"] == {"include_usage": False}
    for key in ("model", "messages", "tools", "stream"):
        with pytest.raises(ValueError, match=rf"request config\['{key}'\]"):
            chat_body(Request(prompt, config={key: 1}), model="m")


def test_same_request_gives_byte_identical_body() -> None:
    messages = tool_round_trip()
    first = encode_body(chat_body(Request(messages, system="Sé", config={"top_p": 0.9}), model="m"))
    # The same messages re-imported from their JSON (as a re-opened log gives them back).
    reimported = tuple(freeze_message(json.loads(json.dumps(m.to_dict()))) for m in messages)
    second = encode_body(chat_body(Request(reimported, system="Sé", config={"top_p": 0.9}), model="m"))
    assert first == second
    assert "Sé".encode() in first  # UTF-8, not \\u escapes
    compact = json.dumps(json.loads(first), ensure_ascii=False, separators=(",", ":")).encode()
    assert first == compact


def test_projection_mints_nothing_and_keeps_ids_out_of_the_body() -> None:
    messages = tool_round_trip()
    body = encode_body(chat_body(Request(messages), model="m"))
    for message in messages:
        assert message.id.encode() not in body


def test_lone_surrogate_is_escaped_not_a_crash() -> None:
    body = encode_body({"messages": [{"role": "user", "content": "bad \ud800 text"}]})
    assert json.loads(body)["messages"][0]["content"] == "bad \ud800 text"


def test_system_prompt_as_text_blocks() -> None:
    prompt = (create_user_message("hi", source=USER),)
    assert chat_messages(prompt, system=freeze([{"type": "text", "text": "A"}]))[0] == {"role": "system", "content": "A"}
    two = chat_messages(prompt, system=[{"type": "text", "text": "A"}, {"type": "text", "text": "B"}])[0]
    assert two == {"role": "system", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}
    assert chat_messages(prompt, system="")[0]["role"] == "user"
    with pytest.raises(UnsupportedContentError, match=r"request system\[0\]: only text blocks"):
        chat_messages(prompt, system=[{"type": "image", "url": "u"}])
    with pytest.raises(UnsupportedContentError, match="request system: expected a str"):
        chat_messages(prompt, system=42)  # type: ignore[arg-type]


def test_real_model_request_is_projected() -> None:
    from dshkit.session import ModelRequest

    request = ModelRequest(
        (create_user_message("hi", source=USER),),
        system="S",
        tools=({"name": "t", "description": "d", "parameters": {"type": "object"}},),
        config={"temperature": 0},
    )
    body = json.loads(encode_body(chat_body(request, model="m")))
    assert body["messages"][0] == {"role": "system", "content": "S"}
    assert body["tools"][0]["function"]["name"] == "t" and body["temperature"] == 0
