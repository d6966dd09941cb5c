"""Where served sessions live: a directory of SQLite logs (one machine) or one PostgreSQL database.

`SessionPlace` is the only code of `dshkit.serve` that names a store. The API process uses it to
create a session (its header records the owning principal and the agent's name), to read a log
read-only and to probe the newest seq of many sessions cheaply; the worker uses it to open a
session as its one fenced writer.
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
        if not self.is_postgres:
            folder = Path(text)
            if folder.exists() and not folder.is_dir():
                raise ValueError(f"store {text!r}: expected a directory or a postgresql:// URL, got a file")
            folder.mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"SessionPlace({self.location!r})"

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
        """The session's log, read-only (never locks, repairs or writes)."""
        return Session.open(**self._where(session_id), read_only=True)

    def open_writer(self, session_id: str) -> Session:
        """The session as its one writer (crash repair runs here); `SessionError` if another holds it."""
        return Session.open(**self._where(session_id), durability="checkpoint")

    def latest_seqs(self, session_ids: list[str]) -> dict[str, int]:
        """The newest seq of each session that has events (one query on PostgreSQL)."""
        if not session_ids:
            return {}
        if self.is_postgres:
            return _postgres_latest(self.location, session_ids)
        found = {}
        for session_id in session_ids:
            seq = _sqlite_latest(self._path(session_id))
            if seq is not None:
                found[session_id] = seq
        return found


def _sqlite_latest(path: Path) -> int | None:
    try:
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=10.0)
    except sqlite3.OperationalError:
        return None
    try:
        row = db.execute("SELECT max(seq) FROM dshkit_events").fetchone()
    finally:
        db.close()
    return None if row is None else row[0]


_POSTGRES_CONNECTIONS: dict[str, Any] = {}


def _postgres_latest(url: str, session_ids: list[str]) -> dict[str, int]:
    import psycopg

    connection = _POSTGRES_CONNECTIONS.get(url)
    if connection is None or connection.closed:
        connection = _POSTGRES_CONNECTIONS[url] = psycopg.connect(url, autocommit=True)
    try:
        rows = connection.execute(
            "SELECT session_id, max(seq) FROM dshkit_events WHERE session_id = ANY(%s) GROUP BY session_id",
            (session_ids,),
        ).fetchall()
    except psycopg.OperationalError:
        _POSTGRES_CONNECTIONS.pop(url, None)
        raise
    return {session_id: seq for session_id, seq in rows}
