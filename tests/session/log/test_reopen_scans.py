"""Opening a log to write reads the types of its events, not the events (issue 37): the crash-repair
scans (`open_turn_start`, `compaction_closer`) walk back from the end through `EventLog.type_at`,
so a log without turn boundaries (an OpenAI Agents session's) is not decoded twice on open."""

from __future__ import annotations

from pathlib import Path

import pytest

import dshkit
from dshkit.session import Session
from dshkit.session._log.event_log import EventLog
from dshkit.session._repair import compaction_closer, open_turn_start


def _flat_log(path: Path, pairs: int) -> None:
    with Session.create(path, durability="none") as session:
        for index in range(pairs):
            session.append("user/message", dshkit.create_user_message(f"q{index}", source={"kind": "user"}))
            reply = dshkit.create_assistant_message(f"a{index}", provider="p", model="m")
            session.append("assistant/message", {"message": reply})


@pytest.mark.parametrize("suffix", [".jsonl", ".sqlite"])
def test_opening_a_log_without_turns_to_write_rebuilds_no_event_for_the_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    path = tmp_path / f"log{suffix}"
    _flat_log(path, 600)
    rebuilt: list[int] = []
    decode = EventLog._decode
    monkeypatch.setattr(EventLog, "_decode", lambda self, seq: rebuilt.append(seq) or decode(self, seq))
    with Session.open(path) as session:
        assert len(session.messages()) == 1200
        assert len(session.events) == 1200  # nothing was closed: there is no open turn
    assert rebuilt in ([], [1199])  # at most the last event (its time), never a scan of them all


def test_the_scans_read_types_of_a_plain_list_too(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        session.append("turn/start", {"turn": 1})
        session.append("compaction/start", {"turn": 1, "compaction_id": "c1"})
        events = list(session.events)
        log = session.events
        assert open_turn_start(events) == open_turn_start(log) == 0
        closer = compaction_closer(events)
        assert closer == compaction_closer(log)
        assert closer is not None and closer[1]["compaction_id"] == "c1"
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert open_turn_start(list(session.events)) is None
