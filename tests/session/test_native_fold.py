"""The native fold of a run of vouched appends (`SurfaceState.fold_appends`, `rust/log/surface_fold.rs`,
behind `Surface.fold_appends`) is held to the Python loop it replaced, written out below as
`reference_fold`: the same surface state, the same index returned, and at a rule break nothing
of that append folded. The state is one object, `SurfaceState`, which `Surface` holds and the
native fold edits: no other object holds its containers."""

from __future__ import annotations

import copy
import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dshkit import Message, freeze_message
from dshkit._core import SurfaceState
from dshkit.session import Session
from dshkit.session.events import Event
from dshkit.session._surface import Surface

from tests.session.conftest import Build


def reference_fold(
    seen: dict[str, int],
    nodes: list[Message],
    node_seqs: list[int],
    positions: dict[str, int],
    pending: dict[str, int],
    pairs: list[tuple[Any, ...]],
    seqs: Any,
    tags: Any,
    messages: Any,
    start: int,
) -> int:
    """The loop of `Surface.fold_appends` as it was in Python."""
    for index in range(start, len(seqs)):
        seq, tag = seqs[index], tags[index]
        message = messages[seq]
        message_id = message.id
        if message_id in seen:
            return index
        position = len(nodes)
        if type(tag) is str:
            if tag not in pending:
                return index
            index = pending.pop(tag)
            pairs[index] = (pairs[index][0], position, pairs[index][2])
        elif pending:
            return index
        elif tag is False:
            seen[message_id] = seq
            continue
        elif tag is not None:
            for call_id in tag:
                pending[call_id] = len(pairs)
                pairs.append((position, None, call_id))
        seen[message_id] = seq
        positions[message_id] = position
        nodes.append(message)
        node_seqs.append(seq)
    return len(seqs)


def message(message_id: str) -> Message:
    return freeze_message({"id": message_id, "role": "user", "content": [{"type": "text", "text": "x"}], "source": {"kind": "user"}})


def empty_state() -> list[Any]:
    """`[seen, nodes, node_seqs, positions, pending, pairs]`, as `Surface` holds them."""
    return [{}, [], [], {}, {}, []]


def state_with(seen: dict[str, int], pending_calls: list[str]) -> list[Any]:
    """A surface that logged the ids of `seen` (one node each) and has `pending_calls` open on its last node."""
    state = empty_state()
    for message_id, seq in seen.items():
        state[0][message_id] = seq
        state[3][message_id] = len(state[1])
        state[1].append(message(message_id))
        state[2].append(seq)
    for call_id in pending_calls:
        state[4][call_id] = len(state[5])
        state[5].append((len(state[1]) - 1, None, call_id))
    return state


def native(state: list[Any]) -> SurfaceState:
    """A `SurfaceState` holding what `state` (`[seen, nodes, node_seqs, positions, pending, pairs]`) holds."""
    surface_state = SurfaceState()
    surface_state.seen.update(state[0])
    surface_state.nodes.extend(state[1])
    surface_state.node_seqs.extend(state[2])
    surface_state.positions.update(state[3])
    surface_state.pending.update(state[4])
    surface_state.pairs.extend(state[5])
    return surface_state


def contents(surface_state: SurfaceState) -> list[Any]:
    """`[seen, nodes, node_seqs, positions, pending, pairs]` of `surface_state`."""
    s = surface_state
    return [s.seen, s.nodes, s.node_seqs, s.positions, s.pending, s.pairs]


def both_ways(state: list[Any], seqs: Any, tags: Any, messages: Any, start: int = 0) -> tuple[int, list[Any]]:
    """Fold natively and by `reference_fold` on copies of `state`: same index, same state, returned."""
    expected_state = copy.deepcopy(state)
    expected = reference_fold(*expected_state, seqs, tags, messages, start)
    native_state = native(copy.deepcopy(state))
    done = native_state.fold_appends(seqs, tags, messages, start)
    assert (done, contents(native_state)) == (expected, expected_state)
    return done, contents(native_state)


def fold_run(state: list[Any], run: list[tuple[str, Any]], first_seq: int = 10) -> tuple[int, list[Any]]:
    seqs = list(range(first_seq, first_seq + len(run)))
    messages = {seq: message(message_id) for seq, (message_id, _) in zip(seqs, run)}
    return both_ways(state, seqs, [tag for _, tag in run], messages)


# -- a run folds; a rule break stops it with nothing of that append folded -------------------


def test_a_run_folds_nodes_calls_answers_and_invisible_appends():
    run = [("u1", None), ("a1", ("c1", "c2")), ("r1", "c2"), ("r2", "c1"), ("s1", False), ("u2", None)]
    done, (seen, nodes, node_seqs, positions, pending, pairs) = fold_run(empty_state(), run)
    assert done == 6
    assert seen == {"u1": 10, "a1": 11, "r1": 12, "r2": 13, "s1": 14, "u2": 15}
    assert [node.id for node in nodes] == ["u1", "a1", "r1", "r2", "u2"]
    assert node_seqs == [10, 11, 12, 13, 15]
    assert positions == {"u1": 0, "a1": 1, "r1": 2, "r2": 3, "u2": 4}
    assert pending == {}
    assert pairs == [(1, 3, "c1"), (1, 2, "c2")]


@pytest.mark.parametrize(
    "state, run, broken",
    [
        pytest.param({"seen": {"u0": 3}}, [("u1", None), ("u0", None)], 1, id="id-already-logged"),
        pytest.param({}, [("u1", None), ("u1", None)], 1, id="id-logged-earlier-in-the-run"),
        pytest.param({}, [("s1", False), ("s1", None)], 1, id="invisible-id-logged-earlier"),
        pytest.param({}, [("u1", None), ("r1", "c1")], 1, id="answer-to-no-call"),
        pytest.param({"seen": {"a0": 3}, "pending": ["c1"]}, [("r1", "c1"), ("r2", "c1")], 1, id="answer-to-an-answered-call"),
        pytest.param({"seen": {"a0": 3}, "pending": ["c1"]}, [("r1", "c2")], 0, id="answer-to-another-call"),
        pytest.param({"seen": {"a0": 3}, "pending": ["c1"]}, [("u1", None)], 0, id="node-while-pending"),
        pytest.param({}, [("a1", ("c1",)), ("s1", False)], 1, id="invisible-while-pending"),
        pytest.param({}, [("a1", ("c1",)), ("a2", ("c2",))], 1, id="calls-while-pending"),
        pytest.param({}, [("a1", ("c1", "c2")), ("r1", "c1"), ("u1", None)], 2, id="node-while-one-call-is-pending"),
    ],
)
def test_a_rule_break_returns_its_index_with_nothing_of_it_folded(state: dict[str, Any], run: list[tuple[str, Any]], broken: int):
    before = state_with(state.get("seen", {}), state.get("pending", []))
    done, after = fold_run(before, run)
    assert done == broken
    # exactly the appends before it are folded: the same state as a run that stops short of it
    _, folded_before = fold_run(before, run[:broken])
    assert after == folded_before


def test_folding_resumes_after_the_append_the_caller_took_the_full_way():
    state = native(state_with({"u0": 1}, []))
    run = [("u1", None), ("u0", None), ("u2", None)]
    seqs, tags = [10, 11, 12], [tag for _, tag in run]
    messages = [None] * 10 + [message(message_id) for message_id, _ in run]  # a list indexed by seq
    assert state.fold_appends(seqs, tags, messages, 0) == 1
    assert state.fold_appends(seqs, tags, messages, 2) == 3
    assert state.seen == {"u0": 1, "u1": 10, "u2": 12}
    assert state.node_seqs == [1, 10, 12]
    assert state.fold_appends(seqs, tags, messages, 3) == 3
    assert state.fold_appends(seqs, tags, messages, 7) == 3


def test_the_given_objects_are_kept_not_copied():
    state = SurfaceState()
    seq = 2**40 + 1  # no cached small int
    answer = "".join(["c", "1"])  # a str object of its own
    calls = (answer,)
    first = message("a1")
    assert state.fold_appends([seq], [calls], {seq: first}, 0) == 1
    seen, nodes, node_seqs, _, pending, pairs = contents(state)
    assert nodes[0] is first and node_seqs[0] is seq and seen["a1"] is seq
    assert pairs[0][2] is answer and next(iter(pending)) is answer


# -- Session.append folds a run of one --------------------------------------------------------


def test_session_append_folds_each_vouched_message_as_a_run_of_one():
    session = Session()
    user = session.append("user/message", Build.user())
    call = session.append("assistant/message", {"turn": 1, "message": Build.assistant("ok", calls=("c1", "c2"))})
    surface = session._surface
    assert surface.pending_calls() == {"c1": 1, "c2": 1}
    second = session.append("tool/result", {"turn": 1, "message": Build.result("c2")})
    assert surface.pending_calls() == {"c1": 1}
    first = session.append("tool/result", {"turn": 1, "message": Build.result("c1")})
    silent = session.append("assistant/message", {"turn": 1, "message": Build.assistant("", calls=())})
    assert surface.pending_calls() == {}
    on_surface = [user, call, second, first]
    assert [m.id for m in session.messages()] == [event.message.id for event in on_surface]  # type: ignore[union-attr]
    assert surface.first_seq(silent.message.id) == silent.seq and surface.position(silent.message.id) is None  # type: ignore[union-attr]
    assert surface.event_seqs(0, 4) == [event.seq for event in on_surface]
    assert surface.pairing().pairs == [(1, 3, "c1"), (1, 2, "c2")]


def test_the_pairs_are_tuples_of_atoms_the_gc_stops_tracking_folded_natively_or_rebuilt():
    # One pair per tool call for the session's life: a list would stay tracked and be walked by
    # every full collection (issue 37); a tuple of ints, None and a str is untracked at the
    # first collection that looks at it.
    surface = Surface()
    calls, answer = Build.assistant("ok", calls=("c1", "c2")), Build.result("c1")
    assert surface.fold_appends([0, 1, 2], [None, ("c1", "c2"), "c1"], {0: message("u1"), 1: calls, 2: answer}, 0) == 3
    folded = surface.pairing().pairs
    gc.collect()
    assert folded == [(1, 2, "c1"), (1, None, "c2")]  # answered, and pending
    assert not any(map(gc.is_tracked, folded))
    surface.fold(Event("user/message", 3, 1, message("s1"), {"op": "replace", "start": 0, "end": 1}))
    rebuilt = surface.pairing().pairs  # rebuilt in Python (`_surface._pair`) after the replace
    gc.collect()
    assert rebuilt == [(1, 2, "c1"), (1, None, "c2")] and not any(map(gc.is_tracked, rebuilt))

def test_fold_new_folds_what_admit_new_vouched_for():
    session = Session()
    surface = Surface()
    event_type, data = "user/message", Build.user()
    admitted = surface.admit_new(event_type, data, None, (), [])
    assert admitted[3] is not None  # vouched for natively
    event = session.append(event_type, data)
    surface.fold_new(event, admitted[3])
    assert list(surface.messages()) == [event.message]
    assert surface.first_seq(data.id) == event.seq == surface.event_seq(data.id)


# -- bad arguments --------------------------------------------------------------------------


def good_arguments() -> list[Any]:
    return [[0], [None], [message("u1")], 0]


@pytest.mark.parametrize(
    "position, bad, words",
    [
        (0, {0}, "seqs must be a list or a tuple, not set"),
        (0, ["0"], "seqs[0] must be an int, not str"),
        (1, "x", "tags must be a list or a tuple, not str"),
        (1, [1], "tags[0] must be None, a tuple of call ids (str), a call id (str) or False, not 1"),
        (1, [True], "not True"),
        (1, [["c1"]], "not ['c1']"),
        (1, [("c1", 2)], "not ('c1', 2)"),
        (2, (message("u1"),), "messages must be a list indexed by seq or a dict keyed by seq, not tuple"),
        (2, [None], "messages[0] must be a Message, not NoneType"),
        (2, {0: {"id": "u1"}}, "messages[0] must be a Message, not dict"),
        (3, "0", "start must be an int >= 0, not '0'"),
    ],
)
def test_bad_argument_types_raise_a_type_error_naming_them(position: int, bad: Any, words: str):
    state = SurfaceState()
    arguments = good_arguments()
    arguments[position] = bad
    with pytest.raises(TypeError) as raised:
        state.fold_appends(*arguments)
    assert words in str(raised.value)
    assert contents(state) == empty_state()  # nothing folded


def test_bad_lengths_and_missing_messages_are_refused_before_anything_is_folded():
    state = SurfaceState()
    arguments = good_arguments()
    arguments[1] = [None, None]
    with pytest.raises(ValueError, match=r"seqs and tags differ in length \(1 and 2\)"):
        state.fold_appends(*arguments)
    arguments = good_arguments()
    arguments[0] = [-1]
    with pytest.raises(ValueError, match=r"seqs\[0\] is no seq: -1"):
        state.fold_appends(*arguments)
    arguments = good_arguments()
    arguments[0] = [4]
    with pytest.raises(IndexError, match="messages has no item 4"):
        state.fold_appends(*arguments)
    arguments = good_arguments()
    arguments[2] = {1: message("u1")}
    with pytest.raises(KeyError):
        state.fold_appends(*arguments)
    assert contents(state) == empty_state()


# -- one owner: the surface holds one state, which the native fold edits ----------------------


def test_the_surface_folds_into_the_one_state_it_holds():
    surface = Surface()
    state = surface._state
    assert type(state) is SurfaceState and not hasattr(surface, "_nodes") and not hasattr(surface, "_seen")
    first, second = message("u1"), message("u2")
    assert surface.fold_appends([0], [None], {0: first}, 0) == 1
    surface.fold(Event("user/message", 1, 1, second, "append"))
    assert surface._state is state and state.nodes == [first, second] and state.node_seqs == [0, 1]
    assert state.seen == {"u1": 0, "u2": 1} and list(surface.messages()) == [first, second]


def test_positions_by_id_are_built_at_the_first_lookup_and_kept_current_from_then_on():
    surface = Surface()
    state = surface._state
    first, second, third = message("u1"), message("u2"), message("u3")
    assert surface.fold_appends([0, 1], [None, None], {0: first, 1: second}, 0) == 2
    # An open folds every message without indexing them by id.
    assert not state.positions_current and state.positions == {}
    assert surface.position("u2") == 1 and surface.node("u1") is first and surface.event_seq("u2") == 1
    assert state.positions_current and state.positions == {"u1": 0, "u2": 1}
    assert surface.position("nope") is None
    # From the first lookup on, both folds keep it current.
    surface.fold(Event("user/message", 2, 1, third, "append"))
    assert surface.fold_appends([3], [None], {3: message("u4")}, 0) == 1
    assert state.positions == {"u1": 0, "u2": 1, "u3": 2, "u4": 3}
    # A range replace makes it stale; the next lookup rebuilds it from the nodes.
    summary = message("s1")
    surface.fold(Event("user/message", 4, 1, summary, {"op": "replace", "start": 0, "end": 2}))
    assert not state.positions_current
    assert surface.position("s1") == 0 and surface.position("u1") is None and surface.position("u4") == 2
    assert state.positions == {"s1": 0, "u3": 1, "u4": 2}


def test_the_state_refuses_to_fold_while_its_pairing_is_stale_and_keeps_its_container_types():
    state = SurfaceState()
    state.paired = False  # as after a replace, until `Surface.pairing` rebuilds it
    with pytest.raises(ValueError, match="pairing of tool calls is not current"):
        state.fold_appends(*good_arguments())
    assert contents(state) == empty_state()
    with pytest.raises(TypeError):
        state.nodes = ()  # type: ignore[assignment]
    for name in ("seen", "node_seqs", "positions", "pending", "pairs"):  # replaced by no one: edited in place
        with pytest.raises(AttributeError):
            setattr(state, name, getattr(state, name).copy())


def test_a_replace_makes_a_new_node_list_and_the_pairing_is_rebuilt_before_the_next_fold():
    surface = Surface()
    calls = freeze_message(
        {
            "id": "a1",
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
    )
    assert surface.fold_appends([0, 1], [None, ("c1",)], {0: message("u1"), 1: calls}, 0) == 2
    history = surface.messages()
    old_nodes = surface._state.nodes
    surface.fold(Event("user/message", 2, 1, message("s1"), {"op": "replace", "start": 0, "end": 1}))
    state = surface._state
    assert state.nodes is not old_nodes and list(history) == [old_nodes[0], calls]
    assert not state.paired
    assert surface.pending_calls() == {"c1": 1} and state.paired  # rebuilt from the nodes
    assert state.pairs == [(1, None, "c1")]


# -- random runs: the native fold is the Python loop ------------------------------------------

IDS = ["m1", "m2", "m3", "m4", "m5"]
CALLS = ["c1", "c2", "c3"]
TAGS = st.one_of(
    st.none(),
    st.just(False),
    st.sampled_from(CALLS),
    st.lists(st.sampled_from(CALLS), min_size=1, max_size=3, unique=True).map(tuple),
)


@settings(max_examples=400, deadline=None)
@given(
    seen=st.dictionaries(st.sampled_from(IDS), st.integers(0, 5), max_size=2),
    open_calls=st.lists(st.sampled_from(CALLS), max_size=2, unique=True),
    run=st.lists(st.tuples(st.sampled_from(IDS), TAGS), max_size=10),
    start=st.integers(0, 3),
    as_list=st.booleans(),
)
def test_the_native_fold_is_the_python_loop_on_random_runs(
    seen: dict[str, int], open_calls: list[str], run: list[tuple[str, Any]], start: int, as_list: bool
):
    state = state_with(seen, open_calls if seen else [])
    seqs = list(range(10, 10 + len(run)))
    tags = [tag for _, tag in run]
    by_seq = {seq: message(message_id) for seq, (message_id, _) in zip(seqs, run)}
    messages: Any = [by_seq.get(seq) for seq in range(10 + len(run))] if as_list else by_seq
    done, state = both_ways(state, seqs, tags, messages, min(start, len(run)))
    # and resuming past each break, as `decode_stored` does, stays the same as well
    while done < len(seqs):
        done, state = both_ways(state, seqs, tags, messages, done + 1)
