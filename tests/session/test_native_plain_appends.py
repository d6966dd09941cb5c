"""`vouch_plain_append` (`Session.append`'s plain path) is held to the Python rules: it vouches only
for data its type's rule (`PLAIN_DATA_CHECKS`) passes, freezes exactly as `freeze` does, and a bad
plain append raises the very error `prepare_data` raises for it, naming what was wrong."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dshkit
from dshkit import FrozenDict
from dshkit._core import vouch_plain_append
from dshkit.session import Session
from dshkit.session.events import PLAIN_DATA_CHECKS, prepare_data

PLAIN_TYPES = sorted(PLAIN_DATA_CHECKS)


class Text(str):
    """A str subclass: the Python rules accept it where they test `isinstance(value, str)`."""


GOOD = {
    "turn/start": {"turn": 1},
    "turn/end": {"turn": 1, "reason": {"kind": "completed"}},
    "step/start": {"turn": 1, "step": 2},
    "step/end": {"turn": 1, "step": 2},
    "assistant/chunk": {"turn": 1, "step": 2, "chunk": {"type": "text_delta", "text": "hi"}},
    "tool/call": {"turn": 1, "step": 2, "call_id": "c1", "name": "noop", "arguments": "{}"},
    "compaction/start": {},
}

values = st.one_of(
    st.integers(-2, 2),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.builds(Text, st.text(max_size=2)),
    st.just({"kind": "completed"}),
    st.just({"kind": 3}),
    st.just({"kind": Text("x")}),
    st.just([1, "a"]),
    st.just({}),
)


@st.composite
def plain_appends(draw: Any) -> tuple[Any, Any]:
    """A type (mostly a plain one) and data (mostly a good one with a field or two changed)."""
    event_type = draw(st.one_of(st.sampled_from(PLAIN_TYPES), st.sampled_from(["user/message", "x/unknown", "", 3, Text("step/start")])))
    base = dict(GOOD.get(event_type, {})) if isinstance(event_type, str) else {}
    keys = ["turn", "step", "call_id", "name", "arguments", "reason", "chunk", "ignorable", "other"]
    changes = draw(st.dictionaries(st.sampled_from(keys), values, max_size=2))
    data: Any = {**base, **changes}
    for key in draw(st.lists(st.sampled_from(keys), max_size=1)):
        data.pop(key, None)
    if draw(st.booleans()):
        try:
            data = dshkit.freeze(data)  # an event's data copied from a log: frozen already
        except (TypeError, ValueError):
            pass
    data = draw(st.one_of(st.just(data), st.just(data), st.just(data), st.sampled_from([None, [1], dshkit.freeze(base)])))
    return event_type, data


@settings(max_examples=1500, deadline=None)
@given(case=plain_appends())
def test_the_native_vouch_says_yes_only_to_what_the_python_rule_passes(case: tuple[Any, Any]) -> None:
    event_type, data = case
    try:
        vouched = vouch_plain_append(event_type, data)
    except (TypeError, ValueError) as error:  # data that cannot be frozen: freeze's own error
        with pytest.raises(type(error)) as python:
            dshkit.freeze(data)
        assert str(python.value) == str(error)
        return
    if vouched is None:
        return
    assert type(event_type) is str and event_type in PLAIN_DATA_CHECKS and type(data) in (dict, FrozenDict)
    frozen = prepare_data(event_type, data)  # raises if the Python rules refuse it
    assert type(vouched) is FrozenDict and vouched == frozen
    if type(data) is FrozenDict:
        assert vouched is data  # given back as is, as `freeze` does


@pytest.mark.parametrize("event_type", sorted(GOOD))
def test_good_data_of_the_agents_plain_types_is_vouched_for_frozen(event_type: str) -> None:
    data = GOOD[event_type]
    vouched = vouch_plain_append(event_type, data)
    assert type(vouched) is FrozenDict and vouched == dshkit.freeze(data)
    assert not any(isinstance(value, dict) for value in vouched.values())  # nested mappings frozen too


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("step/start", {"turn": 1}),  # missing step
        ("step/start", {"turn": True, "step": 1}),  # a bool is no int
        ("tool/call", {"turn": 1, "step": 2, "call_id": 7, "name": "n", "arguments": "{}"}),
        ("turn/end", {"turn": 1, "reason": "done"}),
        ("request/header", {"header": {}, "reason": "initial"}),  # a type it leaves to Python
        ("x/unknown", {"ignorable": True}),
        ("user/message", {"turn": 1}),
        (Text("step/start"), {"turn": 1, "step": 2}),
        (3, {"turn": 1}),
        ("step/start", dshkit.freeze({"turn": 1})),  # frozen, missing step
        ("turn/end", dshkit.freeze({"turn": 1, "reason": {"kind": 2}})),
        ("step/start", [("turn", 1), ("step", 2)]),
    ],
)
def test_anything_it_is_not_sure_of_is_left_to_the_python_rules(event_type: Any, data: Any) -> None:
    assert vouch_plain_append(event_type, data) is None


@pytest.mark.parametrize("event_type", sorted(GOOD))
def test_frozen_data_of_the_agents_plain_types_is_vouched_for_as_it_is(event_type: str) -> None:
    """An event read from one log and appended to another: its data is a `FrozenDict` already."""
    data = dshkit.freeze(GOOD[event_type])
    assert vouch_plain_append(event_type, data) is data


def test_data_that_cannot_be_frozen_raises_what_freeze_raises() -> None:
    data = {"turn": 1, "step": 2, "chunk": {"bad": {1, 2}}}
    with pytest.raises(TypeError) as native:
        vouch_plain_append("assistant/chunk", data)
    with pytest.raises(TypeError) as python:
        dshkit.freeze(data)
    assert str(native.value) == str(python.value) and "chunk" in str(native.value)


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("step/start", {"turn": 1}),
        ("step/end", {"turn": "1", "step": 2}),
        ("turn/start", {"turn": None}),
        ("tool/call", {"turn": 1, "step": 2, "call_id": "c", "name": None, "arguments": "{}"}),
        ("turn/end", {"turn": 1, "reason": {"kind": 3}}),
        ("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"bad": {1}}}),
        ("x/unknown", {"turn": 1}),
    ],
)
def test_a_bad_plain_append_raises_the_python_rules_error_and_logs_nothing(event_type: str, data: Any) -> None:
    with pytest.raises((TypeError, ValueError)) as expected:
        prepare_data(event_type, data)
    session = Session()
    with pytest.raises(type(expected.value)) as raised:
        session.append(event_type, data)
    assert str(raised.value) == str(expected.value)
    assert len(session.events) == 0


def test_plain_appends_log_the_frozen_data_detached_from_the_callers_dict() -> None:
    session = Session()
    data: dict[str, Any] = {"turn": 1, "step": 2, "chunk": {"type": "text_delta", "text": "a"}}
    event = session.append("assistant/chunk", data)
    data["chunk"]["text"] = "changed"
    assert event.data == {"turn": 1, "step": 2, "chunk": {"type": "text_delta", "text": "a"}}
    assert type(event.data) is FrozenDict and event.surface_op is None and event.source_event_seqs == ()
    assert session.events[0] == event
    # A str subclass passes the Python rule (isinstance), so the append still takes it.
    call = session.append("tool/call", {"turn": 1, "step": 2, "call_id": Text("c"), "name": "n", "arguments": "{}"})
    assert call.seq == 1 and call.data["call_id"] == "c"
