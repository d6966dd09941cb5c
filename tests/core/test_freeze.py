"""`freeze` and `thaw`: the JSON-like tree rules of DESIGN section 2, bad inputs with paths."""

from __future__ import annotations

import collections
import datetime
import decimal
import enum
import math
import struct
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import pytest

from support import PlainMapping, traced_allocation
from dshkit import FrozenDict, Message, create_user_message, freeze, thaw

MAX_DEPTH = 256


def nested_lists(levels: int) -> Any:
    """`levels` lists, one inside the other, around a leaf: nested_lists(1) == [0]."""
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def nested_dicts(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = {"k": value}
    return value


def assert_deeply_frozen(value: Any) -> None:
    """Every node is a JSON leaf of an exact type, a tuple or a FrozenDict."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, FrozenDict):
            assert all(type(k) is str for k in node)
            stack.extend(node.values())
        elif type(node) is tuple:
            stack.extend(node)
        else:
            assert node is None or type(node) in (str, int, float, bool), type(node)


# --- leaves ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "leaf", ["", "text", "é 漢 😀", 0, 1, -1, 2**63 - 1, -(2**63), 0.0, 1.5, -2.5e-300, True, False, None]
)
def test_json_leaves_are_kept_as_the_same_object(leaf: Any) -> None:
    frozen = freeze(leaf)
    assert frozen is leaf
    assert type(frozen) is type(leaf)


def test_bool_stays_bool_everywhere() -> None:
    frozen = freeze({"t": True, "f": False, "list": [True, 1, False, 0]})
    assert frozen["t"] is True and frozen["f"] is False
    assert [type(x) for x in frozen["list"]] == [bool, int, bool, int]


def test_negative_zero_keeps_its_sign() -> None:
    frozen = freeze([-0.0])[0]
    assert math.copysign(1.0, frozen) == -1.0


def test_extreme_finite_floats_are_kept() -> None:
    values = [5e-324, 2.2250738585072014e-308, sys.float_info.max, -sys.float_info.max]
    assert freeze(values) == tuple(values)


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


class Number(float):
    pass


class Count(int):
    pass


@pytest.mark.parametrize(
    ("subclass_value", "plain"),
    [(Text("hi"), "hi"), (Count(7), 7), (Colour.RED, 1), (Number(2.5), 2.5)],
)
def test_str_int_float_subclasses_become_the_plain_type(subclass_value: Any, plain: Any) -> None:
    """Pinned (the core's docstring): a subclass could carry mutable state, so only its value is kept."""
    frozen = freeze({"v": subclass_value})["v"]
    assert type(frozen) is type(plain)
    assert frozen == plain
    assert type(freeze(subclass_value)) is type(plain)


def test_str_subclass_keys_become_plain_str() -> None:
    frozen = freeze({Text("k"): 1})
    assert [type(k) for k in frozen] == [str]
    assert frozen == {"k": 1}
    frozen = freeze(PlainMapping({Text("m"): 1}))
    assert [type(k) for k in frozen] == [str]


# --- containers ------------------------------------------------------------------------------


def test_dict_becomes_frozendict_and_list_becomes_tuple() -> None:
    frozen = freeze({"a": [1, {"b": [2, 3]}], "c": {}})
    assert type(frozen) is FrozenDict
    assert type(frozen["a"]) is tuple
    assert type(frozen["a"][1]) is FrozenDict
    assert frozen["a"][1]["b"] == (2, 3)
    assert frozen == {"a": (1, {"b": (2, 3)}), "c": {}}
    assert_deeply_frozen(frozen)


def test_empty_containers() -> None:
    assert freeze({}) == FrozenDict() and type(freeze({})) is FrozenDict
    assert freeze([]) == () and type(freeze([])) is tuple
    assert freeze(()) == ()


def test_insertion_order_is_kept() -> None:
    keys = [f"k{i}" for i in range(50)][::-1]
    frozen = freeze({k: None for k in keys})
    assert list(frozen) == keys


@pytest.mark.parametrize(
    "mapping",
    [
        types.MappingProxyType({"a": [1], "b": {"c": 2}}),
        PlainMapping({"a": [1], "b": {"c": 2}}),
        collections.OrderedDict([("a", [1]), ("b", {"c": 2})]),
        collections.defaultdict(list, {"a": [1], "b": {"c": 2}}),
        collections.ChainMap({"a": [1]}, {"b": {"c": 2}}),
    ],
    ids=["mappingproxy", "custom-mapping", "ordereddict", "defaultdict", "chainmap"],
)
def test_any_mapping_with_str_keys_becomes_a_frozendict(mapping: Mapping[str, Any]) -> None:
    frozen = freeze(mapping)
    assert type(frozen) is FrozenDict
    assert frozen == {"a": (1,), "b": {"c": 2}}
    assert type(frozen["b"]) is FrozenDict
    assert_deeply_frozen(frozen)


def test_custom_mapping_keeps_its_iteration_order() -> None:
    frozen = freeze(PlainMapping({"z": 1, "a": 2, "m": 3}))
    assert list(frozen) == ["z", "a", "m"]


def test_tuple_subclasses_become_plain_tuples() -> None:
    class Point(NamedTuple):
        x: int
        y: list[int]

    frozen = freeze(Point(1, [2]))
    assert type(frozen) is tuple
    assert frozen == (1, (2,))
    assert type(freeze(Point(1, 2))) is tuple  # type: ignore[arg-type]


def test_list_subclass_becomes_a_plain_tuple() -> None:
    class Items(list):  # type: ignore[type-arg]
        pass

    frozen = freeze(Items([1, [2]]))
    assert type(frozen) is tuple and frozen == (1, (2,))


def test_dict_subclass_becomes_a_frozendict() -> None:
    class Record(dict):  # type: ignore[type-arg]
        pass

    frozen = freeze(Record(a=[1]))
    assert type(frozen) is FrozenDict and frozen == {"a": (1,)}


def test_a_shared_subtree_is_not_a_cycle() -> None:
    shared = [1, {"x": 2}]
    frozen = freeze({"a": shared, "b": shared, "c": [shared, shared]})
    assert frozen["a"] == frozen["b"] == frozen["c"][0] == frozen["c"][1] == (1, {"x": 2})


# --- bad inputs: TypeError with a path --------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "type_name"),
    [
        ({1, 2}, "set"),
        (frozenset({1}), "frozenset"),
        (b"bytes", "bytes"),
        (bytearray(b"x"), "bytearray"),
        (object(), "object"),
        (datetime.datetime(2024, 1, 1), "datetime"),
        (datetime.date(2024, 1, 1), "date"),
        (decimal.Decimal("1.5"), "Decimal"),
        (1 + 2j, "complex"),
        (range(3), "range"),
        (iter([1]), "list_iterator"),
        (collections.deque([1]), "deque"),
        (len, "builtin_function_or_method"),
    ],
)
def test_non_json_values_raise_type_error_naming_path_and_type(bad: Any, type_name: str) -> None:
    with pytest.raises(TypeError) as caught:
        freeze({"content": [0, 1, {"arguments": bad}]})
    assert str(caught.value) == f"value['content'][2]['arguments']: {type_name} is not a JSON value"


def test_top_level_non_json_value_names_the_root() -> None:
    with pytest.raises(TypeError, match=r"^value: set is not a JSON value$"):
        freeze({1})


@pytest.mark.parametrize("key", [1, 1.5, None, True, ("t",), b"k"])
def test_non_str_keys_raise_type_error_at_the_mapping_path(key: Any) -> None:
    with pytest.raises(TypeError) as caught:
        freeze({"outer": [{key: 1}]})
    message = str(caught.value)
    assert message.startswith("value['outer'][0]: ")
    assert "str" in message
    assert type(key).__name__ in message


def test_non_str_key_in_a_custom_mapping() -> None:
    with pytest.raises(TypeError, match=r"^value\['m'\]: .*str"):
        freeze({"m": PlainMapping({1: "x"})})


def test_path_of_a_key_with_quotes_and_backslashes() -> None:
    """Pinned: keys are written in single quotes with backslash escapes."""
    with pytest.raises(TypeError) as caught:
        freeze({"it's \\ here": {1}})
    assert str(caught.value) == "value['it\\'s \\\\ here']: set is not a JSON value"


# --- bad inputs: ValueError ------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, float("nan")])
def test_non_finite_floats_raise_value_error_with_path(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^value\['a'\]\[1\]: ") as caught:
        freeze({"a": [0.5, bad]})
    assert "float" in str(caught.value)


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 10**100, -(10**100), Count(2**63)])
def test_ints_outside_64_bit_signed_raise_value_error_with_path(bad: int) -> None:
    with pytest.raises(ValueError, match=r"^value\['n'\]: ") as caught:
        freeze({"n": bad})
    assert str(int(bad)) in str(caught.value)


@pytest.mark.parametrize("good", [2**63 - 1, -(2**63), 2**62, -(2**62)])
def test_ints_at_the_64_bit_edges_are_kept(good: int) -> None:
    assert freeze([good]) == (good,)


def test_a_list_containing_itself_is_a_cycle() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match="cycle"):
        freeze(loop)


def test_a_cycle_is_named_where_it_closes() -> None:
    """Pinned: the path ends where the container appears inside itself, not 256 levels down."""
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(ValueError, match=r"^value\['a'\]\[1\]: cycle"):
        freeze({"a": loop})


def test_a_dict_containing_itself_is_a_cycle() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="cycle"):
        freeze({"wrapper": loop})


def test_a_cycle_through_several_containers() -> None:
    a: list[Any] = []
    b: dict[str, Any] = {"a": a}
    c = (b,)
    a.append(c)
    with pytest.raises(ValueError, match="cycle"):
        freeze(a)


def test_a_cycle_through_a_custom_mapping() -> None:
    inner: dict[str, Any] = {}
    mapping = PlainMapping(inner)
    mapping._data["again"] = mapping
    with pytest.raises(ValueError, match="cycle"):
        freeze(mapping)


@pytest.mark.parametrize("build", [nested_lists, nested_dicts], ids=["lists", "dicts"])
def test_256_levels_are_accepted(build: Any) -> None:
    frozen = freeze(build(MAX_DEPTH))
    assert thaw(frozen) == build(MAX_DEPTH)


@pytest.mark.parametrize("build", [nested_lists, nested_dicts], ids=["lists", "dicts"])
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, MAX_DEPTH + 2, 1_000, 100_000])
def test_more_than_256_levels_raise_value_error(build: Any, levels: int) -> None:
    with pytest.raises(ValueError, match="256") as caught:
        freeze(build(levels))
    assert "cycle" not in str(caught.value)


def test_the_depth_limit_also_holds_for_trees_built_from_frozen_parts() -> None:
    """Reusing a frozen part must not skip the limit: freezing gives the same outcome whether or
    not parts were frozen first (else a Message can be created that to_json then refuses)."""
    part = freeze(nested_dicts(MAX_DEPTH))
    assert thaw(part) == nested_dicts(MAX_DEPTH)
    for build in (
        lambda p: {"k": p},
        lambda p: [p],
        lambda p: (p,),
        lambda p: FrozenDict(k=p),
    ):
        with pytest.raises(ValueError, match="256"):
            freeze(build(nested_dicts(MAX_DEPTH)))
        with pytest.raises(ValueError, match="256"):
            freeze(build(part))


def test_a_message_cannot_hold_content_nested_deeper_than_the_limit() -> None:
    part = freeze(nested_dicts(MAX_DEPTH))
    for value in (nested_dicts(MAX_DEPTH), part):
        with pytest.raises(ValueError, match="256"):
            create_user_message([{"type": "custom", "v": value}], source={"kind": "user"})
    # The message object, its content list and the block are three levels of its JSON.
    fits = freeze(nested_dicts(MAX_DEPTH - 3))
    message = create_user_message([{"type": "custom", "v": fits}], source={"kind": "user"})
    assert Message.from_json(message.to_json()) == message
    with pytest.raises(ValueError, match="256"):
        create_user_message([{"type": "custom", "v": {"k": fits}}], source={"kind": "user"})


def test_depth_counts_mixed_containers() -> None:
    value: Any = 0
    for level in range(MAX_DEPTH):
        value = [value] if level % 3 else ({"k": value} if level % 2 else (value,))
    freeze(value)
    with pytest.raises(ValueError):
        freeze([value])


# --- detachment ------------------------------------------------------------------------------


def test_mutating_the_input_afterwards_is_invisible() -> None:
    inner = {"b": [1, 2]}
    outer = {"a": inner, "l": [inner, [3]]}
    frozen = freeze(outer)
    snapshot = thaw(frozen)
    inner["b"].append(99)
    inner["new"] = 1
    outer["l"][1].clear()
    outer["l"].append("x")
    del outer["a"]
    assert thaw(frozen) == snapshot
    assert frozen == {"a": {"b": (1, 2)}, "l": ({"b": (1, 2)}, (3,))}


def test_no_mutable_object_of_the_input_is_shared() -> None:
    source = {"a": [{"b": [1]}], "c": {"d": {}}}
    frozen = freeze(source)
    input_ids = set()
    stack: list[Any] = [source]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, dict)):
            input_ids.add(id(node))
            stack.extend(node.values() if isinstance(node, dict) else node)
    stack = [frozen]
    while stack:
        node = stack.pop()
        assert id(node) not in input_ids
        if isinstance(node, FrozenDict):
            stack.extend(node.values())
        elif isinstance(node, tuple):
            stack.extend(node)


def test_a_mapping_that_changes_while_read_is_snapshotted_or_refused() -> None:
    class Shifty(Mapping[str, Any]):
        def __init__(self) -> None:
            self.data = {"a": 1, "b": 2}

        def __getitem__(self, key: str) -> Any:
            self.data[f"grown{len(self.data)}"] = 0
            return self.data[key]

        def __iter__(self) -> Iterator[str]:
            return iter(list(self.data))

        def __len__(self) -> int:
            return len(self.data)

    try:
        frozen = freeze(Shifty())
    except (RuntimeError, TypeError, ValueError):
        return
    assert type(frozen) is FrozenDict
    assert_deeply_frozen(frozen)


def test_errors_raised_by_a_mapping_are_reported_with_their_cause() -> None:
    class Broken(PlainMapping):
        def __getitem__(self, key: Any) -> Any:
            raise LookupError("broken mapping")

    with pytest.raises(Exception) as caught:
        freeze({"x": Broken({"a": 1})})
    error = caught.value
    assert isinstance(error, LookupError) or "broken mapping" in str(error)


def test_keyboard_interrupt_inside_a_mapping_is_not_turned_into_a_type_error() -> None:
    """Ctrl-C while a slow mapping is read must stay a KeyboardInterrupt."""

    class Interrupted(PlainMapping):
        def __getitem__(self, key: Any) -> Any:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        freeze({"x": Interrupted({"a": 1})})


# --- reuse -----------------------------------------------------------------------------------


def test_refreezing_a_frozen_tree_returns_it_unchanged() -> None:
    frozen = freeze({"a": [1, {"b": [2]}], "c": "x"})
    assert freeze(frozen) is frozen
    assert freeze(frozen["a"]) is frozen["a"]


def test_frozen_parts_are_reused_inside_new_containers() -> None:
    part = freeze({"deep": [[1], {"x": (2,)}]})
    whole = freeze({"p": part, "list": [part, part], "tuple": (part, 1)})
    assert whole["p"] is part
    assert whole["list"][0] is part and whole["list"][1] is part
    assert whole["tuple"][0] is part


def test_a_tuple_of_frozen_values_is_reused() -> None:
    part = freeze({"a": 1})
    tup = (part, 1, "s", None, (2, 3.5))
    assert freeze(tup) is tup
    assert freeze({"k": tup})["k"] is tup


def test_a_tuple_with_a_mutable_item_is_copied() -> None:
    tup = (1, [2])
    frozen = freeze(tup)
    assert frozen is not tup and frozen == (1, (2,))


def test_refreezing_allocates_nothing() -> None:
    frozen = freeze({"rows": [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(50)]})
    calls = 2_000
    results: list[Any] = [None] * calls
    freeze(frozen)  # warm any lazily created state

    def call_repeatedly() -> None:
        for i in range(calls):
            results[i] = freeze(frozen)

    kept, peak = traced_allocation(call_repeatedly)
    assert all(r is frozen for r in results)
    # A copied tree would hold thousands of new objects; a few hundred bytes is loop noise.
    assert kept < 1_000
    assert peak < 4_000


# --- thaw ------------------------------------------------------------------------------------


def test_thaw_returns_plain_mutable_dicts_and_lists() -> None:
    frozen = freeze({"a": [1, {"b": (2, 3)}], "c": None})
    plain = thaw(frozen)
    assert plain == {"a": [1, {"b": [2, 3]}], "c": None}
    assert type(plain) is dict and type(plain["a"]) is list and type(plain["a"][1]) is dict
    assert type(plain["a"][1]["b"]) is list
    plain["a"].append("mutable")
    plain["a"][1]["b"].append(4)
    assert frozen == {"a": (1, {"b": (2, 3)}), "c": None}


def test_thaw_returns_a_fresh_tree_each_time() -> None:
    frozen = freeze({"a": [1]})
    first, second = thaw(frozen), thaw(frozen)
    assert first == second
    assert first is not second and first["a"] is not second["a"]


def test_thaw_of_plain_trees_detaches_them() -> None:
    plain = {"a": [1, (2, {"b": 3})]}
    thawed = thaw(plain)
    assert thawed == {"a": [1, [2, {"b": 3}]]}
    assert thawed is not plain and thawed["a"] is not plain["a"]


@pytest.mark.parametrize("leaf", ["s", 1, 2.5, True, None])
def test_thaw_keeps_leaves(leaf: Any) -> None:
    assert thaw(leaf) == leaf and type(thaw(leaf)) is type(leaf)


def test_thaw_keeps_order_and_bool() -> None:
    frozen = freeze({"z": True, "a": 1, "m": [False]})
    thawed = thaw(frozen)
    assert list(thawed) == ["z", "a", "m"]
    assert thawed["z"] is True and thawed["m"][0] is False


def test_thaw_rejects_non_json_values_with_a_path() -> None:
    with pytest.raises(TypeError, match=r"^value\['a'\]\[0\]: set is not a JSON value$"):
        thaw({"a": [{1}]})


def test_thaw_refuses_cycles() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="cycle"):
        thaw(loop)


def test_freeze_thaw_round_trip_of_a_realistic_tree() -> None:
    tree = {
        "type": "tool_result",
        "rows": [{"id": i, "score": i / 7, "ok": i % 2 == 0, "note": None} for i in range(20)],
        "nested": {"a": {"b": {"c": ["d", 1, 2.5, False, None, {}]}}},
    }
    assert thaw(freeze(tree)) == tree
    # Bit-exact floats after the round trip.
    for original, back in zip(tree["rows"], thaw(freeze(tree))["rows"]):  # type: ignore[call-overload]
        assert struct.pack("<d", original["score"]) == struct.pack("<d", back["score"])
