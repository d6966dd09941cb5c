"""Hypothesis properties of freeze, thaw, FrozenDict and JSON over arbitrary JSON-like trees."""

from __future__ import annotations

import json
import pickle
import struct
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dshkit import (
    FrozenDict,
    create_message,
    freeze,
    freeze_message,
    from_json,
    thaw,
    to_json,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
# Text without lone surrogates: the only str that JSON cannot carry.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
ANY_TEXT = st.text(max_size=20)

LEAVES = st.none() | st.booleans() | INT64 | FINITE | TEXT


def json_trees(leaves: st.SearchStrategy[Any] = LEAVES, keys: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[Any]:
    """Plain JSON-like trees of dicts and lists (tuples are mixed in: freeze accepts both)."""
    return st.recursive(
        leaves,
        lambda children: st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(keys, children, max_size=5),
        max_leaves=30,
    )


def as_lists(value: Any) -> Any:
    """The tree with tuples turned into lists (what thaw and JSON give back)."""
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_lists(v) for v in value]
    return value


def same_json(a: Any, b: Any) -> bool:
    """Equality that also tells -0.0 from 0.0, bool from int, and list from tuple."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, (dict, FrozenDict)):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return bool(a == b)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(json_trees(st.none() | st.booleans() | INT64 | FINITE | ANY_TEXT, ANY_TEXT))
def test_thaw_of_freeze_gives_back_the_tree_with_lists(tree: Any) -> None:
    assert same_json(thaw(freeze(tree)), as_lists(tree))


@PROPERTY
@given(json_trees(st.none() | st.booleans() | INT64 | FINITE | ANY_TEXT, ANY_TEXT))
def test_freeze_is_idempotent_and_reuses(tree: Any) -> None:
    frozen = freeze(tree)
    assert freeze(frozen) is frozen
    assert freeze(tree) == frozen
    assert hash(freeze(tree)) == hash(frozen)


@PROPERTY
@given(json_trees())
def test_to_json_from_json_round_trip(tree: Any) -> None:
    frozen = freeze(tree)
    back = from_json(to_json(frozen))
    assert back == frozen
    assert same_json(thaw(back), thaw(frozen))


@PROPERTY
@given(json_trees())
def test_to_json_matches_the_stdlib(tree: Any) -> None:
    frozen = freeze(tree)
    text = to_json(frozen)
    assert same_json(json.loads(text), thaw(frozen))
    assert same_json(json.loads(text), json.loads(json.dumps(tree)))
    assert same_json(orjson.loads(text), orjson.loads(orjson.dumps(as_lists(tree))))
    assert to_json(tree) == text
    assert same_json(from_json(json.dumps(tree)), frozen)


@PROPERTY
@given(FINITE)
def test_every_finite_float_round_trips_bit_exactly(value: float) -> None:
    text = to_json(value)
    assert struct.pack("<d", json.loads(text)) == struct.pack("<d", value)
    assert struct.pack("<d", from_json(text)) == struct.pack("<d", value)
    assert float(text) == value


@PROPERTY
@given(INT64)
def test_every_64_bit_int_round_trips(value: int) -> None:
    assert to_json(value) == str(value)
    assert from_json(str(value)) == value


@PROPERTY
@given(TEXT)
def test_every_text_round_trips(value: str) -> None:
    assert json.loads(to_json(value)) == value
    assert from_json(to_json(value)) == value
    assert from_json(json.dumps(value)) == value


@PROPERTY
@given(st.dictionaries(TEXT, json_trees(), max_size=8), st.randoms(use_true_random=False))
def test_frozendict_equality_and_hash_ignore_order(data: dict[str, Any], rng: Any) -> None:
    items = list(data.items())
    rng.shuffle(items)
    a, b = freeze(data), freeze(dict(items))
    assert a == b and hash(a) == hash(b)
    assert list(b) == [k for k, _ in items]
    assert FrozenDict(data) == a
    assert a == {k: freeze(v) for k, v in data.items()}


@PROPERTY
@given(st.dictionaries(TEXT, json_trees(), max_size=6), st.dictionaries(TEXT, json_trees(), max_size=6))
def test_frozendict_union_matches_dict_union(left: dict[str, Any], right: dict[str, Any]) -> None:
    merged = freeze(left) | right
    expected = freeze({**left, **right})
    assert merged == expected and list(merged) == list(expected)
    reversed_merge = left | freeze(right)
    assert reversed_merge == expected and list(reversed_merge) == list(expected)


@PROPERTY
@given(json_trees())
def test_pickle_round_trip(tree: Any) -> None:
    frozen = freeze(tree)
    for protocol in (0, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(frozen, protocol=protocol))
        assert same_json(back, frozen)


BLOCKS = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, TEXT),
        st.builds(lambda t: {"type": "reasoning", "text": t}, TEXT),
        st.builds(
            lambda i, n, a: {"type": "tool_call", "id": i, "name": n, "arguments": a}, TEXT, TEXT, TEXT
        ),
        st.builds(lambda d: {"type": "custom", "data": d}, json_trees()),
    ),
    max_size=5,
)


@PROPERTY
@given(BLOCKS, st.sampled_from(["system", "user", "assistant"]), st.dictionaries(TEXT, json_trees(), max_size=3))
def test_messages_round_trip_through_every_representation(
    blocks: list[dict[str, Any]], role: str, extra: dict[str, Any]
) -> None:
    source = {**extra, "kind": "custom-kind"}
    message = create_message(role=role, content=blocks, source=source)  # type: ignore[arg-type]
    assert same_json(thaw(message.content), as_lists(blocks))
    assert freeze_message(message.to_dict()) == message
    assert type(message).from_json(message.to_json()) == message
    assert pickle.loads(pickle.dumps(message)) == message
    assert json.loads(message.to_json()) == message.to_dict()
    assert message.text == "".join(b["text"] for b in blocks if b["type"] == "text")
    assert [dict(c) for c in message.tool_calls] == [b for b in blocks if b["type"] == "tool_call"]
