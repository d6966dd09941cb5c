"""A compaction the process left open is closed on open, in both log formats, before the turn is."""

from __future__ import annotations

from pathlib import Path

import dshkit
from dshkit.session import Session
from dshkit.session._repair import COMPACTION_INTERRUPTED
from dshkit.session._verify import check_events
from tests.session.dsh.original_logs import OriginalLog
from tests.session.dsh.original_logs import user as original_user


def test_an_open_compaction_between_turns_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("user/message", dshkit.create_user_message("hi", source={"kind": "user"}))
        start = session.append("compaction/start", {"compaction_id": "cmp-1", "turn": None, "reason": "manual"})
    with Session.open(path) as session:
        assert session.events[-1].type == "compaction/end"
        assert session.events[-1].data == {"compaction_id": "cmp-1", "turn": None, "error": COMPACTION_INTERRUPTED}
        assert check_events(session.events) == []
    with Session.open(path) as session:
        assert len(session.events) == start.seq + 2  # opening again appends nothing more


def test_an_open_compaction_without_an_id_names_its_start(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
        start = session.append("compaction/start", {"start_id": "a", "end_id": "b", "message_ids": []})
    with Session.open(path) as session:
        types = [event.type for event in session.events][-2:]
        assert types == ["compaction/end", "turn/end"]
        assert session.events[-2].data == {"start_seq": start.seq, "error": COMPACTION_INTERRUPTED}


def test_an_original_log_cut_inside_a_compaction_is_closed_in_the_original_names(tmp_path: Path) -> None:
    log = OriginalLog()
    log.event("turn/start", {"turn": 1})
    log.event("step/start", {"turn": 1, "step": 1})
    log.event("user/message", original_user("hello"), surfaceOp="append")
    log.event("compaction/start", {"compactionId": "cmp-9", "turn": 1})
    path = log.write(tmp_path / "original.jsonl")
    with Session.open(path) as session:
        assert [event.type for event in session.events][-3:] == ["compaction/end", "step/end", "turn/end"]
        assert session.events[-3].data == {"compaction_id": "cmp-9", "turn": 1, "error": COMPACTION_INTERRUPTED}
    text = path.read_text()
    assert '"compactionId":"cmp-9","turn":1,"error":' in text.replace(" ", "")
