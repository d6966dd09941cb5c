"""Where served sessions live, in this process: the kept connections of `SessionPlace` (a PostgreSQL
worker's writers, the SQLite watcher's probes) and the WAL mode of DBOS's SQLite system database.

They keep every guarantee of a connection made per use: the writer's fence (the session's
advisory lock) holds while a session is open and is gone from a connection given back; a kept
SQLite probe sees every commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dshkit import create_user_message
from dshkit.serve.engine import use_write_ahead_log
from dshkit.serve.places import SessionPlace
from dshkit.session import Session, SessionError


def _say(session: Session, text: str) -> None:
    session.append("user/message", create_user_message(text, source={"kind": "user"}))
    session.sync()


@pytest.fixture
def places(postgres_url: str) -> Iterator[tuple[SessionPlace, SessionPlace]]:
    """Two workers' places (as in two processes) on one database; their kept connections closed after."""
    worker, other_worker = SessionPlace(postgres_url), SessionPlace(postgres_url)
    yield worker, other_worker
    worker.close()
    other_worker.close()


def test_a_worker_opens_sessions_on_kept_connections_and_the_fence_still_holds(places: tuple[SessionPlace, SessionPlace]) -> None:
    worker, other_worker = places
    first, second = worker.create("alice", "echo"), worker.create("alice", "echo")

    writer = worker.open_writer(first)
    backend = writer.store._connection.info.backend_pid  # type: ignore[union-attr]
    with pytest.raises(SessionError, match="open for writing by another"):
        other_worker.open_writer(first)  # the fence: one writer per session, whichever process
    _say(writer, "one")
    writer.close()

    reused = worker.open_writer(second)
    assert reused.store._connection.info.backend_pid == backend  # type: ignore[union-attr]
    # The kept connection let go of the first session's lock before it was given back.
    taken_over = other_worker.open_writer(first)
    _say(taken_over, "two")
    taken_over.close()
    reused.close()

    with worker.read(first) as log:
        assert [m.content[0]["text"] for m in log.messages()] == ["one", "two"]


def test_a_kept_connection_that_cannot_let_go_of_its_lock_is_not_reused(postgres_url: str, places: tuple[SessionPlace, SessionPlace]) -> None:
    import psycopg

    worker, other_worker = places
    session_id = worker.create("alice", "echo")
    writer = worker.open_writer(session_id)
    backend = writer.store._connection.info.backend_pid  # type: ignore[union-attr]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (backend,))
    writer.close()  # its unlock fails on the dead connection: closed, not given back

    again = other_worker.open_writer(session_id)  # the server released the lock with the connection
    again.close()
    reopened = worker.open_writer(session_id)
    assert reopened.store._connection.info.backend_pid != backend  # type: ignore[union-attr]
    reopened.close()


def test_watched_sqlite_logs_are_probed_on_kept_connections_that_see_every_commit(tmp_path: Path) -> None:
    place = SessionPlace(tmp_path)
    watched, other = place.create("alice", "echo"), place.create("alice", "echo")
    assert place.latest_seqs([watched, other, "nosuchsession"]) == {}

    with place.open_writer(watched) as writer:
        _say(writer, "one")
        assert place.latest_seqs([watched, other]) == {watched: 0}
        for text in ("two", "three"):
            _say(writer, text)
            assert place.latest_seqs([watched]) == {watched: writer.events[-1].seq}
    with place.open_writer(other) as writer:
        _say(writer, "four")
    assert place.latest_seqs([other, watched]) == {other: 0, watched: 2}
    assert place.latest_seqs([]) == {}
    assert place.latest_seqs([watched]) == {watched: 2}  # reopened after being let go
    place.close()


def test_the_engine_s_sqlite_database_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "new folder" / ".dbos.sqlite"
    use_write_ahead_log(path)
    use_write_ahead_log(path)  # again, on the existing file: no change, no error
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
