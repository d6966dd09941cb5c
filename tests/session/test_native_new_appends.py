"""`Session.append`'s native vouch (`vouch_new_append`, `Surface.admit_new`/`fold_new`) is held to
the Python rules: it never vouches for what `prepare_data`, `prepare_surface_op`,
`prepare_source_seqs` or `_check_append` refuse, and appends give the same events, the same
errors and the same surface as admitting and folding each event the full way."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dshkit
from dshkit import freeze_message
from dshkit._core import vouch_new_append
from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session
from dshkit.session import _surface as surface_module
from dshkit.session.events import Event, prepare_data, prepare_source_seqs, prepare_surface_op
from dshkit.session._surface import Surface, _call_ids, is_model_visible

from tests.session.test_native_appends import GOOD_SOURCES, ROLES, STEPS, blocks, envelope_values, sources, step_record, surface_state

EVENT_TYPES = ["user/message", "assistant/message", "tool/result"]


@st.composite
def new_appends(draw: Any) -> tuple[Any, Any, Any, Any, int]:
    """`Session.append`'s arguments for a message event at seq `seq`: each drawn mostly from the
    ones that pass, else from anything, so most break one rule at most."""

    def field(good: Any, anything: st.SearchStrategy[Any]) -> Any:
        return draw(st.one_of(st.just(good), st.just(good), anything))

    event_type = field(draw(st.sampled_from(EVENT_TYPES)), st.sampled_from(["turn/start", "", 3]))
    kind = event_type if event_type in ROLES else "user/message"
    good_content: list[Any] = (
        [{"type": "tool_result", "tool_call_id": "c1", "content": [], "is_error": False}]
        if kind == "tool/result"
        else draw(st.lists(st.sampled_from([{"type": "text", "text": "x"}, {"type": "text", "text": ""}, {"type": "reasoning", "text": ""}]), max_size=2))
    )
    content = field(good_content, st.lists(blocks, max_size=3))
    message = {"id": "m1", "role": field(ROLES[kind], st.sampled_from(["user", "assistant"])), "content": content, "source": field(GOOD_SOURCES[kind], sources)}
    try:
        frozen_message = freeze_message(message)
    except (TypeError, ValueError):
        assume(False)
    data: Any = frozen_message
    if kind != "user/message":
        good_envelope = {"turn": 1, "step": 2, "usage": {"input_tokens": 3}}
        envelope = field(good_envelope, st.dictionaries(st.sampled_from(["turn", "step", "interrupted", "usage", "error", "other"]), envelope_values, max_size=3))
        data = field({**envelope, "message": frozen_message}, st.sampled_from([envelope, dshkit.freeze({**envelope, "message": frozen_message}), [frozen_message]]))
    data = field(data, st.sampled_from([message, None, {"message": message}]))
    seq = draw(st.integers(0, 3))
    surface_op = field(None, st.sampled_from(["append", "replace", {"op": "replace", "start": 0, "end": 1}, b"append"]))
    source_seqs = field((), st.one_of(st.tuples(st.one_of(st.integers(-1, 4), st.booleans())), st.just([0]), st.just("0")))
    return event_type, data, surface_op, source_seqs, seq


@settings(max_examples=800, deadline=None)
@given(case=new_appends())
def test_the_native_vouch_never_says_yes_to_an_append_the_rules_refuse(case: tuple[Any, Any, Any, Any, int]):
    event_type, data, surface_op, source_seqs, seq = case
    vouched = vouch_new_append(event_type, data, surface_op, source_seqs, seq)
    if vouched is None:
        return
    frozen = prepare_data(event_type, data)
    assert prepare_surface_op(event_type, surface_op) == "append"
    assert prepare_source_seqs(source_seqs, seq) == source_seqs
    message = frozen if event_type == "user/message" else frozen["message"]
    call_ids = _call_ids(message) if event_type == "assistant/message" else ()
    assert len(set(call_ids)) == len(call_ids)
    assert vouched[0] == frozen and type(vouched[0]) is type(frozen) and vouched[1] is message
    tag = vouched[2]
    if event_type == "assistant/message" and not is_model_visible(message):
        assert tag is False
    elif event_type == "tool/result":
        assert tag == message.source["call_id"]
    else:
        assert tag == (call_ids or None)


def test_a_plain_good_append_is_vouched_for():
    message = dshkit.create_assistant_message([{"type": "text", "text": "hi"}], provider="p", model="m")
    data = {"turn": 1, "step": 1, "message": message, "usage": {"input_tokens": 3}}
    frozen, vouched_message, tag = vouch_new_append("assistant/message", data, None, (0,), 1)  # type: ignore[misc]
    assert frozen == prepare_data("assistant/message", data) and vouched_message is message and tag is None


# -- stateful rules: the same events, errors and surface as admitting and folding the full way ----


def step_append(step: tuple[Any, ...]) -> tuple[str, Any] | None:
    """`Session.append`'s type and data for one of `test_native_appends.STEPS`' steps."""
    if step[0] == "turn":
        return None
    record = step_record(0, step)
    event_type, data = record["type"], record["data"]
    if event_type == "user/message":
        return event_type, freeze_message(data)
    return event_type, {**data, "message": freeze_message(data["message"])}


@settings(max_examples=300, deadline=None)
@given(steps=STEPS)
def test_appends_give_the_events_errors_and_surface_of_the_full_way(steps: list[tuple[Any, ...]]):
    session = Session()
    surface = Surface()  # the full way: admit, then fold
    events: list[Event] = []
    for step in steps:
        append = step_append(step)
        if append is None:
            continue
        event_type, data = append
        try:
            frozen, op, source_seqs = surface.admit(event_type, data, None, (), events)
            expected: Any = None
        except (TypeError, ValueError) as error:
            expected = error
        try:
            event = session.append(event_type, data)
        except (TypeError, ValueError) as error:
            assert type(error) is type(expected) and str(error) == str(expected)
            continue
        assert expected is None
        assert event == Event(event_type, len(events), event.time, frozen, op, source_seqs)
        events.append(event)
        surface.fold(event)
        assert surface_state(session._surface) == surface_state(surface)
    assert list(session.events) == events


async def _noop(arguments: Any, ctx: Any) -> str:
    return "ok"


def _agent_turn(steps: int) -> Session:
    call = [
        {"type": "usage", "usage": {"prompt_tokens": 100, "completion_tokens": 5}},
        {"type": "finish", "reason": "tool_calls"},
    ]
    script: list[Any] = [
        [{"type": "tool_call_delta", "index": 0, "id": f"call-{step}", "name": "noop", "arguments": "{}"}, *call] for step in range(steps - 1)
    ]
    script.append([{"type": "text_delta", "text": "done"}, {"type": "finish", "reason": "stop"}])
    tools = [Tool("noop", "does nothing", {"type": "object", "properties": {}}, _noop)]
    agent = Agent(ScriptedModel(script), session=Session(), tools=tools, system="s")

    async def run() -> None:
        agent.followup(dshkit.create_user_message("go", source={"kind": "user"}))
        await agent.when_idle()

    asyncio.run(run())
    return agent.session


def test_an_agent_turn_appends_through_the_vouch_to_what_the_full_way_gives(monkeypatch: pytest.MonkeyPatch):
    vouched: list[str] = []

    def spy(event_type: Any, *rest: Any) -> Any:
        answer = vouch_new_append(event_type, *rest)
        if answer is not None:
            vouched.append(event_type)
        return answer

    monkeypatch.setattr(surface_module, "vouch_new_append", spy)
    session = _agent_turn(steps=4)
    assert vouched == ["user/message"] + ["assistant/message", "tool/result"] * 3 + ["assistant/message"]
    monkeypatch.setattr(surface_module, "vouch_new_append", lambda *arguments: None)  # the full way only
    replay = Session()
    for event in session.events:
        surface_op = None if event.surface_op == "append" else event.surface_op
        replay.append(event.type, event.data, surface_op=surface_op, source_event_seqs=event.source_event_seqs)
    assert [event[:2] + event[3:] for event in replay.events] == [event[:2] + event[3:] for event in session.events]
    assert surface_state(replay._surface) == surface_state(session._surface)
    assert json.dumps([m.id for m in replay.messages()]) == json.dumps([m.id for m in session.messages()])
