"""`FrozenDict`: a native, immutable, hashable Mapping with PEP 814 `frozendict` semantics."""

from __future__ import annotations

import collections.abc
import copy
import gc
import pickle
import sys
import types
import typing
from typing import Any

import frozendict as pypi_frozendict
import pytest

from support import PlainMapping, traced_allocation
from dshkit import FrozenDict, freeze, from_json, thaw, to_json

PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


# --- type ------------------------------------------------------------------------------------


def test_is_a_registered_mapping_and_not_a_dict() -> None:
    fd = FrozenDict(a=1)
    assert isinstance(fd, collections.abc.Mapping)
    assert issubclass(FrozenDict, collections.abc.Mapping)
    assert isinstance(fd, collections.abc.Hashable)
    assert isinstance(fd, collections.abc.Collection)
    assert not isinstance(fd, dict)
    assert not issubclass(FrozenDict, dict)
    assert not isinstance(fd, collections.abc.MutableMapping)
    assert not isinstance(fd, collections.abc.Sequence)


def test_is_final() -> None:
    with pytest.raises(TypeError):

        class Sub(FrozenDict):  # type: ignore[misc]
            pass


def test_has_no_instance_dict() -> None:
    fd = FrozenDict(a=1)
    assert not hasattr(fd, "__dict__")


def test_class_getitem_makes_a_generic_alias() -> None:
    alias = FrozenDict[int]
    assert typing.get_origin(alias) is FrozenDict
    assert typing.get_args(alias) == (int,)
    assert typing.get_origin(FrozenDict[str, int]) is FrozenDict  # type: ignore[type-arg]


# --- construction ----------------------------------------------------------------------------


def test_constructor_forms() -> None:
    assert FrozenDict() == {}
    assert FrozenDict({"a": 1}) == {"a": 1}
    assert FrozenDict([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
    assert FrozenDict(a=1, b=2) == {"a": 1, "b": 2}
    assert FrozenDict({"a": 1}, b=2) == {"a": 1, "b": 2}
    assert FrozenDict({"a": 1}, a=2) == {"a": 2}
    assert FrozenDict(FrozenDict(a=1)) == {"a": 1}
    assert FrozenDict(types.MappingProxyType({"a": 1})) == {"a": 1}
    assert FrozenDict(PlainMapping({"a": 1})) == {"a": 1}


def test_constructor_freezes_values() -> None:
    source = {"a": [1, {"b": [2]}]}
    fd = FrozenDict(source)
    assert fd == freeze(source)
    assert type(fd["a"]) is tuple and type(fd["a"][1]) is FrozenDict
    source["a"].append(3)
    assert fd == {"a": (1, {"b": (2,)})}


def test_constructor_rejects_non_str_keys_and_non_json_values() -> None:
    with pytest.raises(TypeError):
        FrozenDict({1: "a"})
    with pytest.raises(TypeError, match=r"\['a'\].*set is not a JSON value"):
        FrozenDict(a={1})
    with pytest.raises(ValueError):
        FrozenDict(a=float("nan"))
    with pytest.raises(TypeError):
        FrozenDict({"a": 1}, {"b": 2})  # type: ignore[call-overload]


def test_fromkeys() -> None:
    fd = FrozenDict.fromkeys(["a", "b"])
    assert type(fd) is FrozenDict
    assert fd == {"a": None, "b": None}
    assert FrozenDict.fromkeys("xy", 0) == {"x": 0, "y": 0}
    assert FrozenDict.fromkeys(["a"], [1])["a"] == (1,)
    with pytest.raises(TypeError):
        FrozenDict.fromkeys([1])


# --- the Mapping protocol --------------------------------------------------------------------


def test_lookup_methods() -> None:
    fd = FrozenDict({"a": 1, "b": None})
    assert fd["a"] == 1
    assert fd["b"] is None
    with pytest.raises(KeyError) as caught:
        fd["missing"]
    assert caught.value.args == ("missing",)
    assert fd.get("a") == 1
    assert fd.get("missing") is None
    assert fd.get("missing", 5) == 5
    assert "a" in fd and "missing" not in fd
    assert 1 not in fd
    assert len(fd) == 2 and len(FrozenDict()) == 0
    assert bool(fd) and not bool(FrozenDict())


def test_iteration_follows_insertion_order() -> None:
    fd = FrozenDict({"z": 1, "a": 2, "m": 3})
    assert list(fd) == ["z", "a", "m"]
    assert list(fd.keys()) == ["z", "a", "m"]
    assert list(fd.values()) == [1, 2, 3]
    assert list(fd.items()) == [("z", 1), ("a", 2), ("m", 3)]
    assert list(reversed(fd)) == ["m", "a", "z"]


def test_views_are_set_like_where_dict_views_are() -> None:
    fd = FrozenDict({"a": 1, "b": 2})
    assert isinstance(fd.keys(), collections.abc.KeysView)
    assert isinstance(fd.values(), collections.abc.ValuesView)
    assert isinstance(fd.items(), collections.abc.ItemsView)
    assert fd.keys() == {"a", "b"}
    assert fd.keys() & {"a", "z"} == {"a"}
    assert fd.items() == {("a", 1), ("b", 2)}
    assert ("a", 1) in fd.items()
    assert 2 in fd.values()
    assert len(fd.keys()) == len(fd.values()) == len(fd.items()) == 2


def test_unpacking_and_dict_conversion() -> None:
    fd = FrozenDict({"a": 1, "b": [2]})
    assert dict(fd) == {"a": 1, "b": (2,)}
    assert {**fd} == {"a": 1, "b": (2,)}

    def keywords(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    assert keywords(**fd) == {"a": 1, "b": (2,)}


def test_match_mapping_patterns() -> None:
    block = freeze({"type": "tool_call", "id": "c1", "name": "grep", "arguments": "{}"})
    match block:
        case {"type": "text", "text": text}:
            raise AssertionError(text)
        case {"type": "tool_call", "name": name, **rest}:
            assert name == "grep"
            assert rest == {"id": "c1", "arguments": "{}"}
        case _:
            raise AssertionError("no mapping pattern matched")


# --- equality and hash -----------------------------------------------------------------------


def test_equality_ignores_order_and_matches_dicts() -> None:
    a = FrozenDict({"x": 1, "y": 2})
    b = FrozenDict({"y": 2, "x": 1})
    assert a == b and not a != b
    assert a == {"y": 2, "x": 1} and {"y": 2, "x": 1} == a
    assert not a != {"x": 1, "y": 2} and not {"x": 1, "y": 2} != a
    assert a != {"x": 1} and {"x": 1} != a
    assert a != {"x": 1, "y": 3}
    assert a == types.MappingProxyType({"x": 1, "y": 2})
    assert a == PlainMapping({"x": 1, "y": 2}) and PlainMapping({"x": 1, "y": 2}) == a
    # FrozenDict's own comparison (not only a reflected Mapping.__eq__) compares any Mapping by items.
    assert a.__eq__(PlainMapping({"y": 2, "x": 1})) is True
    assert a.__eq__(PlainMapping({"x": 1, "y": 3})) is False
    assert a.__eq__(PlainMapping({"x": 1})) is False
    assert a.__eq__(PlainMapping({"x": 1, "z": 2})) is False
    assert a != [("x", 1), ("y", 2)]
    assert a != "xy" and a != None  # noqa: E711


def test_nested_equality_follows_python_value_semantics() -> None:
    assert freeze({"a": {"b": 1}}) == {"a": {"b": 1}}
    # A frozen list is a tuple, and tuple != list (documented; thaw gives lists back).
    assert freeze({"a": [1]}) != {"a": [1]}
    assert freeze({"a": [1]}) == {"a": (1,)}
    assert FrozenDict(a=1) == {"a": 1.0} == FrozenDict(a=True)


def test_ordering_comparisons_are_not_supported() -> None:
    with pytest.raises(TypeError):
        FrozenDict(a=1) < FrozenDict(b=1)  # type: ignore[operator]  # noqa: B015


def test_hash_is_order_independent_and_equal_for_equal_values() -> None:
    a = FrozenDict({"x": 1, "y": (2, {"z": 3})})
    b = FrozenDict({"y": (2, {"z": 3}), "x": 1})
    assert hash(a) == hash(b)
    assert hash(a) == hash(a)
    assert {a: "found"}[b] == "found"
    assert len({a, b}) == 1


def test_hash_agrees_with_numeric_equality() -> None:
    ints, floats, bools = FrozenDict(a=1), FrozenDict(a=1.0), FrozenDict(a=True)
    assert ints == floats == bools
    assert hash(ints) == hash(floats) == hash(bools)
    assert hash(FrozenDict()) == hash(FrozenDict())


def test_hash_is_stable_and_spreads() -> None:
    maps = [FrozenDict({"i": i, "j": -i}) for i in range(2_000)]
    assert len({hash(m) for m in maps}) > 1_990
    assert hash(FrozenDict(a=1, b=2)) != hash(FrozenDict(a=2, b=1))
    first = [hash(m) for m in maps]
    assert first == [hash(m) for m in maps]


def test_hash_is_computed_once() -> None:
    """Observable without timing: the first hash builds intermediate objects, later ones none."""
    fd = freeze({f"k{i}": [i, {"n": i}] for i in range(200)})

    def hash_again() -> None:
        for _ in range(100):
            hash(fd)

    _, first = traced_allocation(lambda: hash(fd))
    _, later = traced_allocation(hash_again)
    assert first > 1_000
    assert later < first / 10


def test_equal_hash_after_pickle_and_refreeze() -> None:
    fd = freeze({"a": [1, {"b": None}]})
    assert hash(pickle.loads(pickle.dumps(fd))) == hash(fd)
    assert hash(freeze({"a": [1, {"b": None}]})) == hash(fd)


# --- PEP 814 parity with the `frozendict` package ---------------------------------------------


@pytest.mark.parametrize(
    "data", [{}, {"a": 1}, {"b": 2, "a": 1}, {"n": None, "t": True, "f": 1.5, "s": "x"}]
)
def test_behaves_like_pypi_frozendict(data: dict[str, Any]) -> None:
    ours, theirs = FrozenDict(data), pypi_frozendict.frozendict(data)
    assert ours == theirs and theirs == ours
    assert list(ours) == list(theirs)
    assert list(ours.items()) == list(theirs.items())
    assert len(ours) == len(theirs)
    assert (ours == dict(reversed(list(data.items())))) == (theirs == dict(reversed(list(data.items()))))
    # The package prints its module ("frozendict.frozendict({...})"); the mapping part matches.
    assert repr(ours) == "FrozenDict(" + repr(theirs).split("(", 1)[1]
    merged_ours, merged_theirs = ours | {"a": 9, "z": 0}, theirs | {"a": 9, "z": 0}
    assert merged_ours == merged_theirs
    assert list(merged_ours) == list(merged_theirs)
    assert ours.copy() is ours
    assert FrozenDict.fromkeys(data) == pypi_frozendict.frozendict.fromkeys(data)


def test_pep814_union_right_operand_wins_and_returns_a_new_frozendict() -> None:
    left = FrozenDict(x=1, y=2)
    merged = left | FrozenDict(y=5)
    assert type(merged) is FrozenDict
    assert merged == {"x": 1, "y": 5}
    assert list(merged) == ["x", "y"]
    assert left == {"x": 1, "y": 2}
    assert type(left | {"z": [1]}) is FrozenDict
    assert (left | {"z": [1]})["z"] == (1,)


def test_reversed_union_with_a_dict() -> None:
    """Pinned: `dict | FrozenDict` gives a FrozenDict (dict's `|` declines a non-dict)."""
    merged = {"x": 0, "w": 1} | FrozenDict(x=1)
    assert type(merged) is FrozenDict
    assert merged == {"x": 1, "w": 1}
    assert list(merged) == ["x", "w"]


def test_union_with_non_mappings_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        FrozenDict(a=1) | [("b", 2)]  # type: ignore[operator]
    with pytest.raises(TypeError):
        FrozenDict(a=1) | 5  # type: ignore[operator]
    with pytest.raises(TypeError):
        5 | FrozenDict(a=1)  # type: ignore[operator]
    with pytest.raises(TypeError):
        FrozenDict(a=1) | {"bad": {1}}


def test_in_place_union_rebinds_without_mutating() -> None:
    original = FrozenDict(x=1)
    alias = original
    alias |= {"y": 2}
    assert alias == {"x": 1, "y": 2}
    assert original == {"x": 1}
    assert alias is not original


# --- copy and pickle -------------------------------------------------------------------------


def test_copy_and_deepcopy_return_self() -> None:
    fd = freeze({"a": [1, {"b": 2}]})
    assert fd.copy() is fd
    assert copy.copy(fd) is fd
    assert copy.deepcopy(fd) is fd
    holder = copy.deepcopy({"fd": fd, "list": [fd]})
    assert holder["fd"] is fd and holder["list"][0] is fd


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_pickle_round_trips_with_every_protocol(protocol: int) -> None:
    fd = freeze({"z": [1, 2.5, {"nested": True}], "a": None, "é": "😀"})
    back = pickle.loads(pickle.dumps(fd, protocol=protocol))
    assert type(back) is FrozenDict
    assert back == fd
    assert list(back) == list(fd)
    assert type(back["z"]) is tuple and type(back["z"][2]) is FrozenDict
    assert hash(back) == hash(fd)


# --- repr ------------------------------------------------------------------------------------


def test_repr() -> None:
    assert repr(FrozenDict({"a": 1})) == "FrozenDict({'a': 1})"
    assert repr(FrozenDict()) == "FrozenDict({})"
    assert repr(freeze({"a": {"b": [1, "x"]}})) == "FrozenDict({'a': FrozenDict({'b': (1, 'x')})})"
    assert repr(FrozenDict({"q": "it's"})) == 'FrozenDict({\'q\': "it\'s"})'
    assert str(FrozenDict({"a": 1})) == "FrozenDict({'a': 1})"


# --- immutability ----------------------------------------------------------------------------


MUTATIONS = {
    "setitem": lambda fd: fd.__setitem__("a", 2),
    "setitem-new": lambda fd: fd.__setitem__("new", 2),
    "delitem": lambda fd: fd.__delitem__("a"),
    "update": lambda fd: fd.update({"a": 2}),
    "update-kwargs": lambda fd: fd.update(a=2),
    "pop": lambda fd: fd.pop("a"),
    "pop-default": lambda fd: fd.pop("missing", None),
    "popitem": lambda fd: fd.popitem(),
    "setdefault": lambda fd: fd.setdefault("new", 1),
    "clear": lambda fd: fd.clear(),
    "dict.__setitem__": lambda fd: dict.__setitem__(fd, "a", 2),
    "dict.update": lambda fd: dict.update(fd, {"a": 2}),
    "dict.clear": lambda fd: dict.clear(fd),
    "init-again": lambda fd: fd.__init__({"a": 2}),
    "ior": lambda fd: fd.__ior__({"a": 2}),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_every_mutation_attempt_fails_and_changes_nothing(mutate: Any) -> None:
    fd = FrozenDict({"a": 1, "b": [1]})
    before_hash = hash(fd)
    try:
        mutate(fd)
    except (TypeError, AttributeError):
        pass
    assert fd == {"a": 1, "b": (1,)}
    assert list(fd) == ["a", "b"]
    assert hash(fd) == before_hash


def test_item_assignment_and_deletion_raise_type_error() -> None:
    fd = FrozenDict(a=1)
    with pytest.raises(TypeError):
        fd["a"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        del fd["a"]  # type: ignore[attr-defined]
    for name, args in [
        ("update", ({"a": 2},)),
        ("pop", ("a",)),
        ("popitem", ()),
        ("setdefault", ("a", 1)),
        ("clear", ()),
    ]:
        with pytest.raises(TypeError, match="immutable"):
            getattr(fd, name)(*args)


def test_attributes_cannot_be_added() -> None:
    fd = FrozenDict(a=1)
    with pytest.raises((AttributeError, TypeError)):
        fd.extra = 1  # type: ignore[attr-defined]
    with pytest.raises((AttributeError, TypeError)):
        object.__setattr__(fd, "extra", 1)
    with pytest.raises((AttributeError, TypeError)):
        object.__setattr__(fd, "_dict", {})


def _reachable_dicts(roots: list[Any], limit: int = 10_000) -> list[dict[Any, Any]]:
    """Plain dicts reachable through gc referents, not walking into types or modules."""
    found: list[dict[Any, Any]] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack and len(seen) < limit:
        node = stack.pop()
        if id(node) in seen or isinstance(node, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(node))
        if type(node) is dict:
            found.append(node)
        stack.extend(gc.get_referents(node))
    return found


def test_no_back_door_through_views_iterators_or_gc() -> None:
    fd = FrozenDict({"a": 1, "b": 2})
    handles: list[Any] = [
        fd,
        fd.keys(),
        fd.values(),
        fd.items(),
        iter(fd),
        reversed(fd),
        iter(fd.items()),
        getattr(fd.keys(), "mapping", None),
    ]
    for candidate in _reachable_dicts(handles):
        if candidate == {"a": 1, "b": 2}:
            candidate["backdoor"] = True
            try:
                assert "backdoor" not in fd, "a private dict of FrozenDict is reachable and mutable"
            finally:
                candidate.pop("backdoor", None)
    assert fd == {"a": 1, "b": 2}


def test_keys_view_mapping_is_not_a_mutable_dict() -> None:
    fd = FrozenDict({"a": 1})
    mapping = getattr(fd.keys(), "mapping", None)
    if mapping is not None:
        assert not isinstance(mapping, dict)
        with pytest.raises(TypeError):
            mapping["a"] = 2


def test_reduce_does_not_hand_out_internal_state() -> None:
    fd = FrozenDict({"a": 1})
    for protocol in PROTOCOLS:
        reduced = fd.__reduce_ex__(protocol)
        for part in reduced[1:]:
            if isinstance(part, tuple):
                for arg in part:
                    if isinstance(arg, dict):
                        arg["a"] = "changed"
    assert fd == {"a": 1}


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 7, 8, 9, 16, 17, 100])
def test_every_size_keeps_order_lookups_and_equality(size: int) -> None:
    """Entries live inline up to 4 and in a heap array beyond, with a lookup table past 8 (a
    builder stages 8 before it spills): each size behaves the same, however it was built."""
    plain = {f"k{i}": i for i in range(size)}
    built = [FrozenDict(plain), freeze(plain), from_json(to_json(plain)), FrozenDict(**plain)]
    for frozen in built:
        assert list(frozen) == list(plain)
        assert list(reversed(frozen)) == list(reversed(plain))
        assert len(frozen) == size
        assert frozen == plain and plain == frozen
        assert all(frozen[key] == value and key in frozen for key, value in plain.items())
        assert "missing" not in frozen and frozen.get("missing", "default") == "default"
        assert hash(frozen) == hash(built[0])
        assert thaw(frozen) == plain
        assert frozen.get(1) is None and 1 not in frozen  # a non-str key: dict semantics
        with pytest.raises(KeyError):
            frozen[1]
        with pytest.raises(TypeError, match="unhashable"):
            frozen.get([])


@pytest.mark.parametrize("size", [2, 4])
def test_a_small_frozendict_holds_its_entries_in_112_bytes(size: int) -> None:
    """A history holds thousands of 2-4 key mappings (sources, blocks, event data): each is one
    112-byte object, GC header included (it was 216, with room for 8 entries), and one
    allocation."""
    plain = {f"k{i}": i for i in range(size)}
    frozen = freeze(plain)
    assert sys.getsizeof(frozen) <= 112
    kept: list[Any] = []
    size_of_1000, _ = traced_allocation(lambda: kept.extend(freeze(plain) for _ in range(1000)))
    assert size_of_1000 <= 1000 * 112 + 16 * 1024  # the list of them and slack, no second allocation


def test_a_large_frozendict_keeps_its_entries_on_the_python_heap() -> None:
    """Beyond 4 entries the entries move to one exactly sized block that tracemalloc sees too."""
    plain = {f"k{i}": i for i in range(20)}
    kept: list[Any] = []
    size_of_100, _ = traced_allocation(lambda: kept.extend(freeze(plain) for _ in range(100)))
    assert size_of_100 >= 100 * 20 * 16  # (the objects themselves may come from the free list)
