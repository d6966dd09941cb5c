"""Where served sessions live: a directory of SQLite logs (one machine) or one PostgreSQL database.

`SessionPlace` is the only code of `dshkit.serve` that names a store. The API process uses it to
create a session (its header records the owning principal and the agent's name), to read a log
read-only and to probe the newest seq of many sessions cheaply; the worker uses it to open a
session as its one fenced writer.

Connections are kept, not made per request: on PostgreSQL a new connection forks a server
process (tens of ms on a busy machine, once per turn before), and on SQLite opening a file and
reading its schema cost more than the `max(seq)` the live streams poll for (200 watched files
opened every 50 ms took a third of a core).
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from dshkit import new_message_id
from dshkit.session import Session, SessionError
from dshkit.session.stores.postgres import PostgresStore, ensure_schema

logger = logging.getLogger("dshkit.serve")

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
SERVE_HEADER_FIELD = "serve"
_OWNERS_REMEMBERED = 10_000


def is_session_id(text: object) -> bool:
    """Whether `text` can name a served session (also a file name: letters, digits, `_`, `-`)."""
    return isinstance(text, str) and _SESSION_ID.fullmatch(text) is not None


class SessionPlace:
    """A directory of `<id>.sqlite` logs, or a `postgresql://` URL holding every session."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        text = os.fspath(location)
        self.is_postgres = text.startswith(("postgresql://", "postgres://"))
        self.location = text
        self._owners: dict[str, dict[str, Any]] = {}
        self._owners_lock = threading.Lock()
        self._readers = ReadingPool(text) if self.is_postgres else None
        self._writers = WritingPool(text) if self.is_postgres else None
        self._watched: dict[str, sqlite3.Connection] = {}  # SQLite: a read-only connection per watched log
        self._watched_lock = threading.Lock()
        if not self.is_postgres:
            folder = Path(text)
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"store {text!r}: expected a directory or a postgresql:// URL, got a file")
            folder.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"SessionPlace({self.location!r})"

    def close(self) -> None:
        """Close the connections kept idle (a session still open keeps its own until it closes)."""
        for pool in (self._readers, self._writers):
            if pool is not None:
                pool.close()
        self.latest_seqs([])

    def _path(self, session_id: str) -> Path:
        return Path(self.location) / f"{session_id}.sqlite"

    def _where(self, session_id: str) -> dict[str, Any]:
        if self.is_postgres:
            return {"path": self.location, "session_id": session_id}
        return {"path": self._path(session_id)}

    def create(self, principal: str, agent: str) -> str:
        """Create an empty session owned by `principal` for the agent named `agent`; its id."""
        session_id = new_message_id().lower()
        fields = {SERVE_HEADER_FIELD: {"principal": principal, "agent": agent}}
        Session.create(**self._where(session_id), header_fields=fields, durability="always").close()
        self._remember(session_id, dict(fields[SERVE_HEADER_FIELD]))
        return session_id

    def owner(self, session_id: str) -> dict[str, Any] | None:
        """The session's `{"principal", "agent"}`, or None when there is no such served session.

        A header never changes, so a found owner is remembered (a bounded cache): checking who
        owns a session costs one read of its log the first time only."""
        if not is_session_id(session_id):
            return None
        known = self._owners.get(session_id)
        if known is not None:
            return known
        found = self._read_owner(session_id)
        if found is not None:
            self._remember(session_id, found)
        return found

    def _remember(self, session_id: str, owner: dict[str, Any]) -> None:
        with self._owners_lock:
            if len(self._owners) >= _OWNERS_REMEMBERED:
                self._owners.pop(next(iter(self._owners)))
            self._owners[session_id] = owner

    def _read_owner(self, session_id: str) -> dict[str, Any] | None:
        if not self.is_postgres and not self._path(session_id).exists():
            return None
        try:
            session = self.read(session_id)
        except FileNotFoundError:
            return None
        except SessionError as error:  # not a log this app can read: nobody's session
            logger.warning("session %s cannot be read: %s", session_id, error)
            return None
        with session:
            header = session.stored_header
        served = header.get(SERVE_HEADER_FIELD) if hasattr(header, "get") else None
        return dict(served) if served is not None else None

    def read(self, session_id: str) -> Session:
        """The session's log, read-only (never locks, repairs or writes).

        On PostgreSQL over a connection of this process's reading pool: an API process reads a
        log for every stream wake, and a new connection each time (a server process forked per
        read) cost more than the read itself."""
        if self.is_postgres:
            assert self._readers is not None
            return Session.open(store=PostgresStore(self.location, session_id, connections=self._readers), read_only=True)
        return Session.open(**self._where(session_id), read_only=True)

    def open_writer(self, session_id: str) -> Session:
        """The session as its one writer (crash repair runs here); `SessionError` if another holds it.

        On PostgreSQL the connection comes from this process's `WritingPool`: the fence is the
        session's advisory lock, taken on it at every open and released before it goes back."""
        if self._writers is not None:
            return Session.open(store=PostgresStore(self.location, session_id, connections=self._writers), durability="checkpoint")
        return Session.open(**self._where(session_id), durability="checkpoint")

    def latest_seqs(self, session_ids: list[str]) -> dict[str, int]:
        """The newest seq of each session that has events (one query on PostgreSQL).

        On SQLite each watched log keeps a read-only connection between calls; the connections
        of sessions not in `session_ids` are closed (so `latest_seqs([])` closes them all)."""
        if self._readers is not None:
            return _postgres_latest(self._readers, session_ids) if session_ids else {}
        found = {}
        with self._watched_lock:
            for gone in set(self._watched).difference(session_ids):
                self._watched.pop(gone).close()
            for session_id in session_ids:
                seq = self._sqlite_latest(session_id)
                if seq is not None:
                    found[session_id] = seq
        return found

    def _sqlite_latest(self, session_id: str) -> int | None:
        db = self._watched.get(session_id)
        if db is None:
            db = _sqlite_reader(self._path(session_id))
            if db is None:
                return None
            self._watched[session_id] = db
        try:
            # fetchall steps the statement to its end, which ends the read transaction: a kept
            # connection must never hold one (it would stop the writer's WAL checkpoints).
            rows = db.execute("SELECT max(seq) FROM dshkit_events").fetchall()
        except sqlite3.Error:
            self._watched.pop(session_id).close()
            return None
        return rows[0][0] if rows else None


class ReadingPool:
    """Idle PostgreSQL connections, reused (at most `keep` kept): a store's `connections`
    (`dshkit.session.stores.postgres.PostgresConnections`), read-only stores' here."""

    def __init__(self, url: str, keep: int = 8) -> None:
        self._url = url
        self._keep = keep
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def getconn(self) -> Any:
        """An idle connection, or a new one (autocommit: no transaction outlives a request)."""
        with self._lock:
            while self._idle:
                connection = self._idle.pop()
                if not connection.closed:
                    return connection
        return self._new()

    def _new(self) -> Any:
        import psycopg

        try:
            connection = psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as error:
            raise ConnectionError(f"cannot connect to sessions: {str(error).strip()}") from error
        try:
            ensure_schema(connection)  # once per connection: an API may read before any session exists
        except BaseException:
            connection.close()
            raise
        return connection

    def putconn(self, connection: Any) -> None:
        """Keep the connection for the next borrower (closed when enough are kept, broken, or in a transaction)."""
        from psycopg import pq

        with self._lock:
            usable = not connection.closed and not connection.broken and connection.info.transaction_status == pq.TransactionStatus.IDLE
            if usable and len(self._idle) < self._keep:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        """Close every idle connection (one borrowed now is closed when given back)."""
        with self._lock:
            idle, self._idle, self._keep = self._idle, [], 0
        for connection in idle:
            connection.close()


class WritingPool(ReadingPool):
    """Idle connections for fenced writers (`PostgresStore(..., connections=)`): the store takes the
    session's lock on a borrowed connection at every open and releases it before giving it back."""

    def _new(self) -> Any:
        connection = super()._new()
        # As the store sets on its own connections: its writes are one statement whose plan never
        # depends on the values, so a generic plan saves planning every write.
        connection.execute("SET plan_cache_mode = force_generic_plan")
        return connection


def _sqlite_reader(path: Path) -> sqlite3.Connection | None:
    """A read-only connection to a session file, shared by the watcher's threads; None if it cannot open."""
    try:
        return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=10.0, check_same_thread=False)
    except sqlite3.OperationalError:
        return None


def _postgres_latest(pool: ReadingPool, session_ids: list[str]) -> dict[str, int]:
    connection = pool.getconn()
    try:
        rows = connection.execute(
            "SELECT session_id, max(seq) FROM dshkit_events WHERE session_id = ANY(%s) GROUP BY session_id",
            (session_ids,),
        ).fetchall()
    finally:
        pool.putconn(connection)
    return {session_id: seq for session_id, seq in rows}
