"""SQLite specifics: WAL and synchronous modes, what is not a dshkit database, a second header row."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from dshkit.session import Session, SessionCorruptError


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path):
    path = tmp_path / "text.sqlite"
    path.write_text("just some text, not SQLite\n" * 20)
    with pytest.raises(SessionCorruptError, match=r"text\.sqlite: not a dshkit session database"):
        Session.open(path)


def test_a_database_without_a_log_is_refused(tmp_path: Path):
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(SessionCorruptError, match="not a dshkit session database"):
        Session.open(path)


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


def test_a_second_header_row_is_corruption(tmp_path: Path):
    path = tmp_path / "log.sqlite"
    Session.create(path).close()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("INSERT INTO dshkit_session (header, crc) VALUES ('{}', 0)")
    with pytest.raises(SessionCorruptError, match="exactly one header row"):
        Session.open(path)
