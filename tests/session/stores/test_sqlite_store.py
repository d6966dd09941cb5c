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


# --- reading the events in one query, checksums checked natively -------------------------------


def write_conversation(path: Path, build) -> list[str]:
    """A log of a finished tool turn and two prompts (7 events); the message ids, in order."""
    with Session.create(path, durability="none") as session:
        build.tool_turn(session, 1, ["c1"])
        session.append("user/message", build.user("and one more question"))
        session.append("user/message", build.user("and the last one"))
        return [message.id for message in session.messages()]


def damage(path: Path, sql: str, *parameters: object) -> None:
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(sql, parameters)


def test_the_events_are_read_in_one_query_into_native_records(tmp_path: Path, build):
    # No Python object per row: the table arrives as one joined value, split and checked natively.
    from dshkit._core import Records
    from dshkit.session.stores.sqlite import SqliteStore

    path = tmp_path / "log.sqlite"
    write_conversation(path, build)
    store = SqliteStore(path)
    try:
        _, records = store.load("none", read_only=True)
    finally:
        store.close()
    assert isinstance(records, Records)
    with closing(sqlite3.connect(path)) as db:
        bodies = [body for (body,) in db.execute("SELECT CAST(body AS BLOB) FROM dshkit_events ORDER BY seq")]
    assert [records[index] for index in range(len(records))] == bodies


@pytest.mark.parametrize("read_only", [True, False])
def test_the_header_the_packs_and_the_rows_are_read_in_one_statement_of_one_read_transaction(tmp_path: Path, build, read_only: bool):
    # One snapshot: a writer packing between two reads could otherwise show a reader a range
    # twice or not at all. The file is mapped for that statement only: a connection kept for
    # appends holds no map.
    from dshkit.session.stores.sqlite import SqliteStore
    from dshkit.session.stores.sqlite_read import LOG_FACTS, MAP_FOR_READ, SEALED_LOG, UNMAP

    statements: list[str] = []

    class TracedStore(SqliteStore):
        def _connect(self, mode: str) -> sqlite3.Connection:
            db = super()._connect(mode)
            db.set_trace_callback(statements.append)
            return db

    path = tmp_path / "log.sqlite"
    with Session.create(store=TracedStore(path), durability="none") as session:
        session.store.pack_events = 2
        build.tool_turn(session, 1, ["c1"])
    statements.clear()
    store = TracedStore(path)
    try:
        _, records = store.load("none", read_only=read_only)
        assert len(records) == 12 and store._layout.packs == 5
        assert store._db is not None and store._db.execute("PRAGMA mmap_size").fetchone() == (0,)
    finally:
        store.close()
    begin = statements.index("BEGIN")
    read = [statement for statement in statements[begin : statements.index("COMMIT") + 1] if not statement.startswith("--")]
    assert read == ["BEGIN", LOG_FACTS, MAP_FOR_READ, SEALED_LOG, UNMAP, "COMMIT"]


@pytest.mark.parametrize(
    "stored",
    ["text", "real", "negative", "too big", "right, then a comma"],
)
def test_a_checksum_that_is_not_the_integer_written_names_its_row(tmp_path: Path, build, stored: str):
    path = tmp_path / "log.sqlite"
    write_conversation(path, build)
    with closing(sqlite3.connect(path)) as db:
        (crc,) = db.execute("SELECT crc FROM dshkit_events WHERE seq = 3").fetchone()
    value = {
        "text": str(crc), "real": float(crc), "negative": crc - (1 << 32), "too big": crc + (1 << 32),
        "right, then a comma": f"{crc},{crc}",
    }[stored]
    # A column declared INTEGER turns a decimal text into an integer: a type-less table keeps it as stored.
    damage(path, "ALTER TABLE dshkit_events RENAME TO old_events")
    damage(path, "CREATE TABLE dshkit_events (seq INTEGER PRIMARY KEY, type TEXT NOT NULL, time INTEGER NOT NULL, body TEXT NOT NULL, crc)")
    damage(path, "INSERT INTO dshkit_events SELECT * FROM old_events")
    damage(path, "DROP TABLE old_events")
    damage(path, "UPDATE dshkit_events SET crc = ? WHERE seq = 3", value)
    for read_only in (True, False):
        with pytest.raises(SessionCorruptError, match=r"log\.sqlite: row 4 of dshkit_events: checksum mismatch"):
            Session.open(path, read_only=read_only)


def test_a_record_holding_a_newline_is_read_row_by_row(tmp_path: Path, build):
    # The joined read cannot tell where such a record ends, so the rows are read one by one: a
    # newline that is JSON whitespace under a matching checksum is the record as written, one
    # under a stale checksum is named by its row.
    from dshkit.session._log.checksums import checksum

    path = tmp_path / "log.sqlite"
    expected = write_conversation(path, build)
    with closing(sqlite3.connect(path)) as db:
        (body,) = db.execute("SELECT body FROM dshkit_events WHERE seq = 5").fetchone()
    spaced = body.replace('"data":', '"data":\n', 1)
    damage(path, "UPDATE dshkit_events SET body = ?, crc = ? WHERE seq = 5", spaced, checksum(spaced))
    with Session.open(path, read_only=True) as session:
        assert [message.id for message in session.messages()] == expected
    damage(path, "UPDATE dshkit_events SET crc = ? WHERE seq = 5", checksum(body))
    with pytest.raises(SessionCorruptError, match=r"row 6 of dshkit_events: checksum mismatch"):
        Session.open(path, read_only=True)


def test_rows_swapped_with_their_checksums_are_refused(tmp_path: Path, build):
    # Each record passes its own checksum, but not its place: a record's seq must be its row's.
    path = tmp_path / "log.sqlite"
    write_conversation(path, build)
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT seq, type, time, body, crc FROM dshkit_events WHERE seq IN (5, 6) ORDER BY seq").fetchall()
    for (seq, *_), (_, *other) in zip(rows, reversed(rows)):
        damage(path, "UPDATE dshkit_events SET type = ?, time = ?, body = ?, crc = ? WHERE seq = ?", *other, seq)
    with pytest.raises(SessionCorruptError, match=r"row 6 of dshkit_events: seq 6 where 5 was expected"):
        Session.open(path, read_only=True)
