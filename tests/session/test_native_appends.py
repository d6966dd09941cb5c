"""The message appends `decode_records` vouches for natively (`rust/log/message_vouch.rs`) and the one
loop that checks and folds them (`Surface.fold_appends`) are held to the Python rules: nothing
the full path refuses is vouched for, and a log opens to the same surface and the same errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dshkit._core import decode_records
from dshkit.session import Session, SessionCorruptError, SessionIntegrityWarning
from dshkit.session._log.event_codec import decode_events, decode_record, encode_event
from dshkit.session.events import Event, prepare_data, prepare_source_seqs, prepare_surface_op
from dshkit.session._log.checksums import seal_line
from dshkit.session._surface import Surface, _call_ids, is_model_visible

from tests.session.conftest import Build

FILLER = '{"seq":%d,"time":1,"type":"turn/start","data":{"turn":1}}'

texts = st.sampled_from(["", "x", "c1", "c2"])
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "reasoning"]), "text": texts}),
    st.fixed_dictionaries({"type": st.just("tool_call"), "id": st.one_of(texts, st.integers(0, 2)), "name": st.just("f"), "arguments": st.just("{}")}),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_call_id": st.one_of(texts, st.none()), "content": st.just([]), "is_error": st.booleans()}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "custom"]), "url": st.just("u")}),
)
sources = st.one_of(
    st.fixed_dictionaries({"kind": st.sampled_from(["user", "plugin", "model", "tool", "other"])}),
    st.fixed_dictionaries({"kind": st.just("tool"), "call_id": st.one_of(texts, st.integers(0, 1))}),
    st.fixed_dictionaries({"kind": st.just("model"), "provider": st.just("p"), "model": st.just("m")}),
    st.fixed_dictionaries({"kind": st.just("plugin"), "plugin": st.just("p")}),
)
envelope_values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.just("s"), st.just({}), st.just({"name": "n", "code": "c"}), st.just({"name": 1, "code": "c"}))


ROLES = {"user/message": "user", "assistant/message": "assistant", "tool/result": "user"}
GOOD_SOURCES = {
    "user/message": {"kind": "user"},
    "assistant/message": {"kind": "model", "provider": "p", "model": "m"},
    "tool/result": {"kind": "tool", "call_id": "c1"},
}


@st.composite
def message_records(draw: Any) -> tuple[str, int, str]:
    """A message event's record at seq `seq` (after `seq` filler events): each field is either
    drawn from the ones that pass (mostly) or from anything, so most records break one rule at most."""

    def field(good: Any, anything: st.SearchStrategy[Any]) -> Any:
        return draw(st.one_of(st.just(good), st.just(good), anything))

    event_type = draw(st.sampled_from(["user/message", "assistant/message", "tool/result"]))
    good_content: list[Any] = (
        [{"type": "tool_result", "tool_call_id": "c1", "content": [], "is_error": False}]
        if event_type == "tool/result"
        else draw(st.lists(st.sampled_from([{"type": "text", "text": "x"}, {"type": "text", "text": ""}, {"type": "reasoning", "text": ""}]), max_size=2))
    )
    message = {
        "id": "m1",
        "role": field(ROLES[event_type], st.sampled_from(["user", "assistant", "system"])),
        "content": field(good_content, st.lists(blocks, max_size=3)),
        "source": field(GOOD_SOURCES[event_type], sources),
    }
    data: Any = message
    if event_type != "user/message":
        good_envelope = {"turn": 1, "step": 2, "usage": {"input_tokens": 3}}
        data = field(good_envelope, st.dictionaries(st.sampled_from(["turn", "step", "interrupted", "usage", "error", "other"]), envelope_values, max_size=3))
        data = {**data, "message": message}
    seq = draw(st.integers(0, 3))
    surface_op = field("append", st.sampled_from([None, "replace", {"op": "replace", "start": 0, "end": 1}]))
    source_seqs = field([], st.lists(st.one_of(st.integers(-1, 4), st.booleans(), st.just("0")), max_size=2))
    record = {"seq": seq, "time": 1, "type": event_type, "data": data, "surface_op": surface_op, "source_event_seqs": source_seqs}
    return json.dumps(record), seq, event_type


@settings(max_examples=600, deadline=None)
@given(case=message_records())
def test_the_native_pass_never_vouches_for_an_append_the_rules_refuse(case: tuple[str, int, str]):
    record, seq, event_type = case
    records = [FILLER % index for index in range(seq)] + [record]
    _, _, messages, _, _, pending = decode_records(records, Event)
    runs = [item for item in pending if type(item) is tuple]
    if not runs:
        return
    assert runs == [([seq], runs[0][1])]
    tag = runs[0][1][0]
    event, _ = decode_record(record, seq, str)  # the Python decoder accepts it, to the same message
    assert event.message == messages[seq]
    # every stateless rule passes, and the fold will see an append
    prepare_data(event.type, event.data)
    assert prepare_surface_op(event.type, event.surface_op) == "append" == event.surface_op
    prepare_source_seqs(event.source_event_seqs, seq)
    message = event.message
    call_ids = _call_ids(message) if event.type == "assistant/message" else ()
    assert len(set(call_ids)) == len(call_ids)
    # and the tag says what the fold does with it
    if event.type == "assistant/message" and not is_model_visible(message):
        assert tag is False
    elif event.type == "tool/result":
        assert tag == message.source["call_id"]
    else:
        assert tag == (call_ids or None)


def test_an_ordinary_conversation_is_vouched_for_in_runs():
    session = Session()
    Build.tool_turn(session, calls=("c1", "c2"))
    records = [encode_event(event) for event in session.events]
    _, _, _, _, _, pending = decode_records(records, Event)
    message_seqs = [event.seq for event in session.events if event.message is not None]
    runs = [item for item in pending if type(item) is tuple]
    assert [seq for seqs, _ in runs for seq in seqs] == message_seqs


# -- stateful rules: the same surface and the same errors as folding every event the full way ----

STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.sampled_from(["u1", "u2", "u3"])),
        st.tuples(st.just("call"), st.sampled_from(["a1", "a2"]), st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=2, unique=True)),
        st.tuples(st.just("silent"), st.sampled_from(["s1", "s2"])),
        st.tuples(st.just("result"), st.sampled_from(["r1", "r2", "r3"]), st.sampled_from(["c1", "c2", "c3"])),
        st.tuples(st.just("turn"), st.just("")),
    ),
    max_size=12,
)


def step_record(seq: int, step: tuple[Any, ...]) -> dict[str, Any]:
    kind, message_id = step[0], step[1]
    source = {"kind": "model", "provider": "p", "model": "m"}
    if kind == "turn":
        return {"seq": seq, "time": 1, "type": "turn/start", "data": {"turn": 1}}
    if kind == "user":
        event_type, data = "user/message", {"id": message_id, "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}}
    elif kind in ("call", "silent"):
        content = [{"type": "text", "text": "" if kind == "silent" else "calling"}]
        content += [{"type": "tool_call", "id": call, "name": "f", "arguments": "{}"} for call in (step[2] if kind == "call" else ())]
        event_type, data = "assistant/message", {"turn": 1, "message": {"id": message_id, "role": "assistant", "content": content, "source": source}}
    else:
        call = step[2]
        block = {"type": "tool_result", "tool_call_id": call, "content": [{"type": "text", "text": "ok"}], "is_error": False}
        message = {"id": message_id, "role": "user", "content": [block], "source": {"kind": "tool", "call_id": call}}
        event_type, data = "tool/result", {"turn": 1, "message": message}
    return {"seq": seq, "time": 1, "type": event_type, "data": data, "surface_op": "append", "source_event_seqs": []}


def surface_state(surface: Surface) -> Any:
    state = surface.pairing()
    return (
        [node.id for node in state.nodes],
        state.node_seqs,
        surface._positions(),
        state.seen,
        [list(pair) for pair in state.pairs],
        state.pending,
    )


def full_way(records: list[str]) -> tuple[Any, list[str]]:
    """Every event admitted and folded one at a time, as `load_events` did before runs."""
    surface = Surface()
    broken: list[str] = []

    def fold(event: Event) -> None:
        try:
            surface.admit(event.type, event.data, event.surface_op, event.source_event_seqs, [None] * event.seq)  # type: ignore[list-item]
        except (TypeError, ValueError) as error:
            broken.append(f"line {event.seq + 2}: {error}")
        surface.fold(event)

    decode_events(records, str, fold)
    return surface_state(surface), broken


@settings(max_examples=300, deadline=None)
@given(steps=STEPS)
def test_a_log_opens_to_the_surface_and_errors_of_the_full_way(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Any, ...]]):
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    with Session.create(path):
        pass
    records = [json.dumps(step_record(seq, step)) for seq, step in enumerate(steps)]
    with path.open("ab") as log:
        for record in records:
            log.write(seal_line(record))
    expected, broken = full_way(records)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Session.open(path, read_only=True) as session:
            assert surface_state(session._surface) == expected
    problems = [w.message for w in caught if isinstance(w.message, SessionIntegrityWarning)]
    if broken:
        assert len(problems) == 1 and f"{len(broken)} record(s)" in str(problems[0])
        assert str(problems[0]).endswith(broken[0])
        with pytest.raises(SessionCorruptError) as refused:
            Session.open(path)
        line, reason = broken[0].split(": ", 1)
        assert f"{line}: bad " in str(refused.value) and str(refused.value).endswith(reason)
    else:
        assert not problems
