"""Both stores pass the same suite: round trips, durability, read-only, one writer."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

import dshkit
from dshkit.session import (
    JsonlStore,
    Session,
    SessionClosedError,
    SessionError,
    SqliteStore,
    store_for_path,
)


def test_a_log_round_trips_exactly(build, log_path: Path):
    with Session.create(log_path) as session:
        build.tool_turn(session, 1, ["c1", "c2"])
        inbox = session.append(
            "agent/inbox/spliced",
            {"target": "next_turn", "start": 0, "removed_count": 0, "inserted": [build.user("queued")], "outcome": "inserted"},
        )
        session.append("plugin/notes", {"ignorable": True, "unicode": "héllo ✓ \u2028 \"quoted\"", "n": -2**63, "f": 1e-300})
        written = list(session.events)
        session_id, created_at = session.id, session.created_at
    with Session.open(log_path) as reopened:
        assert reopened.id == session_id and reopened.created_at == created_at
        assert list(reopened.events) == written
        assert reopened.events[inbox.seq].data["inserted"][0] == inbox.data["inserted"][0]
        assert isinstance(reopened.events[inbox.seq].data["inserted"][0], dshkit.Message)
        for old, new in zip(written, reopened.events):
            if new.message is not None:
                assert new.message == old.message and new.message.id == old.message.id


def test_opening_continues_the_log(build, log_path: Path):
    with Session.create(log_path) as session:
        session.append("user/message", build.user("one"))
    with Session.open(log_path) as session:
        event = session.append("user/message", build.user("two"))
        assert event.seq == 1
    with Session.open(log_path) as session:
        assert [m.text for m in session.messages()] == ["one", "two"]


def test_the_suffix_selects_the_store(tmp_path: Path):
    assert isinstance(store_for_path(tmp_path / "a.jsonl"), JsonlStore)
    assert isinstance(store_for_path(tmp_path / "a.sqlite"), SqliteStore)
    assert isinstance(store_for_path(tmp_path / "a.DB"), SqliteStore)
    with pytest.raises(ValueError, match="store="):
        Session.create(tmp_path / "a.txt")
    with pytest.raises(ValueError, match="not both"):
        Session.create(tmp_path / "a.jsonl", store=JsonlStore(tmp_path / "b.jsonl"))
    with pytest.raises(ValueError, match="path or a store"):
        Session.open()


def test_a_store_object_can_be_passed(tmp_path: Path, build):
    store = JsonlStore(tmp_path / "log.data")
    with Session.create(store=store) as session:
        session.append("user/message", build.user())
    with Session.open(store=JsonlStore(tmp_path / "log.data")) as session:
        assert len(session.messages()) == 1


def test_create_never_overwrites_and_open_needs_a_log(log_path: Path):
    Session.create(log_path).close()
    with pytest.raises(FileExistsError):
        Session.create(log_path)
    with pytest.raises(FileNotFoundError):
        Session.open(log_path.with_name("missing" + log_path.suffix))
    assert not log_path.with_name("missing" + log_path.suffix).exists()


@pytest.mark.parametrize("durability", ["always", "checkpoint", "none"])
def test_every_durability_mode_keeps_every_append(build, log_path: Path, durability: str):
    with Session.create(log_path, durability=durability) as session:
        assert session.durability == durability
        for n in range(20):
            session.append("user/message", build.user(str(n)))
            if n % 5 == 0:
                session.sync()
    with Session.open(log_path, durability=durability) as session:
        assert [m.text for m in session.messages()] == [str(n) for n in range(20)]


def test_unknown_durability_is_refused(log_path: Path):
    with pytest.raises(ValueError, match="durability"):
        Session.create(log_path, durability="sometimes")
    assert not log_path.exists()


def test_read_only_never_writes(build, log_path: Path):
    with Session.create(log_path) as session:
        session.append("turn/start", {"turn": 1})  # a crashed turn: open() would repair it
    before = log_path.read_bytes()
    with Session.open(log_path, read_only=True) as session:
        assert [e.type for e in session.events] == ["turn/start"]
        with pytest.raises(SessionClosedError, match="read-only"):
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        session.sync()  # nothing to do
    assert log_path.read_bytes() == before


def test_there_is_one_writer_per_log(build, log_path: Path):
    first = Session.create(log_path)
    first.append("user/message", build.user("one"))
    first.sync()
    if log_path.suffix == ".jsonl":
        with pytest.raises(SessionError, match="already open for writing"):
            Session.open(log_path)
    else:
        second = Session.open(log_path)
        first.append("user/message", build.user("two"))
        with pytest.raises(SessionError, match="another writer"):
            second.append("user/message", build.user("three"))
        second.close()
    with Session.open(log_path, read_only=True) as reader:  # readers are always welcome
        assert reader.messages()[0].text == "one"
    first.close()
    with Session.open(log_path) as again:
        assert again.messages()[0].text == "one"


def test_jsonl_always_fsyncs_every_append_and_checkpoint_only_at_sync(build, tmp_path: Path, monkeypatch):
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    with Session.create(tmp_path / "always.jsonl", durability="always") as session:
        calls.clear()
        for _ in range(5):
            session.append("user/message", build.user())
        assert len(calls) == 5
    with Session.create(tmp_path / "checkpoint.jsonl", durability="checkpoint") as session:
        calls.clear()
        for _ in range(5):
            session.append("user/message", build.user())
        assert calls == []
        session.sync()
        assert len(calls) == 1
        session.sync()  # nothing new: no second fsync
        assert len(calls) == 1
    with Session.create(tmp_path / "none.jsonl", durability="none") as session:
        calls.clear()
        session.append("user/message", build.user())
        session.sync()
    assert calls == []


def test_sqlite_log_is_in_wal_mode_with_the_durability_as_synchronous(tmp_path: Path, build):
    path = tmp_path / "log.sqlite"
    with Session.create(path, durability="always") as session:
        session.append("user/message", build.user())
        db = session.store._db
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        session.sync()
    with closing(sqlite3.connect(path)) as db, db:
        rows = db.execute("SELECT seq, type FROM dshkit_events").fetchall()
    assert rows == [(0, "user/message")]


def test_context_manager_closes_and_events_stay_readable(build, log_path: Path):
    with Session.create(log_path) as session:
        message = build.user()
        session.append("user/message", message)
    assert session.closed
    assert session.messages() == (message,)
    assert "closed" in repr(session)


def test_a_failed_fsync_stops_further_appends(build, tmp_path: Path, monkeypatch):
    """Fault injection: after an fsync error the kernel may have dropped the data; trust nothing."""
    session = Session.create(tmp_path / "log.jsonl", durability="checkpoint")
    session.append("user/message", build.user())

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        session.sync()
    monkeypatch.undo()
    with pytest.raises(SessionError, match="fsync failed"):
        session.append("user/message", build.user())
    assert len(session.events) == 1
    session.store.close()
