"""The SQLite store: one database per log, in WAL mode.

Tables `dshkit_session` (one row: the header record) and `dshkit_events` (`seq` primary key,
`type`, `time`, `body`: the same JSON record the JSON Lines store writes). Every append is its
own transaction, so a crash never leaves half an event. Durability maps onto SQLite's own:
`"always"` is `synchronous=FULL` (the WAL is fsynced at every commit), `"checkpoint"` is
`synchronous=NORMAL` plus an fsync of the WAL file at `sync()`, `"none"` is `synchronous=OFF`.
A second writer that appends to the same log fails on the primary key instead of forking it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from dshkit.session.errors import SessionCorruptError, SessionError
from dshkit.session.events import Event
from dshkit.session.stores.protocol import check_durability

_SCHEMA = (
    "CREATE TABLE dshkit_session (header TEXT NOT NULL)",
    "CREATE TABLE dshkit_events ("
    "seq INTEGER PRIMARY KEY, type TEXT NOT NULL, time INTEGER NOT NULL, body TEXT NOT NULL)",
)
_SYNCHRONOUS = {"always": "FULL", "checkpoint": "NORMAL", "none": "OFF"}


class SqliteStore:
    """A session log in a SQLite database (WAL)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._durability = "checkpoint"
        self._dirty = False

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def describe(self, index: int) -> str:
        """Where record `index` lives: its row of `dshkit_events` (-1: the header row)."""
        if index < 0:
            return f"{self.path}: dshkit_session header"
        return f"{self.path}: row {index + 1} of dshkit_events"

    def _connect(self, mode: str) -> sqlite3.Connection:
        uri = f"{self.path.absolute().as_uri()}?mode={mode}"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10.0)

    def _configure(self, db: sqlite3.Connection, durability: str) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")

    def create(self, header: str, durability: str) -> None:
        """Create the database with its header row; `FileExistsError` if the path exists."""
        self._durability = check_durability(durability)
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))  # never clobber a file
        db = None
        try:
            db = self._connect("rw")
            self._configure(db, durability)
            db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute("INSERT INTO dshkit_session (header) VALUES (?)", (header,))
            db.execute("COMMIT")
        except BaseException:
            if db is not None:
                db.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            raise
        self._db = db

    def load(self, durability: str, *, read_only: bool) -> tuple[str, list[str]]:
        """The header and every event record in seq order; `SessionCorruptError` if not a dshkit log."""
        self._durability = check_durability(durability)
        if not self.path.exists():
            raise FileNotFoundError(f"no session log at {self.path}")
        db = self._connect("ro" if read_only else "rw")
        try:
            if not read_only:
                self._configure(db, durability)
            headers = db.execute("SELECT header FROM dshkit_session").fetchall()
            if len(headers) != 1 or not isinstance(headers[0][0], str):
                raise SessionCorruptError(f"{self.path}: dshkit_session must hold exactly one header row")
            records = [row[0] for row in db.execute("SELECT body FROM dshkit_events ORDER BY seq")]
        except sqlite3.DatabaseError as error:
            db.close()
            raise SessionCorruptError(f"{self.path}: not a dshkit session database ({error})") from None
        except BaseException:
            db.close()
            raise
        self._db = db
        return headers[0][0], records

    def append(self, event: Event, record: str) -> None:
        """Insert one event in a transaction of its own (durable at commit in "always" mode)."""
        if self._db is None:
            raise SessionError(f"{self.path}: store is closed")
        try:
            self._db.execute(
                "INSERT INTO dshkit_events (seq, type, time, body) VALUES (?, ?, ?, ?)",
                (event.seq, event.type, event.time, record),
            )
        except sqlite3.IntegrityError:
            raise SessionError(f"{self.path}: event {event.seq} already exists: another writer appended to this log") from None
        self._dirty = self._durability == "checkpoint"

    def sync(self) -> None:
        """Make every committed event durable by fsyncing the WAL file."""
        if not self._dirty or self._db is None:
            return
        # synchronous=NORMAL leaves committed WAL frames in the OS cache; an fsync of the WAL
        # file makes them durable, which is what synchronous=FULL does at every commit.
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            fd = None  # checkpointed and removed: the database file itself was synced
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        """Close the connection; idempotent."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
