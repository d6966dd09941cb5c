"""`read_compactions`: one description of every compaction of a log, whoever wrote it, old records too."""

from __future__ import annotations

import pytest

import dshkit
from dshkit.session import Session, replace_op
from dshkit.session.compactions import end_record, open_turn, read_compactions, start_record, summary_record


def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def test_records_that_session_compact_wrote_before_read_the_same() -> None:
    session = Session()
    first, second = session.append("user/message", user("one")), session.append("user/message", user("two"))
    ids = [first.message.id, second.message.id]
    start = session.append("compaction/start", {"start_id": ids[0], "end_id": ids[1], "message_ids": ids})
    summary = dshkit.create_user_message("both", source={"kind": "plugin", "plugin": "notes"})
    message = session.append("user/message", summary, surface_op=replace_op(0, 2), source_event_seqs=[first.seq, second.seq])
    end = session.append("compaction/end", {"summary_id": summary.id, "start_seq": start.seq})
    (facts,) = read_compactions(session.events)
    assert (facts.start_seq, facts.message_seq, facts.end_seq, facts.compaction_id) == (start.seq, message.seq, end.seq, None)
    assert facts.replaced_ids == ids and facts.replaced_seqs == [first.seq, second.seq]
    assert facts.summary_id == summary.id and facts.summary_text == "both" and facts.error is None


def test_a_failed_and_an_open_compaction() -> None:
    session = Session()
    session.append("user/message", user("one"))
    session.append("turn/start", {"turn": 1})
    assert open_turn(session.events) == 1
    session.append("compaction/start", start_record("c1", 1, "threshold"))
    session.append("compaction/end", end_record("c1", 1, "model_error: down"))
    session.append("compaction/start", start_record("c2", 1))
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})  # a log that went on without closing it
    assert open_turn(session.events) is None
    failed, left_open = read_compactions(session.events)
    assert (failed.compaction_id, failed.reason, failed.error, failed.message_seq) == ("c1", "threshold", "model_error: down", None)
    assert (left_open.compaction_id, left_open.end_seq, left_open.replaced_ids) == ("c2", None, [])


def test_a_summary_record_needs_a_range() -> None:
    with pytest.raises(ValueError, match="at least one message"):
        summary_record("c1", "text", [], 0)
    data = summary_record("c1", "text", [3, 5], 40, provider="p", model="m", usage=None)
    assert data == {
        "compaction_id": "c1", "summary": [{"type": "text", "text": "text"}], "shadowed_range": {"start": 3, "end": 5},
        "shadowed_seqs": [3, 5], "shadowed_token_count": 40, "provider": "p", "model": "m",
    }
