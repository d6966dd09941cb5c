"""`Message`: the final, immutable, four-field value; its methods; content and source rules."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
from typing import Any

import pytest

from dshkit import (
    FrozenDict,
    Message,
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
    thaw,
    to_json,
)

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)
USER = {"kind": "user"}


def assistant_with_tools() -> Message:
    return create_assistant_message(
        [
            {"type": "reasoning", "text": "look it up"},
            {"type": "text", "text": "Let me check. "},
            {"type": "tool_call", "id": "c1", "name": "grep", "arguments": '{"q": "x"}'},
            {"type": "text", "text": "And also"},
            {"type": "tool_call", "id": "c2", "name": "ls", "arguments": "{}"},
        ],
        provider="scripted",
        model="m1",
        replay_state={"opaque": [1, 2]},
    )


# --- the class -------------------------------------------------------------------------------


def test_message_cannot_be_constructed_directly() -> None:
    for attempt in (
        lambda: Message(),  # type: ignore[call-arg]
        lambda: Message("id", "user", (), {}),  # type: ignore[call-arg]
        lambda: Message(id="x", role="user", content=(), source={"kind": "user"}),  # type: ignore[call-arg]
        lambda: Message.__new__(Message),
        lambda: object.__new__(Message),
    ):
        with pytest.raises(TypeError):
            attempt()


def test_message_construction_error_points_to_the_helpers() -> None:
    with pytest.raises(TypeError, match="freeze_message"):
        Message()  # type: ignore[call-arg]


def test_message_is_final() -> None:
    with pytest.raises(TypeError):

        class Forged(Message):  # type: ignore[misc]
            pass


def test_exactly_four_fields() -> None:
    message = create_user_message("hi", source=USER)
    assert Message.__match_args__ == ("id", "role", "content", "source")
    assert not hasattr(message, "__dict__")
    assert message.to_dict().keys() == {"id", "role", "content", "source"}
    assert list(message.to_dict()) == ["id", "role", "content", "source"]


def test_field_types() -> None:
    message = create_user_message("hi", source=USER)
    assert type(message.id) is str
    assert type(message.role) is str
    assert type(message.content) is tuple
    assert all(type(block) is FrozenDict for block in message.content)
    assert type(message.source) is FrozenDict
    assert type(message.source["kind"]) is str


def test_fields_are_stored_not_rebuilt() -> None:
    message = create_user_message("hi", source=USER)
    assert message.id is message.id
    assert message.content is message.content
    assert message.source is message.source


@pytest.mark.parametrize("field", ["id", "role", "content", "source", "text", "tool_calls"])
def test_setting_or_deleting_a_field_raises_attribute_error(field: str) -> None:
    message = create_user_message("hi", source=USER)
    before = message.to_json()
    with pytest.raises(AttributeError):
        setattr(message, field, "forged")
    with pytest.raises(AttributeError):
        delattr(message, field)
    with pytest.raises(AttributeError):
        object.__setattr__(message, field, "forged")
    assert message.to_json() == before


def test_new_attributes_cannot_be_added() -> None:
    message = create_user_message("hi", source=USER)
    with pytest.raises(AttributeError):
        message.extra = 1  # type: ignore[attr-defined]


# --- value semantics -------------------------------------------------------------------------


def test_equality_and_hash_are_by_value() -> None:
    message = create_user_message([{"type": "text", "text": "hi"}], source={"kind": "user", "a": 1})
    twin = freeze_message(
        {
            "id": message.id,
            "role": "user",
            "content": [{"text": "hi", "type": "text"}],
            "source": {"a": 1, "kind": "user"},
        }
    )
    assert twin is not message
    assert twin == message and not twin != message
    assert hash(twin) == hash(message)
    assert len({message, twin}) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"id": "other"},
        {"role": "system"},
        {"content": "bye"},
        {"source": {"kind": "user", "extra": True}},
    ],
    ids=["id", "role", "content", "source"],
)
def test_any_field_difference_makes_messages_unequal(change: dict[str, Any]) -> None:
    message = create_user_message("hi", source=USER)
    other = freeze_message({**message.to_dict(), **change})
    assert other != message and not other == message


def test_same_content_created_twice_is_two_messages() -> None:
    first = create_user_message("same", source=USER)
    second = create_user_message("same", source=USER)
    assert first.id != second.id
    assert first != second


def test_message_is_not_equal_to_its_dict_form() -> None:
    message = create_user_message("hi", source=USER)
    assert message != message.to_dict()
    assert message.to_dict() != message


def test_messages_do_not_order() -> None:
    first, second = create_user_message("a", source=USER), create_user_message("b", source=USER)
    with pytest.raises(TypeError):
        first < second  # type: ignore[operator]  # noqa: B015


def test_copy_and_deepcopy_return_the_same_object() -> None:
    message = assistant_with_tools()
    assert copy.copy(message) is message
    assert copy.deepcopy(message) is message
    assert copy.deepcopy([message])[0] is message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pickle_round_trips_with_every_protocol(protocol: int) -> None:
    message = assistant_with_tools()
    back = pickle.loads(pickle.dumps(message, protocol=protocol))
    assert type(back) is Message
    assert back == message
    assert back.id == message.id
    assert hash(back) == hash(message)
    assert all(type(block) is FrozenDict for block in back.content)
    assert type(back.source["replay_state"]["opaque"]) is tuple


def test_pickle_loads_in_a_fresh_interpreter() -> None:
    message = assistant_with_tools()
    payload = pickle.dumps(message)
    script = (
        "import pickle, sys; m = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(m).__name__); print(m.to_json())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=payload, capture_output=True, check=True, timeout=60
    )
    name, text = done.stdout.decode().splitlines()
    assert name == "Message"
    assert text == message.to_json()


def test_unpickling_validates_like_freeze_message() -> None:
    message = create_user_message("hi", source=USER)
    rebuild, (fields,) = message.__reduce__()
    forged = {**dict(fields), "id": ""}
    with pytest.raises(ValueError):
        rebuild(forged)
    with pytest.raises((TypeError, ValueError)):
        rebuild({**dict(fields), "role": "tool"})
    # The reduce payload is a copy: changing it cannot reach the message.
    if isinstance(fields, dict):
        fields["id"] = "forged"
    assert message.id != "forged"


# --- match -----------------------------------------------------------------------------------


def test_match_class_patterns() -> None:
    message = create_user_message("hi", source=USER)
    match message:
        case Message(message_id, "user", ({"type": "text", "text": text},), {"kind": kind}):
            assert message_id == message.id
            assert text == "hi"
            assert kind == "user"
        case _:
            raise AssertionError("positional class pattern did not match")
    match message:
        case Message(role="assistant"):
            raise AssertionError("wrong role matched")
        case Message(role="user", source={"kind": "user"}):
            pass
        case _:
            raise AssertionError("keyword class pattern did not match")


# --- text, tool_calls, with_content ----------------------------------------------------------


def test_text_joins_the_text_blocks_only() -> None:
    """Pinned: text blocks are concatenated without a separator; other blocks are skipped."""
    message = assistant_with_tools()
    assert message.text == "Let me check. And also"
    assert create_user_message("plain", source=USER).text == "plain"
    assert create_user_message([], source=USER).text == ""
    assert create_tool_result_message("c1", "inner text").text == ""


def test_tool_calls_are_the_tool_call_blocks_in_order() -> None:
    message = assistant_with_tools()
    calls = message.tool_calls
    assert type(calls) is tuple
    assert [c["id"] for c in calls] == ["c1", "c2"]
    assert calls[0] is message.content[2] and calls[1] is message.content[4]
    assert create_user_message("no calls", source=USER).tool_calls == ()


def test_with_content_keeps_identity_and_replaces_content() -> None:
    message = assistant_with_tools()
    rewritten = message.with_content([{"type": "text", "text": "shorter"}])
    assert type(rewritten) is Message
    assert rewritten.id == message.id
    assert rewritten.role == message.role
    assert rewritten.source is message.source
    assert rewritten.content == ({"type": "text", "text": "shorter"},)
    assert rewritten != message
    assert message.text == "Let me check. And also"


def test_with_content_accepts_the_str_shorthand_and_freezes() -> None:
    message = create_user_message("a", source=USER)
    blocks = [{"type": "custom", "data": [1, {"x": [2]}]}]
    rewritten = message.with_content(blocks)
    blocks[0]["data"].append("later")  # type: ignore[attr-defined]
    assert rewritten.content == ({"type": "custom", "data": (1, {"x": (2,)})},)
    assert message.with_content("b").content == ({"type": "text", "text": "b"},)


def test_with_content_validates_like_creation() -> None:
    message = create_user_message("a", source=USER)
    with pytest.raises(TypeError, match=r"^content\[0\]\['text'\]: "):
        message.with_content([{"type": "text", "text": 1}])
    with pytest.raises(TypeError, match=r"^content\[0\]\['x'\]: set is not a JSON value$"):
        message.with_content([{"type": "custom", "x": {1}}])


def test_with_content_of_equal_content_gives_an_equal_message() -> None:
    message = create_user_message("same", source=USER)
    assert message.with_content("same") == message


# --- to_dict / to_json / from_json -----------------------------------------------------------


def test_to_dict_is_a_plain_detached_dict() -> None:
    message = assistant_with_tools()
    plain = message.to_dict()
    assert type(plain) is dict
    assert plain["id"] == message.id and plain["role"] == "assistant"
    assert type(plain["content"]) is list and all(type(b) is dict for b in plain["content"])
    assert type(plain["source"]) is dict
    assert plain["source"] == {
        "kind": "model",
        "provider": "scripted",
        "model": "m1",
        "replay_state": {"opaque": [1, 2]},
    }
    plain["content"].clear()
    plain["source"]["kind"] = "forged"
    assert len(message.content) == 5 and message.source["kind"] == "model"
    assert thaw(message) == message.to_dict()


def test_to_json_is_compact_and_parses_to_the_dict_form() -> None:
    message = create_user_message("hi", source=USER)
    text = message.to_json()
    assert type(text) is str
    assert text == (
        '{"id":"' + message.id + '","role":"user",'
        '"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}'
    )
    assert json.loads(text) == message.to_dict()
    assert to_json(message) == text


def test_from_json_imports_and_keeps_the_id() -> None:
    message = assistant_with_tools()
    back = Message.from_json(message.to_json())
    assert back == message and back.id == message.id
    assert Message.from_json(message.to_json().encode()) == message
    foreign = Message.from_json(
        '{"id":"550e8400-e29b-41d4-a716-446655440000","role":"system",'
        '"content":"be brief","source":{"kind":"plugin","plugin":"rules","form":"instructions"}}'
    )
    assert foreign.id == "550e8400-e29b-41d4-a716-446655440000"
    assert foreign.content == ({"type": "text", "text": "be brief"},)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[]", ValueError),
        ('"text"', ValueError),
        ("{", ValueError),
        ("", ValueError),
        ('{"role":"user","content":"x","source":{"kind":"user"}}', ValueError),
        ('{"id":"","role":"user","content":"x","source":{"kind":"user"}}', ValueError),
        ('{"id":1,"role":"user","content":"x","source":{"kind":"user"}}', TypeError),
        ('{"id":"a","role":"user","content":"x","source":{"kind":"user"},"extra":1}', TypeError),
        ('{"id":"a","role":"tool","content":"x","source":{"kind":"user"}}', ValueError),
    ],
)
def test_from_json_rejects_what_is_not_a_message(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        Message.from_json(text)


def test_from_json_rejects_non_text() -> None:
    with pytest.raises(TypeError):
        Message.from_json(123)  # type: ignore[arg-type]


def test_repr_names_the_fields() -> None:
    message = create_user_message("hi", source=USER)
    text = repr(message)
    assert text.startswith("Message(")
    assert repr(message.id) in text and "'user'" in text and "FrozenDict" in text


# --- content ---------------------------------------------------------------------------------


def test_str_content_is_one_text_block() -> None:
    message = create_user_message("hello", source=USER)
    assert message.content == ({"type": "text", "text": "hello"},)
    assert type(message.content[0]) is FrozenDict


def test_str_subclass_content_keeps_its_characters() -> None:
    class Shouty(str):
        def __str__(self) -> str:
            return "SOMETHING ELSE"

    message = create_user_message(Shouty("quiet"), source=USER)
    assert message.text == "quiet"
    assert type(message.content[0]["text"]) is str
    assert freeze(Shouty("quiet")) == "quiet"


def test_content_may_be_a_list_or_a_tuple_and_may_be_empty() -> None:
    block = {"type": "text", "text": "x"}
    assert create_user_message([block], source=USER).content == (block,)
    assert create_user_message((block,), source=USER).content == (block,)
    assert create_user_message([], source=USER).content == ()


@pytest.mark.parametrize("content", [None, 1, {"type": "text", "text": "x"}, b"bytes", {"a"}])
def test_content_must_be_str_or_a_sequence(content: Any) -> None:
    with pytest.raises(TypeError, match=r"^content"):
        create_user_message(content, source=USER)


KNOWN_BLOCKS = [
    {"type": "text", "text": "hello"},
    {"type": "reasoning", "text": "thinking"},
    {"type": "image", "media_type": "image/png", "data": "iVBORw0KGgo="},
    {"type": "image", "url": "https://example.com/a.png"},
    {"type": "tool_call", "id": "c1", "name": "grep", "arguments": '{"pattern": "x"}'},
    {"type": "tool_call", "id": "c1", "name": "grep", "arguments": "{not json yet"},
    {
        "type": "tool_result",
        "tool_call_id": "c1",
        "content": [{"type": "text", "text": "found"}],
        "is_error": False,
    },
    {"type": "tool_result", "tool_call_id": "c1", "content": [], "is_error": True},
]


@pytest.mark.parametrize("block", KNOWN_BLOCKS, ids=lambda b: b["type"])
def test_known_blocks_are_accepted_and_frozen(block: dict[str, Any]) -> None:
    message = create_message(role="assistant", content=[block], source={"kind": "model", "provider": "p", "model": "m"})
    assert message.content == (freeze(block),)
    assert thaw(message.content[0]) == block


def test_known_blocks_keep_extra_keys() -> None:
    """Pinned: extra keys on known blocks pass through (providers add fields)."""
    block = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    assert create_user_message([block], source=USER).content == (freeze(block),)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "custom", "payload": [1, {"deep": [True, None, 2.5]}]},
        {"type": "audio", "data": "AAAA", "format": "wav"},
        {"type": "text-but-not", "whatever": 1},
    ],
)
def test_unknown_blocks_pass_through_frozen_and_unchanged(block: dict[str, Any]) -> None:
    message = create_user_message([block], source=USER)
    assert message.content == (freeze(block),)
    assert thaw(message.content[0]) == block


BAD_BLOCKS = [
    # (block, exception type, exact message prefix)
    ("text", TypeError, "content[0]: "),
    (["type", "text"], TypeError, "content[0]: "),
    ({"text": "no type"}, ValueError, "content[0]: "),
    ({"type": 1}, TypeError, "content[0]['type']: "),
    ({"type": "text"}, ValueError, "content[0]: "),
    ({"type": "text", "text": 5}, TypeError, "content[0]['text']: "),
    ({"type": "text", "text": None}, TypeError, "content[0]['text']: "),
    ({"type": "reasoning"}, ValueError, "content[0]: "),
    ({"type": "image"}, ValueError, "content[0]: "),
    ({"type": "image", "data": "AAAA"}, ValueError, "content[0]: "),
    ({"type": "image", "url": 5}, TypeError, "content[0]['url']: "),
    ({"type": "tool_call", "name": "n", "arguments": "{}"}, ValueError, "content[0]: "),
    ({"type": "tool_call", "id": "c", "name": "n", "arguments": {"a": 1}}, TypeError, "content[0]['arguments']: "),
    ({"type": "tool_call", "id": "c", "name": "n", "arguments": {1}}, TypeError, "content[0]['arguments']: "),
    ({"type": "tool_result", "content": [], "is_error": False}, ValueError, "content[0]: "),
    ({"type": "tool_result", "tool_call_id": "c", "content": [], "is_error": 0}, TypeError, "content[0]['is_error']: "),
    ({"type": "tool_result", "tool_call_id": "c", "content": []}, ValueError, "content[0]: "),
    ({"type": "tool_result", "tool_call_id": "c", "is_error": False}, ValueError, "content[0]: "),
    ({"type": "tool_result", "tool_call_id": "c", "content": "x", "is_error": False}, TypeError, "content[0]['content']: "),
    (
        {"type": "tool_result", "tool_call_id": "c", "content": [{"type": "text", "text": 1}], "is_error": False},
        TypeError,
        "content[0]['content'][0]['text']: ",
    ),
]


@pytest.mark.parametrize(("block", "error", "prefix"), BAD_BLOCKS)
def test_bad_blocks_raise_with_the_block_path(block: Any, error: type[Exception], prefix: str) -> None:
    for position, content in ((0, [block]), (2, [{"type": "text", "text": "a"}, {"type": "x"}, block])):
        with pytest.raises(error) as caught:
            create_user_message(content, source=USER)
        assert str(caught.value).startswith(prefix.replace("[0]", f"[{position}]", 1)), str(caught.value)


def test_design_example_path_for_a_set_in_a_block() -> None:
    content = [{"type": "text", "text": "a"}, {"type": "x"}, {"type": "custom", "arguments": {1, 2}}]
    with pytest.raises(TypeError) as caught:
        create_user_message(content, source=USER)
    assert str(caught.value) == "content[2]['arguments']: set is not a JSON value"


# --- sources ---------------------------------------------------------------------------------


GOOD_SOURCES = [
    {"kind": "user"},
    {"kind": "plugin", "plugin": "rules"},
    *({"kind": "plugin", "plugin": "p", "form": form} for form in ("instructions", "catalog", "snapshot", "notice", "relay", "recall")),
    {"kind": "plugin", "plugin": "compact", "form": "snapshot", "range": [1, 5]},
    {"kind": "model", "provider": "openai", "model": "gpt"},
    {"kind": "model", "provider": "p", "model": "m", "replay_state": {"anything": [1, None]}},
    {"kind": "tool", "call_id": "c1"},
    {"kind": "webhook", "delivery": {"id": 7}},
]


@pytest.mark.parametrize("source", GOOD_SOURCES, ids=lambda s: s["kind"] + "-" + str(s.get("form", "")))
def test_sources_are_accepted_and_frozen(source: dict[str, Any]) -> None:
    message = create_message(role="user", content="x", source=source)
    assert message.source == freeze(source)
    assert type(message.source) is FrozenDict
    assert thaw(message.source) == source


BAD_SOURCES = [
    ("user", TypeError, "source"),
    ([("kind", "user")], TypeError, "source"),
    (None, TypeError, ""),
    ({}, ValueError, "source"),
    ({"kind": 1}, TypeError, "source['kind']"),
    ({"kind": "user", "x": {1}}, TypeError, "source['x']"),
    ({"kind": "plugin"}, ValueError, "source"),
    ({"kind": "plugin", "plugin": 3}, TypeError, "source['plugin']"),
    ({"kind": "plugin", "plugin": "p", "form": "poster"}, ValueError, "source['form']"),
    ({"kind": "model", "provider": "p"}, ValueError, "source"),
    ({"kind": "model", "model": "m"}, ValueError, "source"),
    ({"kind": "tool"}, ValueError, "source"),
    ({"kind": "tool", "call_id": 1}, TypeError, "source['call_id']"),
]


@pytest.mark.parametrize(("source", "error", "path"), BAD_SOURCES)
def test_bad_sources_raise_with_a_source_path(source: Any, error: type[Exception], path: str) -> None:
    with pytest.raises(error) as caught:
        create_user_message("x", source=source)
    if path:
        assert str(caught.value).startswith(path + ":"), str(caught.value)


# --- roles -----------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_the_three_roles(role: str) -> None:
    message = create_message(role=role, content="x", source=USER)  # type: ignore[arg-type]
    assert message.role == role


@pytest.mark.parametrize(
    ("role", "error"), [("tool", ValueError), ("User", ValueError), ("", ValueError), (1, TypeError), (b"user", TypeError)]
)
def test_other_roles_are_refused(role: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^role: "):
        create_message(role=role, content="x", source=USER)


class _Text(str):
    """A `str` subclass: its text is not stored in the object the way a plain ASCII `str`'s is."""


@pytest.mark.parametrize("role", [_Text("user"), _Text("assistant")])
def test_a_role_given_as_a_str_subclass_is_read_by_its_text(role: str) -> None:
    message = create_message(role=role, content="x", source=USER)  # type: ignore[arg-type]
    assert message.role == str(role) and type(message.role) is str


@pytest.mark.parametrize("role", ["usér", _Text("usér"), "\u00fcser"])
def test_a_non_ascii_role_is_refused_naming_it(role: str) -> None:
    with pytest.raises(ValueError, match=r"^role: must be 'system', 'user' or 'assistant', not "):
        create_message(role=role, content="x", source=USER)  # type: ignore[arg-type]


def test_a_role_without_utf8_form_is_refused() -> None:
    with pytest.raises(UnicodeEncodeError):
        create_message(role="\ud800", content="x", source=USER)  # type: ignore[arg-type]


def test_role_none_is_refused() -> None:
    with pytest.raises(TypeError, match="role"):
        create_message(role=None, content="x", source=USER)  # type: ignore[arg-type]


def test_one_models_answers_share_their_source() -> None:
    """A history of one model's answers holds one source `FrozenDict`, not one per message: a
    frozen value, so sharing it shows only to `is`."""
    first = create_assistant_message("a", provider="openai", model="gpt-x")
    second = create_assistant_message("b", provider="openai", model="".join(["gpt", "-x"]))
    assert second.source is first.source
    assert second.source == {"kind": "model", "provider": "openai", "model": "gpt-x"}
    other = create_assistant_message("c", provider="openai", model="gpt-y")
    assert other.source is not first.source and other.source["model"] == "gpt-y"
    stateful = create_assistant_message("d", provider="openai", model="gpt-y", replay_state={"r": 1})
    assert stateful.source is not other.source and stateful.source["replay_state"] == {"r": 1}


def test_a_str_subclass_provider_is_frozen_as_before_not_shared() -> None:
    class Name(str):
        pass

    plain = create_assistant_message("a", provider="p", model="m")
    subclassed = create_assistant_message("b", provider=Name("p"), model="m")
    assert subclassed.source == plain.source and type(subclassed.source["provider"]) is str
    with pytest.raises(TypeError, match="provider"):
        create_assistant_message("c", provider=1, model="m")
    assert create_assistant_message("d", provider="p", model="m").source == plain.source


def test_a_message_object_is_80_bytes() -> None:
    """Four references, the depth and an 8-byte cached hash (it was 88 with a 16-byte one)."""
    message = create_user_message("hi", source=USER)
    assert sys.getsizeof(message) <= 80
    assert hash(message) == hash(freeze_message(message.to_dict()))
