"""`Message.from_json` parses straight into a `Message` (no intermediate mapping): it must accept
and refuse exactly what `freeze_message(from_json(text))` does, with the same errors, and
`to_json_bytes` must be the UTF-8 of `to_json`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dshkit import (
    Message,
    create_assistant_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
    from_json,
    to_json,
    to_json_bytes,
)

USER = {"kind": "user"}


def outcome(load: Any, text: str | bytes) -> tuple[str, Any]:
    """What loading `text` gives: the message's fields, or the exception's type and message."""
    try:
        message = load(text)
    except (TypeError, ValueError) as error:
        return type(error).__name__, str(error)
    return "ok", (message.id, message.role, message.content, message.source)


def two_pass(text: str | bytes) -> Message:
    return freeze_message(from_json(text))


def message_text(**fields: Any) -> str:
    return json.dumps({"id": "m-1", "role": "user", "content": "hi", "source": USER} | fields)


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        (message_text(role="tool"), ValueError, "role: must be 'system', 'user' or 'assistant', not \"tool\""),
        (message_text(role=1), TypeError, "role: must be str, not int"),
        (message_text(id=""), ValueError, "id: must be a non-empty str"),
        (message_text(id=7), TypeError, "id: must be a non-empty str, not int"),
        (message_text(content=5), TypeError, "content: must be a str or a sequence of content blocks, not int"),
        (message_text(content={"type": "text"}), TypeError, "content: must be a str or a sequence of content blocks, not FrozenDict"),
        (message_text(content=[1]), TypeError, "content[0]: a content block must be a mapping, not int"),
        (message_text(content=[{"text": "x"}]), ValueError, "content[0]: a content block is missing the str field 'type'"),
        (message_text(content=[{"type": "text"}]), ValueError, "content[0]: a 'text' block is missing the str field 'text'"),
        (message_text(content=[{"type": "text", "text": 3}]), TypeError, "content[0]['text']: must be str, not int"),
        (
            message_text(content=[{"type": "text", "text": "a"}, {"type": "image"}]),
            ValueError,
            "content[1]: an 'image' block needs 'url', both 'media_type' and 'data' (base64), or an 'attachment'",
        ),
        (
            message_text(content=[{"type": "tool_result", "tool_call_id": "c", "is_error": False, "content": [{"type": "reasoning"}]}]),
            ValueError,
            "content[0]['content'][0]: a 'reasoning' block is missing the str field 'text'",
        ),
        (
            message_text(content=[{"type": "tool_result", "tool_call_id": "c", "is_error": 0, "content": []}]),
            TypeError,
            "content[0]['is_error']: must be bool, not int",
        ),
        (message_text(source="user"), TypeError, "source: must be a mapping with a str 'kind', not str"),
        (message_text(source={}), ValueError, "source: a message source is missing the str field 'kind'"),
        (message_text(source={"kind": "model", "provider": "p"}), ValueError, "source: a 'model' source is missing the str field 'model'"),
        (message_text(source={"kind": "plugin", "plugin": "p", "form": "x"}), ValueError, "source['form']: must be one of"),
        (message_text(extra=1), TypeError, "freeze_message(): unknown key 'extra' (a message has exactly id, role, content and source)"),
        ('{"role": "user"}', ValueError, "id: the message has no id"),
        ('{"id": "m"}', ValueError, "role: the message has no role"),
        ('{"id": "m", "role": "user"}', ValueError, "content: the message has no content"),
        ('{"id": "m", "role": "user", "content": "x"}', ValueError, "source: the message has no source"),
        ("[]", ValueError, "Message.from_json() needs a JSON object, got tuple"),
        ('"m"', ValueError, "Message.from_json() needs a JSON object, got str"),
        ("null", ValueError, "Message.from_json() needs a JSON object, got NoneType"),
        ("1.5", ValueError, "Message.from_json() needs a JSON object, got float"),
        ('{"id": "m", "role": "tool",}', ValueError, "invalid JSON: trailing comma at line 1 column 28"),
        ('{"id": "m", "role": "tool"} x', ValueError, "invalid JSON: trailing characters at line 1 column 29"),
        ('{"id" "m"}', ValueError, "invalid JSON: expected `:` at line 1 column 7"),
        ("{1: 2}", ValueError, "invalid JSON: key must be a string at line 1 column 2"),
        ('{"id": "m", "role": "user"', ValueError, "invalid JSON: EOF while parsing an object at line 1 column 27"),
    ],
)
def test_bad_message_json_names_what_and_where(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        Message.from_json(text)
    assert str(caught.value).startswith(message)
    if text.startswith("{"):  # freeze_message names a non-mapping in its own words
        assert outcome(Message.from_json, text) == outcome(two_pass, text)
    assert outcome(Message.from_json, text.encode()) == outcome(Message.from_json, text)


def test_nesting_deeper_than_the_limit_is_refused_where_it_passes_it() -> None:
    deep = "[" * 300 + "]" * 300
    text = '{"id": "m", "role": "user", "source": {"kind": "user"}, "content": [{"type": "x", "deep": ' + deep + "}]}"
    with pytest.raises(ValueError, match=r"^invalid JSON: nesting deeper than 256 levels at line 1 column \d+$"):
        Message.from_json(text)
    assert outcome(Message.from_json, text) == outcome(two_pass, text)


def test_a_message_at_the_depth_limit_loads() -> None:
    # message object > content > block > 253 arrays: 256 levels.
    deep = "[" * 253 + "]" * 253
    text = '{"id": "m", "role": "user", "source": {"kind": "user"}, "content": [{"type": "x", "deep": ' + deep + "}]}"
    message = Message.from_json(text)
    assert message == two_pass(text)
    assert Message.from_json(message.to_json()) == message


def test_a_syntax_error_wins_over_a_field_error_as_before() -> None:
    text = '{"id": "", "role": "tool", "content": 5, "source": 1, "x": [}'
    assert outcome(Message.from_json, text)[1].startswith("invalid JSON: expected value at line 1 column ")
    assert outcome(Message.from_json, text) == outcome(two_pass, text)


def test_repeated_fields_keep_the_last_value() -> None:
    text = '{"role": "tool", "id": "m", "content": 5, "source": {"kind": "user"}, "role": "user", "content": "ok"}'
    message = Message.from_json(text)
    assert (message.id, message.role, message.text) == ("m", "user", "ok")
    assert outcome(Message.from_json, text) == outcome(two_pass, text)


def test_the_first_unknown_key_is_named_even_when_others_follow() -> None:
    text = '{"b": 1, "id": "m", "a": 2, "b": 3}'
    assert outcome(Message.from_json, text) == (
        "TypeError",
        "freeze_message(): unknown key 'b' (a message has exactly id, role, content and source)",
    )
    assert outcome(Message.from_json, text) == outcome(two_pass, text)


def test_field_names_written_with_escapes_are_the_same_fields() -> None:
    text = '{"\\u0069d": "m", "r\\u006fle": "user", "content": "hi", "source": {"kind": "user"}}'
    assert Message.from_json(text) == freeze_message({"id": "m", "role": "user", "content": "hi", "source": USER})


def test_loaded_parts_are_frozen_and_the_message_round_trips() -> None:
    messages = [
        create_user_message("hello é 😀", source=USER),
        create_assistant_message(
            [{"type": "reasoning", "text": "r"}, {"type": "tool_call", "id": "c", "name": "n", "arguments": "{}"}],
            provider="p",
            model="m",
            replay_state={"items": [1, 2.5, None, True]},
        ),
        create_tool_result_message("c", [{"type": "text", "text": "out\n\"quoted\""}], is_error=True),
    ]
    for message in messages:
        loaded = Message.from_json(message.to_json())
        assert loaded == message and loaded.id == message.id
        assert loaded.content == freeze(loaded.content)
        assert Message.from_json(message.to_json_bytes()) == message


JSON_LEAVES = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["type", "text", "id", "kind", "x"]), inner, max_size=4),
    max_leaves=12,
)
FIELD_VALUES = {
    "id": st.sampled_from(["m-1", ""]) | JSON_VALUES,
    "role": st.sampled_from(["user", "assistant", "tool"]) | JSON_VALUES,
    "content": st.sampled_from(["hi", [{"type": "text", "text": "t"}]]) | JSON_VALUES,
    "source": st.sampled_from([USER, {"kind": "model", "provider": "p", "model": "m"}]) | JSON_VALUES,
}


@given(
    fields=st.lists(
        st.sampled_from([*FIELD_VALUES, "extra"]).flatmap(
            lambda key: st.tuples(st.just(key), FIELD_VALUES.get(key, JSON_VALUES))
        ),
        max_size=6,
    )
)
def test_one_pass_and_two_pass_loads_agree(fields: list[tuple[str, Any]]) -> None:
    # Written by hand so that repeated keys stay in the text.
    text = "{" + ",".join(f"{json.dumps(key)}:{json.dumps(value)}" for key, value in fields) + "}"
    assert outcome(Message.from_json, text) == outcome(two_pass, text)


@pytest.mark.parametrize(
    "value",
    [
        {"rows": [1, 2.5, None, True, False], "text": 'a"b\\c\n\u0001é😀'},
        [freeze({"nested": [[{"k": "v"}]]}), (1, "x")],
        "plain",
        -(2**63),
    ],
)
def test_to_json_bytes_is_the_utf8_of_to_json(value: Any) -> None:
    assert to_json_bytes(value) == to_json(value).encode()
    assert to_json_bytes(freeze(value)) == to_json(freeze(value)).encode()
    assert type(to_json_bytes(value)) is bytes


def test_message_to_json_bytes_is_the_utf8_of_to_json() -> None:
    message = create_user_message("héllo", source=USER)
    assert message.to_json_bytes() == message.to_json().encode() == to_json_bytes(message)


def test_to_json_bytes_names_the_path_of_a_bad_value() -> None:
    with pytest.raises(ValueError, match=r"^value\['a'\]\[1\]: str is not valid UTF-8"):
        to_json_bytes({"a": ["ok", "\ud800"]})
    with pytest.raises(TypeError, match=r"^value\['a'\]: set is not a JSON value"):
        to_json_bytes({"a": {1}})
