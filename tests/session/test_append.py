"""The append pipeline: validate and copy, surface rules, commit, observers (notes item 12)."""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path

import pytest

import dshkit
from dshkit import FrozenDict, Message
from dshkit.session import Event, Session, SessionClosedError


def test_event_is_a_frozen_record(build):
    session = Session()
    event = session.append("turn/start", {"turn": 1})
    assert (event.type, event.seq, event.data, event.surface_op, event.source_event_seqs) == (
        "turn/start", 0, {"turn": 1}, None, ()
    )
    assert isinstance(event.time, int) and event.time > 1_600_000_000_000  # ms since the epoch
    assert isinstance(event.data, FrozenDict)
    with pytest.raises(AttributeError):
        event.seq = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.data["turn"] = 2  # type: ignore[index]
    assert session.events[0] is event


def test_user_message_data_is_the_message_itself(build):
    session = Session()
    message = build.user()
    event = session.append("user/message", message)
    assert event.data is message
    assert event.message is message
    assert event.surface_op == "append"
    assert session.messages() == (message,)
    assert session.messages()[0] is message


def test_assistant_and_tool_result_wrap_the_message_beside_envelope_facts(build):
    session = Session()
    reply = build.assistant("calling", ["c1"])
    event = session.append("assistant/message", {"turn": 1, "step": 1, "message": reply, "usage": {"input_tokens": 3}})
    assert event.data["message"] is reply and event.message is reply
    assert event.data["usage"] == {"input_tokens": 3}
    result = build.result("c1")
    tool_event = session.append("tool/result", {"turn": 1, "step": 1, "message": result, "meta": {"ms": 3}})
    assert tool_event.message is result
    assert session.messages() == (reply, result)


def test_seqs_are_contiguous_and_times_never_go_back():
    session = Session()
    events = [session.append("turn/start", {"turn": n}) if n % 2 else session.append("turn/end", {"turn": n - 1, "reason": {"kind": "completed"}}) for n in range(1, 30)]
    assert [event.seq for event in events] == list(range(29))
    assert all(a.time <= b.time for a, b in zip(events, events[1:]))


def test_appended_data_is_detached_from_the_caller():
    session = Session()
    reason = {"kind": "completed", "notes": ["a"]}
    event = session.append("turn/end", {"turn": 1, "reason": reason})
    reason["notes"].append("b")
    reason["kind"] = "changed"
    assert event.data["reason"] == {"kind": "completed", "notes": ("a",)}


@pytest.mark.parametrize(
    "bad, error",
    [
        ({"turn": 1, "x": math.nan}, ValueError),
        ({"turn": 1, "x": math.inf}, ValueError),
        ({"turn": 1, "x": {1, 2}}, TypeError),
        ({"turn": 1, "x": object()}, TypeError),
        ({"turn": 1, "x": 2**70}, ValueError),
        ({"turn": 1, 3: "non-str key"}, TypeError),
    ],
)
def test_data_must_be_lossless_json_and_a_bad_append_writes_nothing(log_path: Path, bad, error):
    with Session.create(log_path, durability="always") as session:
        session.append("turn/start", {"turn": 1})
        size = log_path.stat().st_size
        with pytest.raises(error):
            session.append("turn/start", bad)
        assert len(session.events) == 1
        assert log_path.stat().st_size == size
        assert session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}).seq == 1
    with Session.open(log_path) as reopened:
        assert [event.type for event in reopened.events] == ["turn/start", "turn/end"]


def test_cyclic_data_is_rejected():
    cycle: dict = {"turn": 1}
    cycle["self"] = cycle
    session = Session()
    with pytest.raises(ValueError):
        session.append("turn/start", cycle)
    assert len(session.events) == 0


@pytest.mark.parametrize(
    "event_type, data, error, words",
    [
        ("", {}, TypeError, "non-empty str"),
        (None, {}, TypeError, "non-empty str"),
        ("turn/start", ["not", "a", "mapping"], TypeError, "must be a mapping"),
        ("turn/start", {}, ValueError, "'turn'"),
        ("turn/start", {"turn": "1"}, TypeError, "'turn'"),
        ("turn/start", {"turn": True}, TypeError, "'turn'"),
        ("step/start", {"turn": 1}, ValueError, "'step'"),
        ("turn/end", {"turn": 1, "reason": "completed"}, TypeError, "'reason'"),
        ("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "x"}, TypeError, "'arguments'"),
        ("request/header", {"header": {}, "reason": "because"}, ValueError, "'reason'"),
        ("request/header", {"header": "text", "reason": "initial"}, TypeError, "'header'"),
        ("agent/inbox/spliced", {"target": "next_turn", "inserted": [{"id": "x"}]}, TypeError, "Message"),
        ("plugin/state", {"x": 1}, ValueError, "ignorable"),
        ("assistant/message", {"turn": 1, "step": 1}, ValueError, "'message'"),
        ("assistant/message", {"message": {"id": "x", "role": "assistant"}}, TypeError, "freeze_message"),
        ("assistant/message", {"message": None, "turn": 1}, TypeError, "needs a Message"),
    ],
)
def test_bad_event_data_names_what_is_wrong(event_type, data, error, words):
    session = Session()
    with pytest.raises(error, match=words):
        session.append(event_type, data)
    assert len(session.events) == 0


def test_message_events_check_role_and_source(build):
    session = Session()
    with pytest.raises(TypeError, match="freeze_message"):
        session.append("user/message", {"id": "u1", "role": "user", "content": "hi", "source": {"kind": "user"}})
    with pytest.raises(ValueError, match="user-role"):
        session.append("user/message", build.assistant())
    with pytest.raises(ValueError, match="tool/result"):
        session.append("user/message", build.result("c1"))
    with pytest.raises(ValueError, match="assistant-role"):
        session.append("assistant/message", {"message": build.user()})
    with pytest.raises(ValueError, match="source kind 'tool'"):
        session.append("tool/result", {"message": build.user()})
    with pytest.raises(TypeError, match="'interrupted'"):
        session.append("assistant/message", {"message": build.assistant(), "interrupted": "yes"})
    with pytest.raises(TypeError, match="'code'"):
        session.append("assistant/message", {"message": build.assistant(), "error": {"name": "X"}})
    assert len(session.events) == 0


def test_only_message_events_carry_surface_ops_and_sources(build):
    session = Session()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(ValueError, match="no surface_op"):
        session.append("turn/start", {"turn": 2}, surface_op="append")
    with pytest.raises(ValueError, match="no source_event_seqs"):
        session.append("turn/start", {"turn": 2}, source_event_seqs=[0])
    with pytest.raises(ValueError, match="source_event_seqs"):
        session.append("user/message", build.user(), source_event_seqs=[7])
    with pytest.raises(ValueError, match="surface_op"):
        session.append("user/message", build.user(), surface_op="prepend")
    with pytest.raises(ValueError, match="surface_op"):
        session.append("user/message", build.user(), surface_op={"op": "replace", "start": "0", "end": 1})
    assert len(session.events) == 1
    event = session.append("user/message", build.user(), source_event_seqs=[0])
    assert event.source_event_seqs == (0,)


class _SeqsThatCannotCompare:
    """An iterable of seqs whose `==` raises: the sources are judged by what they hold, not by `==`."""

    def __iter__(self):
        return iter([0])

    def __eq__(self, other: object) -> bool:
        raise AssertionError("source_event_seqs compared with ==")

    __hash__ = None  # type: ignore[assignment]


def test_sources_on_a_plain_event_are_refused_by_the_rule_whatever_they_are():
    session = Session()
    session.append("turn/start", {"turn": 1})
    with pytest.raises(ValueError, match="no source_event_seqs"):
        session.append("step/start", {"turn": 1, "step": 1}, source_event_seqs=_SeqsThatCannotCompare())
    with pytest.raises(ValueError, match="no source_event_seqs"):
        session.append("step/start", {"turn": 1, "step": 1}, source_event_seqs=(0,))
    assert len(session.events) == 1


def test_unknown_types_are_accepted_only_when_marked_ignorable():
    session = Session()
    event = session.append("plugin/notes/state", {"ignorable": True, "notes": ["x"]})
    assert event.data["notes"] == ("x",)
    assert session.messages() == ()


def test_an_id_is_appended_once(build):
    session = Session()
    message = build.user()
    session.append("user/message", message)
    with pytest.raises(ValueError, match="already in the session"):
        session.append("user/message", message)
    assert session.messages() == (message,)


def test_tool_calls_must_be_answered_before_the_conversation_moves_on(build):
    session = Session()
    session.append("user/message", build.user())
    session.append("assistant/message", {"message": build.assistant("calling", ["c1", "c2"])})
    before = session.messages()
    with pytest.raises(ValueError, match="no tool/result yet"):
        session.append("user/message", build.context())
    with pytest.raises(ValueError, match="no tool/result yet"):
        session.append("assistant/message", {"message": build.assistant()})
    with pytest.raises(ValueError, match="no pending tool call"):
        session.append("tool/result", {"message": build.result("c9")})
    assert session.messages() is before
    assert session.pending_tool_calls() == ("c1", "c2")
    session.append("tool/result", {"message": build.result("c2")})
    with pytest.raises(ValueError, match="no pending tool call"):
        session.append("tool/result", {"message": build.result("c2")})
    session.append("tool/result", {"message": build.result("c1")})
    assert session.pending_tool_calls() == ()
    session.append("user/message", build.context())


def test_an_assistant_message_may_not_repeat_a_call_id(build):
    session = Session()
    with pytest.raises(ValueError, match="repeats a tool call id"):
        session.append("assistant/message", {"message": build.assistant("x", ["c1", "c1"])})


def test_call_ids_may_repeat_across_steps(build):
    session = Session()
    for _ in range(3):
        session.append("assistant/message", {"message": build.assistant("x", ["call-0"])})
        session.append("tool/result", {"message": build.result("call-0")})
    assert len(session.messages()) == 6


# -- observers ---------------------------------------------------------------------------


def test_observers_see_each_event_after_it_is_committed(build):
    session = Session()
    seen: list[tuple[Event, int]] = []
    session.subscribe(lambda event: seen.append((event, len(session.events))))
    first = session.append("turn/start", {"turn": 1})
    second = session.append("user/message", build.user())
    assert seen == [(first, 1), (second, 2)]


def test_a_failing_observer_is_contained_and_reported(build, caplog):
    session = Session()
    after: list[int] = []

    def broken(event: Event) -> None:
        raise RuntimeError("observer bug")

    session.subscribe(broken)
    session.subscribe(lambda event: after.append(event.seq))
    with caplog.at_level(logging.ERROR, logger="dshkit.session"):
        event = session.append("turn/start", {"turn": 1})
    assert event.seq == 0 and len(session.events) == 1
    assert after == [0]
    assert "observer" in caplog.text and "observer bug" in caplog.text


def test_observer_errors_go_to_on_error_when_given():
    session = Session()
    reported: list[tuple[BaseException, int]] = []
    session.subscribe(lambda event: 1 / 0, on_error=lambda error, event: reported.append((error, event.seq)))
    session.append("turn/start", {"turn": 1})
    assert [(type(error), seq) for error, seq in reported] == [(ZeroDivisionError, 0)]


def test_an_observer_cannot_append_reentrantly(build):
    session = Session()
    errors: list[BaseException] = []

    def appends(event: Event) -> None:
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})

    session.subscribe(appends, on_error=lambda error, event: errors.append(error))
    session.append("turn/start", {"turn": 1})
    assert [type(error) for error in errors] == [RuntimeError]
    assert "re-entrant" in str(errors[0])
    assert [event.type for event in session.events] == ["turn/start"]


def test_unsubscribe_stops_notifications():
    session = Session()
    seen: list[int] = []
    unsubscribe = session.subscribe(lambda event: seen.append(event.seq))
    session.append("turn/start", {"turn": 1})
    unsubscribe()
    unsubscribe()  # idempotent
    session.append("turn/start", {"turn": 2})
    assert seen == [0]


def test_appends_from_many_threads_stay_contiguous(build):
    session = Session()
    seen: list[int] = []
    session.subscribe(lambda event: seen.append(event.seq))

    def worker() -> None:
        for _ in range(200):
            session.append("user/message", build.user("x"))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [event.seq for event in session.events] == list(range(800))
    assert seen == list(range(800))  # observers run in seq order
    assert len({message.id for message in session.messages()}) == 800


def test_a_closed_session_refuses_appends_but_stays_readable(build, log_path):
    session = Session.create(log_path)
    message = build.user()
    session.append("user/message", message)
    session.close()
    session.close()
    assert session.closed
    with pytest.raises(SessionClosedError):
        session.append("turn/start", {"turn": 1})
    with pytest.raises(SessionClosedError):
        session.sync()
    assert session.messages() == (message,)


def test_message_lookup(build):
    session = Session()
    message = build.user()
    session.append("user/message", message)
    assert session.message(message.id) is message
    assert session.message_event(message.id).seq == 0
    assert session.has_message(message.id)
    assert not session.has_message("nope")
    with pytest.raises(KeyError):
        session.message("nope")
    with pytest.raises(KeyError):
        session.message_event("nope")


def test_events_view_is_read_only(build):
    session = Session()
    session.append("turn/start", {"turn": 1})
    view = session.events
    assert isinstance(view[0:1], tuple) and len(view) == 1 and list(view) == [view[0]]
    with pytest.raises(TypeError):
        view[0] = view[0]  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.append  # type: ignore[attr-defined]  # noqa: B018
    session.append("turn/start", {"turn": 2})
    assert len(view) == 2  # live


def test_imported_messages_keep_their_ids():
    session = Session()
    imported = dshkit.freeze_message({"id": "3f0c-uuid-style", "role": "user", "content": "hi", "source": {"kind": "user"}})
    session.append("user/message", imported)
    assert session.messages()[0].id == "3f0c-uuid-style"
    assert isinstance(session.messages()[0], Message)
