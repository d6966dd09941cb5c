"""Derivation: cached frozen history, identity-preserving replacement and compaction (item 11)."""

from __future__ import annotations

from pathlib import Path

import pytest

import dshkit
from dshkit.session.compactions import read_compactions
from dshkit.session import Session, UnknownEventError, replace_op
from dshkit.session._log.checksums import seal_line


def test_messages_hands_out_the_same_frozen_objects_and_caches_them(build):
    session = Session()
    first, second = build.user("a"), build.user("b")
    session.append("user/message", first)
    session.append("user/message", second)
    history = session.messages()
    assert history == (first, second)
    assert history[0] is first and history[1] is second
    assert session.messages() is history  # cached: no re-derivation on read
    session.append("turn/start", {"turn": 1})
    assert session.messages() is history  # non-message events leave the history alone


def test_one_more_append_extends_the_history(build):
    session = Session()
    messages = [build.user(str(n)) for n in range(50)]
    for message in messages:
        session.append("user/message", message)
    before = session.messages()
    extra = build.user("extra")
    session.append("user/message", extra)
    after = session.messages()
    assert after[:-1] == before and after[-1] is extra
    assert all(a is b for a, b in zip(before, after))


def test_an_empty_assistant_message_is_logged_but_not_model_visible(build):
    session = Session()
    prompt = build.user()
    session.append("user/message", prompt)
    empty = dshkit.create_assistant_message([], provider="test", model="m1")
    blank = dshkit.create_assistant_message([{"type": "text", "text": ""}], provider="test", model="m1")
    for message in (empty, blank):
        event = session.append("assistant/message", {"message": message, "usage": {"output_tokens": 0}})
        assert event.message is message and session.has_message(message.id)
        with pytest.raises(KeyError):
            session.message(message.id)
    thinking = dshkit.create_assistant_message([{"type": "reasoning", "text": "hmm"}], provider="test", model="m1")
    session.append("assistant/message", {"message": thinking})
    assert session.messages() == (prompt, thinking)


def test_replace_keeps_the_id_and_the_slot(build):
    session = Session()
    session.append("user/message", build.user("first"))
    call = build.assistant("calling", ["c1"])
    session.append("assistant/message", {"turn": 1, "step": 1, "message": call})
    call_event = session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "lookup", "arguments": "{}"})
    original = build.result("c1", "a very long tool output " * 20)
    old_event = session.append("tool/result", {"turn": 1, "step": 1, "message": original, "meta": {"bytes": 480}}, source_event_seqs=[call_event.seq])
    session.append("user/message", build.user("last"))

    pruned = original.with_content(
        [{"type": "tool_result", "tool_call_id": "c1", "content": [{"type": "text", "text": "[pruned]"}], "is_error": False}]
    )
    event = session.replace(pruned)
    assert event.type == "tool/result"
    assert event.surface_op == replace_op(2, 3)
    assert event.source_event_seqs == (old_event.seq,)
    assert event.data["meta"] == {"bytes": 480} and event.data["turn"] == 1  # envelope kept
    history = session.messages()
    assert history[2] is pruned and history[2].id == original.id
    assert [m.text for m in (history[0], history[3])] == ["first", "last"]
    assert session.message(original.id) is pruned
    assert session.events[old_event.seq].message is original  # replaced events stay in the log


def test_replace_of_user_and_assistant_messages(build):
    session = Session()
    prompt = build.user("draft")
    session.append("user/message", prompt)
    reply = build.assistant("long answer")
    session.append("assistant/message", {"turn": 1, "step": 1, "message": reply, "usage": {"output_tokens": 9}})
    session.replace(prompt.with_content("final"))
    event = session.replace(reply.with_content("short"))
    assert event.data["usage"] == {"output_tokens": 9}
    assert [m.text for m in session.messages()] == ["final", "short"]
    assert [m.id for m in session.messages()] == [prompt.id, reply.id]


def test_replace_requires_a_message_on_the_surface(build):
    session = Session()
    session.append("user/message", build.user())
    with pytest.raises(ValueError, match="holds no message"):
        session.replace(build.user())
    with pytest.raises(TypeError):
        session.replace({"id": "x"})  # type: ignore[arg-type]


def test_a_rewrite_may_change_only_the_content(build):
    session = Session()
    prompt = build.user()
    session.append("user/message", prompt)
    session.append("assistant/message", {"turn": 1, "step": 1, "message": build.assistant("x", ["c1"])})
    result = build.result("c1", "out")
    session.append("tool/result", {"turn": 1, "step": 1, "message": result})
    before = session.messages()
    count = len(session.events)

    other_source = dshkit.freeze_message({**prompt.to_dict(), "source": {"kind": "plugin", "plugin": "x"}})
    with pytest.raises(ValueError, match="source"):
        session.replace(other_source)
    flipped = result.with_content(
        [{"type": "tool_result", "tool_call_id": "c1", "content": [{"type": "text", "text": "out"}], "is_error": True}]
    )
    with pytest.raises(ValueError, match="error flag"):
        session.replace(flipped)
    moved = result.with_content(
        [{"type": "tool_result", "tool_call_id": "c2", "content": [{"type": "text", "text": "out"}], "is_error": False}]
    )
    with pytest.raises(ValueError, match="call_id"):
        session.replace(moved)
    # Envelope facts of a tool result stay equal, also through a raw append.
    same_id = result.with_content(
        [{"type": "tool_result", "tool_call_id": "c1", "content": [{"type": "text", "text": "short"}], "is_error": False}]
    )
    with pytest.raises(ValueError, match="envelope facts; changed: step"):
        session.append("tool/result", {"turn": 1, "step": 2, "message": same_id}, surface_op=replace_op(2, 3))
    # A failed replace changes nothing.
    assert session.messages() is before and len(session.events) == count


def test_replace_ranges_are_positions_on_the_current_surface(build):
    session = Session()
    messages = [build.user(str(n)) for n in range(4)]
    for message in messages:
        session.append("user/message", message)
    with pytest.raises(ValueError, match="outside the surface"):
        session.append("user/message", build.user("x"), surface_op=replace_op(3, 5))
    with pytest.raises(ValueError, match="outside the surface"):
        session.append("user/message", build.user("x"), surface_op=replace_op(2, 2))
    with pytest.raises(ValueError, match="exactly"):
        session.append("user/message", messages[1].with_content("y"), surface_op=replace_op(1, 3))
    with pytest.raises(ValueError, match="exactly"):
        session.append("user/message", messages[1].with_content("y"), surface_op=replace_op(2, 3))
    with pytest.raises(ValueError, match="must be a user/message"):
        session.append("assistant/message", {"message": build.assistant()}, surface_op=replace_op(1, 2))
    summary = build.context("summary of 1 and 2")
    session.append("user/message", summary, surface_op=replace_op(1, 3))
    assert session.messages() == (messages[0], summary, messages[3])
    # Positions now refer to the new surface: position 2 is messages[3].
    session.append("user/message", messages[3].with_content("three"), surface_op=replace_op(2, 3))
    assert [m.text for m in session.messages()] == ["0", "summary of 1 and 2", "three"]
    assert session.message(messages[3].id).text == "three"


def test_compact_replaces_a_range_with_a_new_summary(build):
    session = Session()
    build.tool_turn(session, 1, ["c1"])
    build.tool_turn(session, 2, ["c2"])
    history = session.messages()
    assert len(history) == 8
    replaced_seqs = tuple(session.message_event(m.id).seq for m in history[:4])
    count = len(session.events)
    summary = dshkit.create_user_message("turn 1 in short", source={"kind": "plugin", "plugin": "compact", "compaction_id": dshkit.new_message_id()})
    event = session.compact(history[0].id, history[3].id, summary)
    assert session.messages() == (summary, *history[4:])
    assert session.messages()[0] is summary
    new_events = session.events[count:]
    assert [e.type for e in new_events] == ["compaction/start", "user/message", "compaction/end"]
    assert event is new_events[1]
    assert event.surface_op == replace_op(0, 4)
    assert event.source_event_seqs == (new_events[0].seq, *replaced_seqs)  # the start, then every replaced event
    # The records every compaction writes (`dshkit.session.compactions`), and what a reader makes of them.
    compaction_id = new_events[0].data["compaction_id"]
    assert new_events[0].data == {"compaction_id": compaction_id, "turn": None}
    assert new_events[2].data == {"compaction_id": compaction_id, "turn": None}
    (facts,) = read_compactions(session.events)
    assert facts.replaced_ids == [m.id for m in history[:4]] and facts.summary_id == summary.id
    assert facts.summary_text == "turn 1 in short" and facts.end_seq == new_events[2].seq and facts.error is None
    # Replaced messages stay in the log, but are no longer on the surface.
    assert session.has_message(history[1].id)
    with pytest.raises(ValueError, match="no longer on the surface"):
        session.replace(history[1].with_content("x"))


def test_compact_refuses_bad_ranges_and_summaries(build):
    session = Session()
    build.tool_turn(session, 1, ["c1", "c2"])
    history = session.messages()  # prompt, call(c1,c2), result c1, result c2, answer
    count = len(session.events)
    with pytest.raises(ValueError, match="already in the session"):
        session.compact(history[0].id, history[1].id, history[0])
    with pytest.raises(ValueError, match="separate tool call 'c2'"):
        session.compact(history[0].id, history[2].id, build.context())
    with pytest.raises(ValueError, match="separate tool call"):
        session.compact(history[3].id, history[4].id, build.context())
    with pytest.raises(ValueError, match="comes after"):
        session.compact(history[4].id, history[0].id, build.context())
    with pytest.raises(ValueError, match="end_id"):
        session.compact(history[0].id, "missing", build.context())
    unnamed = dshkit.create_user_message("a checkpoint naming no compaction", source={"kind": "plugin", "plugin": "compact"})
    with pytest.raises(ValueError, match=rf"summary {unnamed.id}: .*must name its compaction: add source\['compaction_id'\]"):
        session.compact(history[0].id, history[4].id, unnamed)
    with pytest.raises(ValueError, match="user-role"):
        session.compact(history[0].id, history[3].id, build.assistant())
    assert len(session.events) == count and session.messages() is history
    session.compact(history[0].id, history[3].id, build.context("all tools done"))
    assert len(session.messages()) == 2


def test_compaction_of_pending_calls_is_refused(build):
    session = Session()
    session.append("user/message", build.user())
    session.append("assistant/message", {"message": build.assistant("x", ["c1"])})
    history = session.messages()
    with pytest.raises(ValueError, match="separate tool call 'c1'"):
        session.compact(history[0].id, history[1].id, build.context())
    session.compact(history[0].id, history[0].id, build.context())  # before the call: fine


def test_reopened_log_derives_equal_messages_with_the_same_ids(build, log_path: Path):
    with Session.create(log_path) as session:
        build.tool_turn(session, 1, ["c1", "c2"])
        history = session.messages()
        session.replace(history[2].with_content(
            [{"type": "tool_result", "tool_call_id": "c1", "content": [{"type": "text", "text": "[pruned]"}], "is_error": False}]
        ))
        summary = build.context("summary")
        session.compact(history[0].id, history[3].id, summary)
        expected = session.messages()
    with Session.open(log_path) as reopened:
        assert reopened.messages() == expected
        assert [m.id for m in reopened.messages()] == [m.id for m in expected]
        assert reopened.message(summary.id) == summary


def test_unknown_events_block_derivation_unless_ignorable(tmp_path: Path, build):
    path = tmp_path / "future.jsonl"
    with Session.create(path) as session:
        session.append("user/message", build.user())
        session.append("plugin/cache", {"ignorable": True})
    with path.open("ab") as log:
        log.write(seal_line('{"seq":2,"time":1,"type":"surface/rewind","data":{"to":0}}'))
    with Session.open(path) as reopened:
        assert [e.type for e in reopened.events][-1] == "surface/rewind"  # kept
        with pytest.raises(UnknownEventError, match="event 2 has unknown type 'surface/rewind'"):
            reopened.messages()
    with Session.open(path, read_only=True) as again:
        assert again.events[2].data == {"to": 0}  # round-tripped unchanged
