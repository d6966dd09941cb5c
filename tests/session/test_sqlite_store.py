"""SQLite specifics: what is not a dshkit database, and rows that are bad."""

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


def test_a_bad_row_names_its_row(tmp_path: Path, build):
    path = tmp_path / "log.sqlite"
    with Session.create(path) as session:
        for n in range(3):
            session.append("user/message", build.user(str(n)))
    db = sqlite3.connect(path)
    db.execute("UPDATE dshkit_events SET body = '{\"seq\": 1, \"time\": 1' WHERE seq = 1")
    db.commit()
    db.close()
    with pytest.raises(SessionCorruptError, match="row 2 of dshkit_events: not valid JSON"):
        Session.open(path)


def test_a_second_header_row_is_corruption(tmp_path: Path):
    path = tmp_path / "log.sqlite"
    Session.create(path).close()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("INSERT INTO dshkit_session (header) VALUES ('{}')")
    with pytest.raises(SessionCorruptError, match="exactly one header row"):
        Session.open(path)
