"""A session's events stay out of the cyclic GC (issue 37): an `Event` holds only untracked
values (str, int, frozen data, a frozen surface operation, a tuple of seqs), so nothing it reaches
can lead back to it, and `new_event` untracks it; one holding anything tracked stays tracked."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path
from typing import Any, NamedTuple

import pytest

import dshkit
from dshkit._core import new_event
from dshkit.session import Session
from dshkit.session._log.event_log import HOT
from dshkit.session.events import Event

from support import assert_no_collection_during
from tests.core.test_untracked import assert_closed_and_untracked


def _turn(session: Session, turn: int) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    prompt = session.append("user/message", dshkit.create_user_message(f"q{turn}", source={"kind": "user"}))
    call = {"type": "tool_call", "id": f"c{turn}", "name": "f", "arguments": "{}"}
    reply = dshkit.create_assistant_message([call], provider="p", model="m")
    session.append("assistant/message", {"turn": turn, "step": 1, "message": reply}, source_event_seqs=[prompt.seq])
    result = dshkit.create_tool_result_message(f"c{turn}", "ok")
    session.append("tool/result", {"turn": turn, "step": 1, "message": result})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "done", "detail": [1, 2]}})


def test_appended_events_of_every_kind_are_untracked_and_reach_nothing_tracked() -> None:
    session = Session()
    _turn(session, 1)
    rewritten = session.messages()[0].with_content("q1 again")
    session.replace(rewritten)
    assert {event.type for event in session.events} >= {"user/message", "assistant/message", "tool/result", "turn/end"}
    assert any(event.source_event_seqs for event in session.events)
    assert any(event.surface_op not in (None, "append") for event in session.events)
    for event in session.events:
        assert not gc.is_tracked(event), event.type
        assert_closed_and_untracked(event)


def test_events_rebuilt_from_the_columns_and_from_a_reopened_log_are_untracked(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    for turn in range(1, 2 * HOT // 6 + 20):  # past 2 * HOT events: the oldest move into columns
        _turn(session, turn)
    in_memory = list(session.events)
    session.close()
    reopened = Session.open(path, read_only=True)
    for event in [*in_memory, *reopened.events]:
        assert not gc.is_tracked(event), (event.seq, event.type)
        assert_closed_and_untracked(event)
    reopened.close()


class Box:
    event: Any = None


def test_an_event_holding_a_tracked_object_stays_tracked_and_its_cycle_is_collected() -> None:
    box = Box()
    holder = [box]
    event = new_event(Event, ("x/y", 0, 0, holder, None, ()))
    assert gc.is_tracked(event)
    box.event = event  # box -> event -> holder -> box: a cycle only the GC can free
    alive = weakref.ref(box)
    del box, holder, event
    gc.collect()
    assert alive() is None


def test_a_tuple_of_seqs_is_untracked_with_its_event_and_a_mutable_one_keeps_it_tracked() -> None:
    seqs = tuple([1, 2, 3])  # a new tuple: tracked until the GC or new_event looks at it
    assert new_event(Event, ("x/y", 0, 0, None, None, seqs)) == ("x/y", 0, 0, None, None, (1, 2, 3))
    assert not gc.is_tracked(seqs)
    assert gc.is_tracked(new_event(Event, ("x/y", 0, 0, None, None, ([1],))))


class WithDict(tuple):  # type: ignore[type-arg]
    pass


class Plain(NamedTuple):
    a: int


@pytest.mark.parametrize("cls", [dict, WithDict, object])
def test_new_event_refuses_a_class_that_is_no_tuple_or_has_a_dict(cls: type) -> None:
    with pytest.raises(TypeError, match="tuple subclass without a __dict__"):
        new_event(cls, (1,))


def test_new_event_builds_any_named_tuple_like_tuple_new() -> None:
    assert new_event(Plain, (5,)) == tuple.__new__(Plain, (5,)) and type(new_event(Plain, (5,))) is Plain


def test_new_event_holds_each_field_once_and_releases_it_with_the_event() -> None:
    data = dshkit.freeze({"turn": 1})
    fields = ("x/y", 10_000, 20_000, data, "append", (1, 2))  # no None: its count moves with everything
    counts = [sys.getrefcount(field) for field in fields]
    held = sys.getrefcount(data)
    events = [new_event(Event, fields) for _ in range(1000)]
    assert sys.getrefcount(data) == held + 1000
    del events
    assert [sys.getrefcount(field) for field in fields] == counts


def test_a_reopen_brings_collections_closer_only_by_what_it_leaves_tracked_capable(tmp_path: Path) -> None:
    # A re-open makes a Message and its FrozenDicts per message, all untracked: they must not count
    # toward the next collection (rust/value/recycle.rs), or a re-open runs dozens of them. What
    # still counts is CPython's own (a message's content tuple, the event log's lists and tuples).
    path = tmp_path / "log.jsonl"
    session = Session.create(path)
    for turn in range(1, 301):  # 1,800 events: decoded with the sorting thread (sort_ahead.rs)
        _turn(session, turn)
    session.close()
    enabled = gc.isenabled()
    gc.disable()  # the count is still kept; no collection resets it while this runs
    try:
        gc.collect()
        before = gc.get_count()[0]
        reopened = Session.open(path, read_only=True)
        messages = reopened.messages()
        counted = gc.get_count()[0] - before
    finally:
        if enabled:
            gc.enable()
    assert len(messages) == 900 and len(reopened.events) == 1_800
    assert counted < 3 * len(messages), counted  # a message and its FrozenDicts alone are 3 or more
    assert [message for message in messages if gc.is_tracked(message)] == []
    reopened.close()


def test_a_reopened_logs_type_and_message_columns_are_out_of_the_gc_and_stay_closed(tmp_path: Path) -> None:
    # decode_records hands EventLog two lists of one item per event, untracked (rust/log/records.rs):
    # the GC never walks them, so nothing they hold may be tracked, before or after appends.
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    for turn in range(1, 201):  # 1,200 events: decoded with the sorting thread (sort_ahead.rs)
        _turn(session, turn)
    session.close()
    reopened = Session.open(path)
    for turn in range(201, 201 + 2 * HOT // 6 + 20):  # past 2 * HOT more: hot events move into the columns
        _turn(reopened, turn)
    columns = reopened._events._types, reopened._events._messages
    assert len(columns[0]) == len(columns[1]) > 1_200  # the decoded events, and hot ones moved in
    assert {type(item) for item in columns[1]} == {type(None), dshkit.Message}
    for column in columns:
        assert not gc.is_tracked(column)
        assert [type(item).__name__ for item in column if gc.is_tracked(item)] == []
    assert len(reopened.messages()) == 3 * (200 + 2 * HOT // 6 + 20)
    reopened.close()


def test_the_surfaces_sequences_are_out_of_the_gc_and_stay_closed(tmp_path: Path) -> None:
    # SurfaceState's nodes, node_seqs and pairs (rust/log/surface_fold.rs) hold one item per
    # message or call, untracked: nothing they hold may be tracked, after a re-open, appends
    # and a replace (which gives the surface a new list of nodes).
    path = tmp_path / "log.jsonl"
    session = Session.create(path, durability="none")
    for turn in range(1, 201):
        _turn(session, turn)
    session.close()
    reopened = Session.open(path)
    _turn(reopened, 201)
    reopened.replace(reopened.messages()[0].with_content("q1 again"))
    state = reopened._surface._state
    assert len(state.nodes) == len(state.node_seqs) == 603 and len(state.pairs) == 201
    gc.collect()  # the pairs made in Python are tuples of atoms: CPython untracks them at a collection
    for sequence in (state.nodes, state.node_seqs, state.pairs):
        assert not gc.is_tracked(sequence)
        for item in sequence:
            assert_closed_and_untracked(item)
    assert reopened.messages()[0].content[0]["text"] == "q1 again"
    reopened.close()


def _records(tmp_path: Path, turns: int) -> list[bytes]:
    from dshkit.session._log.checksums import unseal_line

    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        for turn in range(1, turns + 1):
            _turn(session, turn)
    records = [unseal_line(line) for line in path.read_bytes().splitlines()[1:]]
    assert all(record is not None for record in records)
    return records  # type: ignore[return-value]


def test_a_decode_starts_no_collection_and_leaves_the_gc_as_it_found_it(tmp_path: Path) -> None:
    from dshkit._core import decode_records

    records = _records(tmp_path, 1500)  # tens of thousands of tuples, strs and frozen values built
    columns = assert_no_collection_during(lambda: decode_records(records, Event), lambda: decode_records(42, Event))
    assert isinstance(columns, tuple)
