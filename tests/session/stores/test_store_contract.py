"""The store contract: every session store runs this one suite.

The stores: dshkit's JSON Lines, SQLite and PostgreSQL, and the original harness's two, its
JSON Lines file (`dsh_jsonl`) and its SQLite database (`dsh_sqlite`, read-only). Each test takes a
`StoreUnderTest` for one backend and drives it through `Session` as a user would (plus the
`SessionStore` methods directly where the contract is the store's own: closed stores, durability
names, a repeated seq). What a backend does differently is a declared capability of its
`StoreUnderTest`, never a silent skip:

- `writable`: False for a store dshkit only reads (`dsh_sqlite`). The tests that write take the
  `writable` fixture (every writable store); `test_a_read_only_store_refuses_every_write` holds the
  others to refusing each write. Every store is read: `write_log` makes its log (the original's
  database is built from a log its JSONL store wrote, as the original's runtime stores rows);
- `sealed`: records carry dshkit's checksums, so damage is found and named (the `sealed` fixture);
  the original's records carry none (`test_original_records_are_read_as_stored`);
- `repeated_seq`: what a second append of a seq the log holds does: `"idempotent"` (the same record
  counts as written, another is a conflict), `"refused"` at the append, or `"reported_on_open"`
  (a file appends what it is given; the next open names the line);
- `takeover`: a writer's lock can be lost without closing it (a server releases it with a dead
  connection): the lost writer is fenced off, never writing beside the new one;
- `waits_on_network`: its `sync()` is a round trip to a server (`Session.waits_on_network`);
- `selector` holds the arguments that pick the log at `location` (a file holds one log and needs
  none; a database holds many and needs `session_id`), `tear_tail` returns False where an append can
  never be left half-written, `second_writer` says where a second writer is stopped, `catalog` is
  what `list_sessions` lists the log in.

A new store joins by writing one `StoreUnderTest` subclass and adding it to `STORES`.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.session import (
    JsonlStore,
    Session,
    SessionClosedError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    SessionRecoveryWarning,
    SessionStore,
    SqliteStore,
    list_sessions,
)
from dshkit.session._log.checksums import checksum
from dshkit.session._surface import Surface
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.sqlite_store import DshSqliteStore

from tests.session.conftest import seal_any
from tests.session.dsh.original_logs import write_sqlite_db


class StoreUnderTest:
    """One backend as the contract sees it: where its log lives and how to look at it raw."""

    name = ""
    format = "dshkit"  # the format of the records it holds (`Session.format`)
    writable = True
    sealed = True
    repeated_seq = "refused"  # or "idempotent", "reported_on_open"
    takeover = False
    waits_on_network = False  # its sync is a round trip to a server: the agent syncs it off the loop
    second_writer = ""  # "open": a second writer cannot open the log; "append": its first append fails
    second_writer_error = ""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def prepare(cls, request: pytest.FixtureRequest, directory: Path) -> StoreUnderTest:
        """The backend for one test (a store that needs a server asks `request` for it, or skips)."""
        return cls(directory)

    @property
    def location(self) -> Any:
        """What `Session.create`/`Session.open` take to select this store (a path or URL)."""
        raise NotImplementedError

    @property
    def selector(self) -> dict[str, Any]:
        """The keyword arguments `Session.create`/`Session.open` need besides `location` to pick the log."""
        return {}

    @property
    def missing_location(self) -> Any:
        """A location of this store where no log exists."""
        raise NotImplementedError

    @property
    def missing_selector(self) -> dict[str, Any]:
        """`selector` for the log at `missing_location` (which does not exist)."""
        return {}

    @property
    def catalog(self) -> Any:
        """What `list_sessions` takes to list this log (its folder, its database)."""
        return self.directory

    def create(self, **options: Any) -> Session:
        """`Session.create` of the log at `location` (`FileExistsError` if there is one)."""
        return Session.create(self.location, **self.selector, **options)

    @contextmanager
    def write_log(self, **options: Any) -> Iterator[Session]:
        """A session writing the log at `location`; the log is there once the block ends."""
        with self.create(**options) as session:
            yield session

    def new_store(self) -> SessionStore:
        """A fresh store object for the log at `location`."""
        raise NotImplementedError

    def exists(self, *, missing: bool = False) -> bool:
        """Whether the log at `location` (with `missing`: at `missing_location`) exists."""
        raise NotImplementedError

    def snapshot(self) -> object:
        """Everything the store holds for the log, to show that nothing was written."""
        raise NotImplementedError

    def place(self, index: int) -> str:
        """How an error names where event record `index` lives."""
        raise NotImplementedError

    def replace_record(self, index: int, text: str) -> None:
        """Overwrite the stored record of event `index` with `text` and its checksum (damage from outside)."""
        raise NotImplementedError

    def change_record(self, index: int) -> None:
        """Change one digit of event `index`'s `time`, leaving its stored checksum (a flipped bit)."""
        raise NotImplementedError

    def tear_tail(self, text: str) -> bool:
        """Leave `text` as an unfinished append after the last record; False if the store cannot."""
        raise NotImplementedError

    def change_attachment(self, digest: str, data: bytes | None) -> None:
        """Store `data` as the bytes of `digest` behind the store's back (`None`: delete them)."""
        path = Path(self.location).parent / "attachments" / "objects" / digest[:2] / digest
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)


class JsonlUnderTest(StoreUnderTest):
    name = "jsonl"
    repeated_seq = "reported_on_open"
    second_writer = "open"
    second_writer_error = "already open for writing"

    @property
    def location(self) -> Path:
        return self.directory / "session.jsonl"

    @property
    def missing_location(self) -> Path:
        return self.directory / "missing.jsonl"

    def new_store(self) -> SessionStore:
        return JsonlStore(self.location)

    def exists(self, *, missing: bool = False) -> bool:
        return (self.missing_location if missing else self.location).exists()

    def snapshot(self) -> bytes:
        return self.location.read_bytes()

    def place(self, index: int) -> str:
        return f"line {index + 2}"

    def replace_record(self, index: int, text: str) -> None:
        lines = self.location.read_bytes().splitlines(keepends=True)
        lines[index + 1] = seal_any(text)
        self.location.write_bytes(b"".join(lines))

    def change_record(self, index: int) -> None:
        lines = self.location.read_bytes().splitlines(keepends=True)
        lines[index + 1] = changed_time(lines[index + 1].decode()).encode()
        self.location.write_bytes(b"".join(lines))

    def tear_tail(self, text: str) -> bool:
        with self.location.open("ab") as file:
            file.write(text.encode())
        return True


class SqliteUnderTest(StoreUnderTest):
    name = "sqlite"
    second_writer = "open"
    second_writer_error = "already open for writing"

    @property
    def location(self) -> Path:
        return self.directory / "session.sqlite"

    @property
    def missing_location(self) -> Path:
        return self.directory / "missing.sqlite"

    def new_store(self) -> SessionStore:
        return SqliteStore(self.location)

    def exists(self, *, missing: bool = False) -> bool:
        return (self.missing_location if missing else self.location).exists()

    def snapshot(self) -> bytes:
        return self.location.read_bytes()

    def place(self, index: int) -> str:
        return f"row {index + 1} of dshkit_events"

    def replace_record(self, index: int, text: str) -> None:
        with closing(sqlite3.connect(self.location)) as db, db:
            db.execute("UPDATE dshkit_events SET body = ?, crc = ? WHERE seq = ?", (text, checksum(text), index))

    def change_record(self, index: int) -> None:
        with closing(sqlite3.connect(self.location)) as db, db:
            (body,) = db.execute("SELECT body FROM dshkit_events WHERE seq = ?", (index,)).fetchone()
            db.execute("UPDATE dshkit_events SET body = ? WHERE seq = ?", (changed_time(body), index))

    def tear_tail(self, text: str) -> bool:
        return False  # every append is one transaction: there is no half-written event

    def change_attachment(self, digest: str, data: bytes | None) -> None:
        with closing(sqlite3.connect(self.location)) as db, db:
            if data is None:
                db.execute("DELETE FROM dshkit_attachments WHERE digest = ?", (digest,))
            else:
                db.execute("UPDATE dshkit_attachments SET data = ? WHERE digest = ?", (data, digest))


class PostgresUnderTest(StoreUnderTest):
    """One session, with an id of its own, in the database of the private test cluster."""

    name = "postgresql"
    repeated_seq = "idempotent"
    takeover = True
    waits_on_network = True
    second_writer = "open"
    second_writer_error = "open for writing by another connection"

    def __init__(self, directory: Path, url: str = "") -> None:
        super().__init__(directory)
        self.url = url
        self.session_id = f"contract-{dshkit.new_message_id()}"

    @classmethod
    def prepare(cls, request: pytest.FixtureRequest, directory: Path) -> StoreUnderTest:
        # The fixture skips, naming what is missing, without the server binaries or psycopg.
        return cls(directory, request.getfixturevalue("postgres_url"))

    @property
    def location(self) -> str:
        return self.url

    @property
    def selector(self) -> dict[str, Any]:
        return {"session_id": self.session_id}

    @property
    def missing_location(self) -> str:
        return self.url

    @property
    def catalog(self) -> str:
        return self.url

    @property
    def missing_selector(self) -> dict[str, Any]:
        return {"session_id": f"{self.session_id}-missing"}

    def new_store(self) -> SessionStore:
        from dshkit.session import PostgresStore

        return PostgresStore(self.url, self.session_id)

    def _query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            try:
                return connection.execute(sql, params).fetchall()
            except psycopg.errors.UndefinedTable:
                return []  # no session was ever created in this database

    def exists(self, *, missing: bool = False) -> bool:
        session_id = self.missing_selector["session_id"] if missing else self.session_id
        return bool(self._query("SELECT 1 FROM dshkit_sessions WHERE session_id = %s", session_id))

    def snapshot(self) -> object:
        return (
            self._query("SELECT * FROM dshkit_sessions WHERE session_id = %s", self.session_id),
            self._query("SELECT * FROM dshkit_events WHERE session_id = %s ORDER BY seq", self.session_id),
        )

    def place(self, index: int) -> str:
        return f"session {self.session_id}: event {index}"

    def replace_record(self, index: int, text: str) -> None:
        self._update_record(index, text, checksum(text))

    def change_record(self, index: int) -> None:
        ((body, crc),) = self._query(
            "SELECT body, crc FROM dshkit_events WHERE session_id = %s AND seq = %s", self.session_id, index
        )
        self._update_record(index, changed_time(body), crc)

    def _update_record(self, index: int, text: str, crc: int) -> None:
        import psycopg

        # The append-only trigger refuses every UPDATE; only this transaction goes round it.
        with psycopg.connect(self.url) as connection, connection.transaction():
            connection.execute("ALTER TABLE dshkit_events DISABLE TRIGGER dshkit_events_append_only")
            updated = connection.execute(
                "UPDATE dshkit_events SET body = %s, crc = %s WHERE session_id = %s AND seq = %s",
                (text, crc, self.session_id, index),
            ).rowcount
            connection.execute("ALTER TABLE dshkit_events ENABLE TRIGGER dshkit_events_append_only")
        assert updated == 1

    def tear_tail(self, text: str) -> bool:
        return False  # every write is one transaction: there is no half-written event

    def change_attachment(self, digest: str, data: bytes | None) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            if data is None:
                connection.execute("DELETE FROM dshkit_attachments WHERE digest = %s", (digest,))
            else:
                connection.execute("UPDATE dshkit_attachments SET data = %s WHERE digest = %s", (data, digest))


class DshJsonlUnderTest(JsonlUnderTest):
    """The original harness's JSON Lines log: no checksums, its own crash rules."""

    name = "dsh_jsonl"
    format = "dsh"
    sealed = False
    repeated_seq = "reported_on_open"

    def create(self, **options: Any) -> Session:
        return Session.create(self.location, format="dsh", **options)

    def new_store(self) -> SessionStore:
        return DshJsonlStore(self.location)

    def change_record(self, index: int) -> None:
        # The last digit of its time (the first would make a leading zero: no JSON number).
        lines = self.location.read_bytes().splitlines(keepends=True)
        text = lines[index + 1].decode()
        end = text.index(",", text.index('"time":'))
        lines[index + 1] = (text[: end - 1] + chr(ord(text[end - 1]) ^ 1) + text[end:]).encode()
        self.location.write_bytes(b"".join(lines))

    def change_attachment(self, digest: str, data: bytes | None) -> None:
        path = self.directory / "attachments" / "v1" / "objects" / digest[:2] / digest
        if data is None:
            path.unlink()
        else:
            path.write_bytes(data)


class DshSqliteUnderTest(StoreUnderTest):
    """One session of the original harness's SQLite database (schema 17), which dshkit only reads.

    Its log is written by the original's JSON Lines store beside it and stored as rows the way the
    original's runtime stores them (`write_sqlite_db`).
    """

    name = "dsh_sqlite"
    format = "dsh"
    writable = False
    sealed = False

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.session_id = f"contract-{dshkit.new_message_id()}"

    @property
    def location(self) -> Path:
        return self.directory / "original.db"

    @property
    def selector(self) -> dict[str, Any]:
        return {"session_id": self.session_id}

    @property
    def missing_location(self) -> Path:
        return self.location

    @property
    def missing_selector(self) -> dict[str, Any]:
        return {"session_id": f"{self.session_id}-missing"}

    @property
    def catalog(self) -> Path:
        return self.location

    def create(self, **options: Any) -> Session:
        return Session.create(self.location, **self.selector, format=self.format, **options)

    @contextmanager
    def write_log(self, **options: Any) -> Iterator[Session]:
        written = self.directory / "written-by-the-original.jsonl"
        with Session.create(written, format="dsh", session_id=self.session_id, **options) as session:
            yield session
        header, *records = [json.loads(line) for line in written.read_bytes().split(b"\n")[:-1]]
        write_sqlite_db(self.location, header, records)

    def new_store(self) -> SessionStore:
        return DshSqliteStore(self.location, self.session_id)

    def exists(self, *, missing: bool = False) -> bool:
        if not self.location.exists():
            return False
        session_id = self.missing_selector["session_id"] if missing else self.session_id
        with closing(sqlite3.connect(self.location)) as db:
            return db.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def snapshot(self) -> bytes:
        return self.location.read_bytes()

    def change_record(self, index: int) -> None:
        with closing(sqlite3.connect(self.location)) as db, db:
            db.execute("UPDATE events SET time = time + 1 WHERE session_id = ? AND seq = ?", (self.session_id, index))


STORES = [JsonlUnderTest, SqliteUnderTest, PostgresUnderTest, DshJsonlUnderTest, DshSqliteUnderTest]
WRITABLE = [kind for kind in STORES if kind.writable]
SEALED = [kind for kind in STORES if kind.sealed]


def changed_time(text: str) -> str:
    """`text` with the first digit of its `"time":` flipped in bit 0: still a valid record, another history."""
    at = text.index('"time":') + len('"time":')
    return text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1:]


@pytest.fixture(params=STORES, ids=lambda kind: kind.name)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """Every store."""
    return request.param.prepare(request, tmp_path)  # type: ignore[no-any-return]


@pytest.fixture(params=WRITABLE, ids=lambda kind: kind.name)
def writable(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """Every store dshkit writes (`StoreUnderTest.writable`)."""
    return request.param.prepare(request, tmp_path)  # type: ignore[no-any-return]


@pytest.fixture(params=SEALED, ids=lambda kind: kind.name)
def sealed(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """Every store whose records carry dshkit's checksums (`StoreUnderTest.sealed`)."""
    return request.param.prepare(request, tmp_path)  # type: ignore[no-any-return]


def append_texts(session: Session, build: Any, texts: list[str]) -> None:
    for text in texts:
        session.append("user/message", build.user(text))


# -- round trips ----------------------------------------------------------------------------------


def test_a_log_round_trips_exactly(build, store: StoreUnderTest):
    with store.write_log() as session:
        build.tool_turn(session, 1, ["c1", "c2"])
        inbox = session.append(
            "agent/inbox/spliced",
            {"target": "next_turn", "start": 0, "removed_count": 0, "inserted": [build.user("queued")], "outcome": "inserted"},
        )
        session.append("plugin/notes", {"ignorable": True, "unicode": "héllo ✓ \u2028 \"quoted\"", "n": -2**63, "f": 1e-300})
        written = list(session.events)
        session_id, created_at = session.id, session.created_at
    with Session.open(store.location, **store.selector) as reopened:
        assert reopened.id == session_id and reopened.created_at == created_at
        assert list(reopened.events) == written
        assert reopened.events[inbox.seq].data["inserted"][0] == inbox.data["inserted"][0]
        assert isinstance(reopened.events[inbox.seq].data["inserted"][0], dshkit.Message)
        for old, new in zip(written, reopened.events):
            if new.message is not None:
                assert new.message == old.message and new.message.id == old.message.id


def test_opening_continues_the_log(build, writable: StoreUnderTest):
    with writable.create() as session:
        session.append("user/message", build.user("one"))
    with Session.open(writable.location, **writable.selector) as session:
        event = session.append("user/message", build.user("two"))
        assert event.seq == 1
    with Session.open(writable.location, **writable.selector) as session:
        assert [m.text for m in session.messages()] == ["one", "two"]


def test_a_store_object_can_be_passed(build, writable: StoreUnderTest):
    with Session.create(store=writable.new_store(), format=writable.format) as session:
        session.append("user/message", build.user())
    with Session.open(store=writable.new_store()) as session:
        assert len(session.messages()) == 1 and session.format == writable.format


def test_a_store_object_can_be_opened(build, store: StoreUnderTest):
    with store.write_log() as session:
        session.append("user/message", build.user())
    with Session.open(store=store.new_store()) as session:
        assert len(session.messages()) == 1 and session.format == store.format


def test_seqs_stay_contiguous_across_sessions_and_refused_appends(build, writable: StoreUnderTest):
    with writable.create() as session:
        append_texts(session, build, ["a", "b"])
        with pytest.raises(ValueError, match="unknown event type"):
            session.append("plugin/unmarked", {"x": 1})  # refused: nothing stored, no seq used
    with Session.open(writable.location, **writable.selector) as session:
        assert session.append("user/message", build.user("c")).seq == 2
    raw = writable.new_store()
    try:
        _, records = raw.load("none", read_only=True)
    finally:
        raw.close()
    assert [dshkit.from_json(record)["seq"] for record in records] == [0, 1, 2]
    with Session.open(writable.location, **writable.selector, read_only=True) as session:
        assert [event.seq for event in session.events] == [0, 1, 2]


# -- creating and opening -----------------------------------------------------------------------


def test_create_never_overwrites(writable: StoreUnderTest):
    writable.create().close()
    with pytest.raises(FileExistsError):
        writable.create()


def test_open_needs_a_log(store: StoreUnderTest):
    with store.write_log():
        pass  # a database of many sessions exists, but not the one asked for
    with pytest.raises(FileNotFoundError):
        Session.open(store.missing_location, **store.missing_selector)
    assert not store.exists(missing=True)


# -- durability -----------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["always", "checkpoint", "none"])
def test_every_durability_mode_keeps_every_append(build, writable: StoreUnderTest, durability: str):
    with writable.create(durability=durability) as session:
        assert session.durability == durability
        for n in range(20):
            session.append("user/message", build.user(str(n)))
            if n % 5 == 0:
                session.sync()
    with Session.open(writable.location, **writable.selector, durability=durability) as session:
        assert [m.text for m in session.messages()] == [str(n) for n in range(20)]


def test_unknown_durability_is_refused(store: StoreUnderTest):
    with pytest.raises(ValueError, match="durability"):
        store.create(durability="sometimes")
    assert not store.exists()
    raw = store.new_store()
    with pytest.raises(ValueError, match="durability must be one of 'always', 'checkpoint', 'none'"):
        raw.create('{"type": "session"}', "sometimes")
    assert not store.exists()


# -- readers and writers --------------------------------------------------------------------------


def test_read_only_never_writes(build, store: StoreUnderTest):
    with store.write_log() as session:
        session.append("turn/start", {"turn": 1})  # a crashed turn: open() would repair it
    before = store.snapshot()
    with Session.open(store.location, **store.selector, read_only=True) as session:
        assert [e.type for e in session.events] == ["turn/start"]
        with pytest.raises(SessionClosedError, match="read-only"):
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        session.sync()  # nothing to do
    assert store.snapshot() == before


def test_there_is_one_writer_per_log(build, writable: StoreUnderTest):
    first = writable.create()
    first.append("user/message", build.user("one"))
    first.sync()
    if writable.second_writer == "open":
        with pytest.raises(SessionError, match=writable.second_writer_error):
            Session.open(writable.location, **writable.selector)
    else:
        second = Session.open(writable.location, **writable.selector)
        first.append("user/message", build.user("two"))
        with pytest.raises(SessionError, match=writable.second_writer_error):
            second.append("user/message", build.user("three"))
        second.close()
    with Session.open(writable.location, **writable.selector, read_only=True) as reader:  # readers are always welcome
        assert reader.messages()[0].text == "one"
    first.close()
    with Session.open(writable.location, **writable.selector) as again:
        assert again.messages()[0].text == "one"


# -- closing --------------------------------------------------------------------------------------


def test_context_manager_closes_and_events_stay_readable(build, writable: StoreUnderTest):
    with writable.create() as session:
        message = build.user()
        session.append("user/message", message)
    assert session.closed
    assert session.messages() == (message,)
    assert "closed" in repr(session)


def test_a_closed_session_and_a_closed_store_refuse_writes(build, writable: StoreUnderTest):
    session = writable.create()
    session.append("user/message", build.user())
    raw = session.store
    assert raw is not None
    session.close()
    session.close()  # idempotent
    with pytest.raises(SessionClosedError, match="closed"):
        session.append("user/message", build.user())
    with pytest.raises(SessionClosedError, match="closed"):
        session.sync()
    raw.close()  # idempotent on the store too
    event = session.events[0]
    with pytest.raises(SessionError, match="store is closed"):
        raw.append(event._replace(seq=1), "{}")
    with Session.open(writable.location, **writable.selector) as reopened:
        assert len(reopened.events) == 1


# -- damage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [1, 2])
def test_a_bad_record_is_corruption_naming_where_it_lives(build, sealed: StoreUnderTest, index: int):
    with sealed.create() as session:
        append_texts(session, build, [str(n) for n in range(5)])
    sealed.replace_record(index, f'{{"seq":{index},"time":1,"type":"user/message","data":{{"id":')
    with pytest.raises(SessionCorruptError, match=rf"{re.escape(sealed.place(index))}: not valid JSON") as caught:
        Session.open(sealed.location, **sealed.selector)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


@pytest.mark.parametrize("read_only", [False, True])
def test_a_record_changed_after_it_was_written_fails_its_checksum(build, sealed: StoreUnderTest, read_only: bool):
    with sealed.create() as session:
        append_texts(session, build, [str(n) for n in range(5)])
    sealed.change_record(3)
    with pytest.raises(SessionCorruptError, match=rf"{re.escape(sealed.place(3))}: checksum mismatch"):
        Session.open(sealed.location, **sealed.selector, read_only=read_only)


def test_a_torn_tail_loses_only_the_unfinished_append(build, writable: StoreUnderTest):
    with writable.create() as session:
        append_texts(session, build, ["m0", "m1"])
    if not writable.tear_tail('{"seq":2,"time":1,"type":"user/mess'):
        pytest.skip(f"{writable.name}: an append is atomic, nothing can be left half-written")
    with pytest.warns(SessionRecoveryWarning, match=re.escape(writable.place(2))):
        session = Session.open(writable.location, **writable.selector)
    with session:
        assert [m.text for m in session.messages()] == ["m0", "m1"]
        assert session.append("user/message", build.user("m2")).seq == 2
    with Session.open(writable.location, **writable.selector) as again:  # repaired: no warning (warnings are errors here)
        assert [m.text for m in again.messages()] == ["m0", "m1", "m2"]


# -- what differs, declared -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [kind for kind in STORES if not kind.writable], ids=lambda kind: kind.name)
def test_a_read_only_store_refuses_every_write(build, kind: type[StoreUnderTest], tmp_path: Path):
    store = kind(tmp_path)
    with store.write_log() as session:
        session.append("user/message", build.user("one"))
    before = store.snapshot()
    assert store.new_store().read_only
    with pytest.raises(SessionError, match="read-only"):
        store.create()
    with Session.open(store.location, **store.selector) as session:  # read-only whatever was asked
        with pytest.raises(SessionClosedError, match="read-only"):
            session.append("user/message", build.user("two"))
        with pytest.raises(SessionClosedError, match="read-only"):
            session.attach(b"bytes", "image/png")
        raw = session.store
        assert raw is not None
        with pytest.raises(SessionError, match="read-only"):
            raw.append(session.events[0]._replace(seq=1), "{}")
    assert store.snapshot() == before


@pytest.mark.parametrize("kind", [kind for kind in STORES if not kind.sealed], ids=lambda kind: kind.name)
def test_original_records_are_read_as_stored(build, kind: type[StoreUnderTest], tmp_path: Path):
    # The original's records carry no dshkit checksum: a record changed behind the store's back is
    # read as it now is (its own crash rules, tested in tests/session/dsh/, still apply).
    store = kind(tmp_path)
    with store.write_log() as session:
        append_texts(session, build, [str(n) for n in range(5)])
        written = [event.time for event in session.events]
    store.change_record(3)
    with Session.open(store.location, **store.selector, read_only=True) as session:
        times = [event.time for event in session.events]
    assert times[3] != written[3] and times[:3] + times[4:] == written[:3] + written[4:]


# -- a repeated seq, fencing, listing -------------------------------------------------------------


def test_a_repeated_seq_never_changes_what_is_stored(build, writable: StoreUnderTest):
    with writable.create(durability="always") as session:
        event = session.append("user/message", build.user("one"))
        raw = session.store
        assert raw is not None
        record = raw.log_format.encode_event(event, Surface())  # the record as first written
        other = raw.log_format.encode_event(event._replace(time=event.time + 1), Surface())
        if writable.repeated_seq == "idempotent":
            raw.append(event, record)  # a resend of what is stored counts as written
            with pytest.raises(SessionConflictError):
                raw.append(event._replace(time=event.time + 1), other)
        elif writable.repeated_seq == "refused":
            with pytest.raises(SessionError, match="already exists"):
                raw.append(event, record)
        else:
            assert writable.repeated_seq == "reported_on_open"
            raw.append(event, record)  # a file appends what it is given ...
    if writable.repeated_seq == "reported_on_open":  # ... and the next open names the line
        with pytest.raises(SessionCorruptError, match=rf"{re.escape(writable.place(1))}: .*seq 0 where 1 was expected"):
            Session.open(writable.location, **writable.selector)
        return
    with Session.open(writable.location, **writable.selector) as reopened:
        assert list(reopened.events) == [event]


def _lose_the_lock(writable: StoreUnderTest, first: Session) -> None:
    """Make `first` lose its writer lock without closing it, as its store can: a server store's
    connection dies (the server releases the lock with it); a file's lock goes only with `close`."""
    if writable.takeover:
        import psycopg

        with psycopg.connect(writable.location, autocommit=True) as admin:
            pid = first.store._connection.info.backend_pid  # type: ignore[union-attr]
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
    else:
        assert first.store is not None
        first.store.close()


def test_a_writer_that_lost_its_lock_is_fenced_off(build, writable: StoreUnderTest):
    first = writable.create(durability="always")
    first.append("user/message", build.user("one"))
    _lose_the_lock(writable, first)
    with Session.open(writable.location, **writable.selector, durability="always") as second:
        second.append("user/message", build.user("two"))
        with pytest.raises(SessionError):
            first.append("user/message", build.user("lost"))  # never written beside the new writer
        assert [m.text for m in second.messages()] == ["one", "two"]
    first.close()
    with Session.open(writable.location, **writable.selector, read_only=True) as reader:
        assert [m.text for m in reader.messages()] == ["one", "two"]


def test_list_sessions_lists_the_log(build, store: StoreUnderTest):
    with store.write_log() as session:
        append_texts(session, build, ["a", "b", "c"])
        session_id, created_at, last = session.id, session.created_at, session.events[-1].time
    listed = {info.id: info for info in list_sessions(store.catalog)}
    info = listed[session_id]
    assert (info.created_at, info.updated_at, info.event_count, info.parent_id) == (created_at, max(created_at, last), 3, None)


def test_the_session_says_whether_a_sync_waits_on_a_server(store: StoreUnderTest):
    with store.write_log() as session:
        assert session.waits_on_network is store.waits_on_network
    with Session.open(store.location, **store.selector, read_only=True) as reopened:
        assert reopened.waits_on_network is store.waits_on_network
        assert reopened.store is not None and reopened.store.waits_on_network is store.waits_on_network
    assert Session().waits_on_network is False
