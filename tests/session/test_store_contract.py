"""The store contract: every session store runs this one suite.

Each test takes the `store` fixture, a `StoreUnderTest` for one backend, and drives it through
`Session` as a user would (plus the `SessionStore` methods directly where the contract is the
store's own: closed stores, durability names). What a backend cannot do the same way is a
capability of its `StoreUnderTest`, not a branch in a test: `selector` holds the arguments that
pick the log at `location` (a file holds one log and needs none; a database holds many and needs
`session_id`), `tear_tail` returns False where an append can never be left half-written,
`second_writer` says where a second writer is stopped.

A new store joins by writing one `StoreUnderTest` subclass and adding it to `STORES`.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.session import (
    JsonlStore,
    Session,
    SessionClosedError,
    SessionCorruptError,
    SessionError,
    SessionRecoveryWarning,
    SessionStore,
    SqliteStore,
)
from dshkit.session.checksums import checksum

from tests.session.conftest import seal_any


class StoreUnderTest:
    """One backend as the contract sees it: where its log lives and how to look at it raw."""

    name = ""
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


class JsonlUnderTest(StoreUnderTest):
    name = "jsonl"
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


class PostgresUnderTest(StoreUnderTest):
    """One session, with an id of its own, in the database of the private test cluster."""

    name = "postgresql"
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


STORES = [JsonlUnderTest, SqliteUnderTest, PostgresUnderTest]


def changed_time(text: str) -> str:
    """`text` with the first digit of its `"time":` flipped in bit 0: still a valid record, another history."""
    at = text.index('"time":') + len('"time":')
    return text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1:]


@pytest.fixture(params=STORES, ids=lambda kind: kind.name)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    return request.param.prepare(request, tmp_path)  # type: ignore[no-any-return]


def append_texts(session: Session, build: Any, texts: list[str]) -> None:
    for text in texts:
        session.append("user/message", build.user(text))


# -- round trips ----------------------------------------------------------------------------------


def test_a_log_round_trips_exactly(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
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


def test_opening_continues_the_log(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
        session.append("user/message", build.user("one"))
    with Session.open(store.location, **store.selector) as session:
        event = session.append("user/message", build.user("two"))
        assert event.seq == 1
    with Session.open(store.location, **store.selector) as session:
        assert [m.text for m in session.messages()] == ["one", "two"]


def test_a_store_object_can_be_passed(build, store: StoreUnderTest):
    with Session.create(store=store.new_store()) as session:
        session.append("user/message", build.user())
    with Session.open(store=store.new_store()) as session:
        assert len(session.messages()) == 1


def test_seqs_stay_contiguous_across_sessions_and_refused_appends(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
        append_texts(session, build, ["a", "b"])
        with pytest.raises(ValueError, match="unknown event type"):
            session.append("plugin/unmarked", {"x": 1})  # refused: nothing stored, no seq used
    with Session.open(store.location, **store.selector) as session:
        assert session.append("user/message", build.user("c")).seq == 2
    raw = store.new_store()
    try:
        _, records = raw.load("none", read_only=True)
    finally:
        raw.close()
    assert [dshkit.from_json(record)["seq"] for record in records] == [0, 1, 2]
    with Session.open(store.location, **store.selector, read_only=True) as session:
        assert [event.seq for event in session.events] == [0, 1, 2]


# -- creating and opening -----------------------------------------------------------------------


def test_create_never_overwrites_and_open_needs_a_log(store: StoreUnderTest):
    Session.create(store.location, **store.selector).close()
    with pytest.raises(FileExistsError):
        Session.create(store.location, **store.selector)
    with pytest.raises(FileNotFoundError):
        Session.open(store.missing_location, **store.missing_selector)
    assert not store.exists(missing=True)


# -- durability -----------------------------------------------------------------------------------


@pytest.mark.parametrize("durability", ["always", "checkpoint", "none"])
def test_every_durability_mode_keeps_every_append(build, store: StoreUnderTest, durability: str):
    with Session.create(store.location, **store.selector, durability=durability) as session:
        assert session.durability == durability
        for n in range(20):
            session.append("user/message", build.user(str(n)))
            if n % 5 == 0:
                session.sync()
    with Session.open(store.location, **store.selector, durability=durability) as session:
        assert [m.text for m in session.messages()] == [str(n) for n in range(20)]


def test_unknown_durability_is_refused(store: StoreUnderTest):
    with pytest.raises(ValueError, match="durability"):
        Session.create(store.location, **store.selector, durability="sometimes")
    assert not store.exists()
    raw = store.new_store()
    with pytest.raises(ValueError, match="durability must be one of 'always', 'checkpoint', 'none'"):
        raw.create('{"type": "session"}', "sometimes")
    assert not store.exists()


# -- readers and writers --------------------------------------------------------------------------


def test_read_only_never_writes(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
        session.append("turn/start", {"turn": 1})  # a crashed turn: open() would repair it
    before = store.snapshot()
    with Session.open(store.location, **store.selector, read_only=True) as session:
        assert [e.type for e in session.events] == ["turn/start"]
        with pytest.raises(SessionClosedError, match="read-only"):
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        session.sync()  # nothing to do
    assert store.snapshot() == before


def test_there_is_one_writer_per_log(build, store: StoreUnderTest):
    first = Session.create(store.location, **store.selector)
    first.append("user/message", build.user("one"))
    first.sync()
    if store.second_writer == "open":
        with pytest.raises(SessionError, match=store.second_writer_error):
            Session.open(store.location, **store.selector)
    else:
        second = Session.open(store.location, **store.selector)
        first.append("user/message", build.user("two"))
        with pytest.raises(SessionError, match=store.second_writer_error):
            second.append("user/message", build.user("three"))
        second.close()
    with Session.open(store.location, **store.selector, read_only=True) as reader:  # readers are always welcome
        assert reader.messages()[0].text == "one"
    first.close()
    with Session.open(store.location, **store.selector) as again:
        assert again.messages()[0].text == "one"


# -- closing --------------------------------------------------------------------------------------


def test_context_manager_closes_and_events_stay_readable(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
        message = build.user()
        session.append("user/message", message)
    assert session.closed
    assert session.messages() == (message,)
    assert "closed" in repr(session)


def test_a_closed_session_and_a_closed_store_refuse_writes(build, store: StoreUnderTest):
    session = Session.create(store.location, **store.selector)
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
    with Session.open(store.location, **store.selector) as reopened:
        assert len(reopened.events) == 1


# -- damage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [1, 2])
def test_a_bad_record_is_corruption_naming_where_it_lives(build, store: StoreUnderTest, index: int):
    with Session.create(store.location, **store.selector) as session:
        append_texts(session, build, [str(n) for n in range(5)])
    store.replace_record(index, f'{{"seq":{index},"time":1,"type":"user/message","data":{{"id":')
    with pytest.raises(SessionCorruptError, match=rf"{re.escape(store.place(index))}: not valid JSON") as caught:
        Session.open(store.location, **store.selector)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


@pytest.mark.parametrize("read_only", [False, True])
def test_a_record_changed_after_it_was_written_fails_its_checksum(build, store: StoreUnderTest, read_only: bool):
    with Session.create(store.location, **store.selector) as session:
        append_texts(session, build, [str(n) for n in range(5)])
    store.change_record(3)
    with pytest.raises(SessionCorruptError, match=rf"{re.escape(store.place(3))}: checksum mismatch"):
        Session.open(store.location, **store.selector, read_only=read_only)


def test_a_torn_tail_loses_only_the_unfinished_append(build, store: StoreUnderTest):
    with Session.create(store.location, **store.selector) as session:
        append_texts(session, build, ["m0", "m1"])
    if not store.tear_tail('{"seq":2,"time":1,"type":"user/mess'):
        pytest.skip(f"{store.name}: an append is atomic, nothing can be left half-written")
    with pytest.warns(SessionRecoveryWarning, match=re.escape(store.place(2))):
        session = Session.open(store.location, **store.selector)
    with session:
        assert [m.text for m in session.messages()] == ["m0", "m1"]
        assert session.append("user/message", build.user("m2")).seq == 2
    with Session.open(store.location, **store.selector) as again:  # repaired: no warning (warnings are errors here)
        assert [m.text for m in again.messages()] == ["m0", "m1", "m2"]
