"""Frozen values stay out of the cyclic GC, and no cycle can run through one (issue 37).

A `Message`, a `FrozenDict` and a frozen tuple only ever reference values that existed before
them (they are built bottom-up and never change), so none can be part of a reference cycle and
the GC need not walk them. The proof a test can give: from every way of getting a frozen value,
everything it reaches is untracked too; a tracked object (the only kind a cycle can go through)
is never reachable from one, so a cycle through a frozen value would need a mutable link that
no frozen value has.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest

import dshkit
from dshkit import FrozenDict, freeze, freeze_message, from_json

TREE = {"rows": [{"id": 1, "tags": ["x", "y"], "nested": {"deep": [[1, 2], {"k": None}]}}], "text": "é"}


def referents(obj: object) -> list[object]:
    """What `obj` holds. The native types have no `tp_traverse` (the GC never walks into them), so
    their contents are read through their API: exactly the references the native object owns."""
    if type(obj) is FrozenDict:
        return [item for pair in obj.items() for item in pair]
    if type(obj) is dshkit.Message:
        return [obj.id, obj.role, obj.content, obj.source]
    return gc.get_referents(obj)


def reachable(value: object) -> list[object]:
    """Every object reachable from `value`, `value` first."""
    seen: dict[int, object] = {}
    stack = [value]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue  # a type is shared by every instance; it never refers back to an instance
        seen[id(obj)] = obj
        stack.extend(referents(obj))
    return list(seen.values())


def assert_closed_and_untracked(value: object) -> None:
    tracked = [type(obj).__name__ for obj in reachable(value) if gc.is_tracked(obj)]
    assert tracked == [], f"{type(value).__name__} reaches tracked objects: {tracked}"


def _message() -> dshkit.Message:
    return dshkit.create_assistant_message(
        [{"type": "text", "text": "hi"}, {"type": "tool_call", "id": "c1", "name": "f", "arguments": "{\"a\": 1}", "extra": {"a": [1, {"b": 2}]}}],
        provider="p", model="m", replay_state={"list": [1, [2]]},
    )


WAYS: dict[str, Callable[[], Any]] = {
    "freeze(dict)": lambda: freeze(TREE),
    "freeze(list)": lambda: freeze([TREE, [1, [2]]]),
    "FrozenDict(**kwargs)": lambda: FrozenDict(a=[1, {"b": []}], c={"d": (1, 2)}),
    "FrozenDict | dict": lambda: freeze(TREE) | {"new": [{"x": []}]},
    "dict | FrozenDict": lambda: {"new": [{"x": []}]} | freeze(TREE),
    "FrozenDict.fromkeys": lambda: FrozenDict.fromkeys(["a", "b"], [1, 2]),
    "from_json object": lambda: from_json(b'{"a": [1, {"b": [2, 3]}], "c": {"d": []}}'),
    "from_json array": lambda: from_json("[[1], {\"a\": [[]]}]"),
    "create_user_message": lambda: dshkit.create_user_message("hi", source={"kind": "user", "tags": ["a"]}),
    "create_assistant_message": _message,
    "create_tool_result_message": lambda: dshkit.create_tool_result_message("c1", [{"type": "text", "text": "x", "extra": [1]}]),
    "freeze_message(dict)": lambda: freeze_message({"id": dshkit.new_message_id(), "role": "user", "content": [{"type": "text", "text": "x"}], "source": {"kind": "user"}}),
    "Message.from_json": lambda: dshkit.Message.from_json(_message().to_json()),
    "message.with_content": lambda: _message().with_content([{"type": "text", "text": "new", "extra": [1]}]),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_every_way_of_getting_a_frozen_value_gives_an_untracked_closed_value(way: str) -> None:
    value = WAYS[way]()
    assert isinstance(value, (FrozenDict, tuple, dshkit.Message))
    assert_closed_and_untracked(value)


def test_a_constructed_frozendict_is_untracked_however_many_are_alive() -> None:
    # More live at once than any allocator cache could hold: each one comes from a fresh
    # allocation, which the GC tracks unless the constructor untracks it.
    values = [FrozenDict(a=index) for index in range(10_000)]
    assert [value for value in values if gc.is_tracked(value)] == []
    assert FrozenDict(values[0]) == values[0] and FrozenDict(values[0]) is not values[0]


def test_objects_reused_from_the_free_lists_are_untracked_and_hold_their_type_once() -> None:
    # Released FrozenDicts and Messages are kept and handed out again (rust/value/recycle.rs):
    # rounds of more than a free list keeps, so objects both come back from it and overflow it.
    types_held = sys.getrefcount(FrozenDict), sys.getrefcount(dshkit.Message)
    for _ in range(3):
        values = [FrozenDict(a=index) for index in range(6_000)]
        messages = [dshkit.create_user_message(f"m{index}", source={"kind": "user"}) for index in range(2_000)]
        assert [value for value in values + messages if gc.is_tracked(value)] == []
        assert [value["a"] for value in values] == list(range(6_000))
        assert [message.content[0]["text"] for message in messages] == [f"m{index}" for index in range(2_000)]
        del values, messages
    assert (sys.getrefcount(FrozenDict), sys.getrefcount(dshkit.Message)) == types_held


def test_new_frozendicts_and_messages_do_not_count_toward_a_collection() -> None:
    # Never tracked, so never part of a cycle: making them must not bring the next collection
    # closer (rust/value/recycle.rs `new_uncounted`). More than the free lists keep, so most are new.
    enabled = gc.isenabled()
    gc.disable()  # the count is still kept; no collection resets it while this runs
    try:
        gc.collect()
        before = gc.get_count()[0]
        values = [FrozenDict(a=index) for index in range(20_000)]
        made_values = gc.get_count()[0] - before
        content = freeze([{"type": "text", "text": "hi"}])
        message = dshkit.create_user_message("hi", source={"kind": "user"})
        before = gc.get_count()[0]
        messages = [message.with_content(content) for _ in range(5_000)]
        made_messages = gc.get_count()[0] - before
    finally:
        if enabled:
            gc.enable()
    assert made_values < 100 and made_messages < 100, (made_values, made_messages)
    assert [value["a"] for value in values] == list(range(20_000))
    assert all(message.content == content and not gc.is_tracked(message) for message in messages)
    del values, messages  # freed past the free lists' room: each goes back as it was made
    assert FrozenDict(a=1) == {"a": 1}


def test_the_walk_reaches_inside_native_values() -> None:
    # Without reading native contents the walk would prove nothing: it must see the deepest value.
    deep = freeze({"a": [{"b": ["needle"]}]})
    assert "needle" in reachable(deep)
    assert "needle" in reachable(dshkit.create_user_message("needle", source={"kind": "user"}))


def test_a_mutable_container_put_into_a_frozen_value_is_copied_not_referenced() -> None:
    # The one way a cycle could form: a frozen value holding a list that later holds the value.
    inner: list[Any] = []
    frozen = freeze({"inner": inner})
    inner.append(frozen)  # the list now refers to the frozen value, but not the other way round
    assert all(obj is not inner for obj in reachable(frozen))
    assert_closed_and_untracked(frozen)
    assert gc.is_tracked(inner)  # the list itself stays with the GC, so a cycle through it is still found


@pytest.mark.parametrize("bad", [object(), {1, 2}, bytearray(b"x")])
def test_values_that_could_link_back_are_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        freeze({"a": bad})
    with pytest.raises(TypeError):
        FrozenDict(a=bad)
