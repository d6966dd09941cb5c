"""Creation helpers (mint an id) versus `freeze_message` (import an id), and the ADR properties."""

from __future__ import annotations

import inspect
import re
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import dshkit
import dshkit.llm
from support import PlainMapping, traced_allocation
from dshkit import (
    FrozenDict,
    Message,
    MessageId,
    create_assistant_message,
    create_message,
    create_tool_result_message,
    create_user_message,
    freeze,
    freeze_message,
)

ULID_PATTERN = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")
USER = {"kind": "user"}
P = inspect.Parameter


def walk_containers(value: Any) -> Iterator[Any]:
    """Every container node of a frozen tree (FrozenDicts and tuples), root included."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, FrozenDict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, tuple):
            yield node
            stack.extend(node)


# --- signatures ------------------------------------------------------------------------------


EXPECTED_SIGNATURES = {
    "create_message": [
        ("role", P.KEYWORD_ONLY, P.empty),
        ("content", P.KEYWORD_ONLY, P.empty),
        ("source", P.KEYWORD_ONLY, P.empty),
    ],
    "create_user_message": [
        ("content", P.POSITIONAL_OR_KEYWORD, P.empty),
        ("source", P.KEYWORD_ONLY, P.empty),
    ],
    "create_assistant_message": [
        ("content", P.POSITIONAL_OR_KEYWORD, P.empty),
        ("provider", P.KEYWORD_ONLY, P.empty),
        ("model", P.KEYWORD_ONLY, P.empty),
        ("replay_state", P.KEYWORD_ONLY, None),
    ],
    "create_tool_result_message": [
        ("call_id", P.POSITIONAL_OR_KEYWORD, P.empty),
        ("content", P.POSITIONAL_OR_KEYWORD, P.empty),
        ("is_error", P.KEYWORD_ONLY, False),
    ],
}


@pytest.mark.parametrize("name", EXPECTED_SIGNATURES)
def test_creation_helpers_have_the_design_signatures(name: str) -> None:
    """DESIGN section 2 signatures; a trailing **kwargs (used to explain refusals) is tolerated."""
    signature = inspect.signature(getattr(dshkit, name))
    params = [p for p in signature.parameters.values() if p.kind is not P.VAR_KEYWORD]
    assert [(p.name, p.kind, p.default) for p in params] == EXPECTED_SIGNATURES[name], str(signature)


def test_freeze_message_takes_one_positional_argument() -> None:
    params = list(inspect.signature(freeze_message).parameters.values())
    assert [(p.name, p.kind) for p in params] == [("message", P.POSITIONAL_ONLY)]


def test_call_forms() -> None:
    assert create_user_message(content="x", source=USER).text == "x"
    assert create_tool_result_message(call_id="c", content="x").source["call_id"] == "c"
    with pytest.raises(TypeError):
        create_user_message("x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        create_user_message("x", USER)  # type: ignore[misc]
    with pytest.raises(TypeError):
        create_message("user", "x", USER)  # type: ignore[misc]
    with pytest.raises(TypeError):
        create_message(role="user", content="x")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        create_assistant_message("x", provider="p")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        create_tool_result_message("c")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        create_tool_result_message("c", "x", False)  # type: ignore[misc]


# --- refusals that point to freeze_message ---------------------------------------------------


REFUSED = {
    "create_message id": lambda: create_message(role="user", content="x", source=USER, id="m1"),
    "create_user_message id": lambda: create_user_message("x", source=USER, id="m1"),
    "create_user_message role": lambda: create_user_message("x", source=USER, role="user"),
    "create_assistant_message id": lambda: create_assistant_message("x", provider="p", model="m", id="m1"),
    "create_assistant_message role": lambda: create_assistant_message("x", provider="p", model="m", role="assistant"),
    "create_assistant_message source": lambda: create_assistant_message(
        "x", provider="p", model="m", source={"kind": "model", "provider": "p", "model": "m"}
    ),
    "create_assistant_message kind": lambda: create_assistant_message("x", provider="p", model="m", kind="model"),
    "create_tool_result_message id": lambda: create_tool_result_message("c", "x", id="m1"),
    "create_tool_result_message role": lambda: create_tool_result_message("c", "x", role="user"),
    "create_tool_result_message source": lambda: create_tool_result_message(
        "c", "x", source={"kind": "tool", "call_id": "c"}
    ),
}


@pytest.mark.parametrize("attempt", REFUSED.values(), ids=REFUSED.keys())
def test_helpers_refuse_ids_and_what_they_fix_pointing_to_freeze_message(attempt: Any) -> None:
    with pytest.raises(TypeError, match="freeze_message"):
        attempt()


def test_an_id_given_as_none_is_refused_too() -> None:
    with pytest.raises(TypeError, match="freeze_message"):
        create_user_message("x", source=USER, id=None)  # type: ignore[call-arg]


def test_an_unknown_keyword_is_a_plain_type_error() -> None:
    with pytest.raises(TypeError, match="colour"):
        create_user_message("x", source=USER, colour="red")  # type: ignore[call-arg]


# --- what the helpers build ------------------------------------------------------------------


def test_create_message_mints_and_freezes() -> None:
    content = [{"type": "text", "text": "rules"}]
    source = {"kind": "plugin", "plugin": "rules", "form": "instructions"}
    message = create_message(role="system", content=content, source=source)
    assert ULID_PATTERN.fullmatch(message.id)
    assert message.role == "system"
    assert message.content == ({"type": "text", "text": "rules"},)
    assert message.source == source


def test_create_user_message() -> None:
    message = create_user_message("hello there", source=USER)
    assert message.role == "user"
    assert message.content == ({"type": "text", "text": "hello there"},)
    assert message.source == {"kind": "user"}
    assert ULID_PATTERN.fullmatch(message.id)


def test_create_assistant_message_builds_a_model_source() -> None:
    message = create_assistant_message("answer", provider="openai", model="gpt-x")
    assert message.role == "assistant"
    assert message.source == {"kind": "model", "provider": "openai", "model": "gpt-x"}
    assert "replay_state" not in message.source  # pinned: None means no key
    assert list(message.source) == ["kind", "provider", "model"]


def test_create_assistant_message_freezes_replay_state() -> None:
    state = {"tokens": [1, 2], "cache": {"k": "v"}}
    message = create_assistant_message("answer", provider="p", model="m", replay_state=state)
    state["tokens"].append(3)  # type: ignore[attr-defined]
    assert message.source["replay_state"] == {"tokens": (1, 2), "cache": {"k": "v"}}
    assert type(message.source["replay_state"]) is FrozenDict
    assert create_assistant_message("a", provider="p", model="m", replay_state="opaque").source[
        "replay_state"
    ] == "opaque"


def test_create_assistant_message_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"\['provider'\]|provider"):
        create_assistant_message("a", provider=1, model="m")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"replay_state"):
        create_assistant_message("a", provider="p", model="m", replay_state={"x": {1}})
    with pytest.raises(ValueError, match=r"replay_state"):
        create_assistant_message("a", provider="p", model="m", replay_state=[float("nan")])


def test_create_tool_result_message_builds_one_tool_result_block() -> None:
    message = create_tool_result_message("call_7", "42 files")
    assert message.role == "user"
    assert message.source == {"kind": "tool", "call_id": "call_7"}
    assert message.content == (
        {
            "type": "tool_result",
            "tool_call_id": "call_7",
            "content": ({"type": "text", "text": "42 files"},),
            "is_error": False,
        },
    )
    assert len(message.content) == 1
    failed = create_tool_result_message("call_8", [{"type": "text", "text": "boom"}], is_error=True)
    assert failed.content[0]["is_error"] is True
    assert failed.content[0]["content"] == ({"type": "text", "text": "boom"},)


@pytest.mark.parametrize(
    ("call_id", "content", "kwargs", "error"),
    [
        (1, "x", {}, TypeError),
        (None, "x", {}, TypeError),
        ("", "x", {}, ValueError),
        ("c", "x", {"is_error": 1}, TypeError),
        ("c", "x", {"is_error": "yes"}, TypeError),
        ("c", "x", {"is_error": None}, TypeError),
        ("c", {"type": "text", "text": "x"}, {}, TypeError),
        ("c", [{"type": "text"}], {}, ValueError),
    ],
)
def test_create_tool_result_message_bad_arguments(
    call_id: Any, content: Any, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        create_tool_result_message(call_id, content, **kwargs)


# --- freeze_message --------------------------------------------------------------------------


def test_freeze_message_of_a_message_returns_the_same_object_without_allocating() -> None:
    message = create_user_message("hi", source=USER)
    assert freeze_message(message) is message
    calls = 2_000
    results: list[Any] = [None] * calls

    def call_repeatedly() -> None:
        for i in range(calls):
            results[i] = freeze_message(message)

    kept, peak = traced_allocation(call_repeatedly)
    assert all(r is message for r in results)
    assert kept < 1_000
    assert peak < 4_000


@pytest.mark.parametrize(
    "imported_id",
    [
        "550e8400-e29b-41d4-a716-446655440000",
        str(uuid.uuid4()),
        "msg-1",
        "tool-result:call_7:seq-12",
        "01ARZ3NDEKTSV4RRFFQ69G5FAV",
        "01arz3ndektsv4rrffq69g5fav",
        " padded ",
        "ид",
        "x",
        "a" * 1_000,
    ],
)
def test_freeze_message_keeps_any_non_empty_str_id_verbatim(imported_id: str) -> None:
    message = freeze_message({"id": imported_id, "role": "user", "content": "x", "source": USER})
    assert message.id == imported_id
    assert type(message.id) is str


def test_freeze_message_of_a_mapping_freezes_and_detaches() -> None:
    fields = {
        "id": "m-1",
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}, {"type": "custom", "rows": [[1, 2]]}],
        "source": {"kind": "model", "provider": "p", "model": "m", "replay_state": {"s": [1]}},
    }
    message = freeze_message(fields)
    fields["content"][1]["rows"][0].append(3)  # type: ignore[index]
    fields["source"]["replay_state"]["s"].append(2)  # type: ignore[index]
    fields["id"] = "changed"
    assert message.id == "m-1"
    assert message.content[1]["rows"] == ((1, 2),)
    assert message.source["replay_state"] == {"s": (1,)}


@pytest.mark.parametrize(
    "mapping_type",
    [dict, FrozenDict, types.MappingProxyType, PlainMapping, freeze],
    ids=["dict", "FrozenDict", "mappingproxy", "custom", "freeze"],
)
def test_freeze_message_accepts_any_mapping(mapping_type: Any) -> None:
    message = freeze_message(mapping_type({"id": "m", "role": "user", "content": "x", "source": USER}))
    assert message.id == "m" and message.text == "x"


def test_freeze_message_of_to_dict_is_equal() -> None:
    original = create_assistant_message(
        [{"type": "tool_call", "id": "c", "name": "n", "arguments": "{}"}], provider="p", model="m"
    )
    assert freeze_message(original.to_dict()) == original


@pytest.mark.parametrize(
    ("fields", "error", "needle"),
    [
        ({"role": "user", "content": "x", "source": USER}, ValueError, "id"),
        ({"id": "", "role": "user", "content": "x", "source": USER}, ValueError, "id"),
        ({"id": None, "role": "user", "content": "x", "source": USER}, TypeError, "id"),
        ({"id": 7, "role": "user", "content": "x", "source": USER}, TypeError, "id"),
        ({"id": b"m", "role": "user", "content": "x", "source": USER}, TypeError, "id"),
        ({"id": "m", "content": "x", "source": USER}, ValueError, "role"),
        ({"id": "m", "role": "user", "source": USER}, ValueError, "content"),
        ({"id": "m", "role": "user", "content": "x"}, ValueError, "source"),
        ({"id": "m", "role": "tool", "content": "x", "source": USER}, ValueError, "role"),
        ({"id": "m", "role": "user", "content": "x", "source": USER, "extra": 1}, TypeError, "extra"),
        ({"id": "m", "role": "user", "content": "x", "source": USER, "ID": "m"}, TypeError, "ID"),
        ({"id": "m", "role": "user", "content": "x", "source": USER, 1: "x"}, TypeError, "1"),
        ({"id": "m", "role": "user", "content": [{"type": "text", "text": {1}}], "source": USER}, TypeError, "content[0]['text']"),
    ],
)
def test_freeze_message_rejects_bad_mappings(fields: dict[Any, Any], error: type[Exception], needle: str) -> None:
    with pytest.raises(error) as caught:
        freeze_message(fields)
    assert needle in str(caught.value)


@pytest.mark.parametrize("value", [None, "m", 1, [("id", "m")], ("id", "m"), object()])
def test_freeze_message_rejects_non_mappings(value: Any) -> None:
    with pytest.raises(TypeError, match="freeze_message"):
        freeze_message(value)


def test_freeze_message_id_subclass_becomes_a_plain_str() -> None:
    class Tagged(str):
        pass

    message = freeze_message({"id": Tagged("m-9"), "role": "user", "content": "x", "source": USER})
    assert type(message.id) is str and message.id == "m-9"


# --- names -----------------------------------------------------------------------------------


CAMEL_CASE = {
    "createMessage": "create_message",
    "createUserMessage": "create_user_message",
    "createAssistantMessage": "create_assistant_message",
    "createToolResultMessage": "create_tool_result_message",
    "freezeMessage": "freeze_message",
}


@pytest.mark.parametrize(("camel", "snake"), CAMEL_CASE.items())
def test_camel_case_aliases_are_the_same_objects(camel: str, snake: str) -> None:
    assert getattr(dshkit, camel) is getattr(dshkit, snake)
    assert getattr(dshkit.llm, camel) is getattr(dshkit.llm, snake)
    assert getattr(dshkit, snake) is getattr(dshkit.llm, snake)


def test_message_id_is_a_newtype_of_str() -> None:
    assert MessageId is dshkit.llm.MessageId
    assert isinstance(MessageId, typing.NewType)
    assert MessageId.__supertype__ is str
    assert MessageId("abc") == "abc" and type(MessageId("abc")) is str


SECTION_2_NAMES = {
    "FrozenDict",
    "Message",
    "MessageId",
    "new_message_id",
    "freeze",
    "thaw",
    "to_json",
    "from_json",
    "json_default",
    "create_message",
    "create_user_message",
    "create_assistant_message",
    "create_tool_result_message",
    "freeze_message",
    *CAMEL_CASE,
}


def test_dshkit_reexports_the_whole_vocabulary() -> None:
    for name in SECTION_2_NAMES:
        assert getattr(dshkit, name) is getattr(dshkit.llm, name), name
    assert SECTION_2_NAMES <= set(dshkit.__all__)
    assert SECTION_2_NAMES <= set(dshkit.llm.__all__)


def test_native_types_pickle_under_an_importable_module() -> None:
    for cls in (Message, FrozenDict):
        module = __import__(cls.__module__, fromlist=[cls.__name__])
        assert getattr(module, cls.__name__) is cls


# --- the ADR's pinned properties -------------------------------------------------------------


def test_identity_exists_at_creation() -> None:
    """The id exists the moment the helper returns, before any routing or logging."""
    made = [
        create_message(role="system", content="s", source={"kind": "plugin", "plugin": "p"}),
        create_user_message("u", source=USER),
        create_assistant_message("a", provider="p", model="m"),
        create_tool_result_message("c", "r"),
    ]
    ids = [m.id for m in made]
    assert all(ULID_PATTERN.fullmatch(i) for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_detachment_at_creation() -> None:
    content = [{"type": "custom", "rows": [{"a": [1]}]}]
    source = {"kind": "plugin", "plugin": "p", "meta": {"tags": ["x"]}}
    message = create_user_message(content, source=source)
    snapshot = message.to_json()
    content[0]["rows"][0]["a"].append(2)  # type: ignore[index]
    content.append({"type": "text", "text": "late"})
    source["meta"]["tags"].append("y")  # type: ignore[index]
    source["kind"] = "user"
    assert message.to_json() == snapshot


def test_deep_immutability_at_every_level() -> None:
    message = create_assistant_message(
        [
            {"type": "text", "text": "a"},
            {"type": "custom", "deep": {"l1": [{"l2": [{"l3": "leaf"}]}]}},
        ],
        provider="p",
        model="m",
        replay_state={"s": [[1], {"k": [2]}]},
    )
    snapshot = message.to_json()
    containers = list(walk_containers(message.content)) + list(walk_containers(message.source))
    assert len(containers) > 10
    for node in containers:
        assert type(node) in (tuple, FrozenDict)
        if type(node) is FrozenDict:
            for attempt in (
                lambda: node.__setitem__("k", 1),
                lambda: node.__delitem__(next(iter(node), "k")),
                lambda: node.update(k=1),
                lambda: node.clear(),
                lambda: node.pop("k", None),
                lambda: node.setdefault("k", 1),
                lambda: node.popitem(),
            ):
                with pytest.raises(TypeError):
                    attempt()
        else:
            with pytest.raises(TypeError):
                node[0] = 1  # type: ignore[index]
            assert not hasattr(node, "append")
    assert message.to_json() == snapshot


def test_an_imported_id_is_kept_through_every_boundary() -> None:
    imported = freeze_message(
        {"id": "legacy-42", "role": "user", "content": "hi", "source": USER}
    )
    rewritten = imported.with_content("hi, shorter")
    from_text = Message.from_json(rewritten.to_json())
    round_tripped = freeze_message(from_text.to_dict())
    assert {m.id for m in (imported, rewritten, from_text, round_tripped)} == {"legacy-42"}
    assert freeze_message(round_tripped) is round_tripped


def test_a_message_inside_a_tree_is_kept_as_the_same_object() -> None:
    """Pinned (DESIGN is silent; the session stores `{"turn": .., "message": Message}`): a Message
    is already frozen, so freeze keeps it; JSON writes its four fields; thaw gives its dict form."""
    message = create_user_message("x", source=USER)
    assert freeze(message) is message
    frozen = freeze({"message": message, "turn": 1, "list": [message]})
    assert frozen["message"] is message and frozen["list"][0] is message
    assert FrozenDict(m=message)["m"] is message
    assert dshkit.to_json(frozen) == '{"message":' + message.to_json() + ',"turn":1,"list":[' + message.to_json() + "]}"
    assert dshkit.thaw(frozen) == {"message": message.to_dict(), "turn": 1, "list": [message.to_dict()]}
    assert hash(frozen) == hash(freeze({"message": message, "turn": 1, "list": (message,)}))
    # JSON carries no type tags: parsing gives the plain frozen mapping, freeze_message makes it a Message.
    parsed = dshkit.from_json(dshkit.to_json(frozen))
    assert type(parsed["message"]) is FrozenDict
    assert freeze_message(parsed["message"]) == message
