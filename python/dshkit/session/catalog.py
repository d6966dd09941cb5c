"""`list_sessions(location)`: the sessions in a PostgreSQL database or a directory of log files."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import NamedTuple

from dshkit import from_json

from dshkit.session.codec import decode_header
from dshkit.session.errors import SessionCorruptError, SessionRecoveryWarning
from dshkit.session.stores import store_for_path
from dshkit.session.stores.postgres import import_psycopg, is_postgres_url, redact

LOG_SUFFIXES = (".jsonl", ".sqlite", ".db")


class SessionInfo(NamedTuple):
    """One session of a catalog; times in ms since the epoch (`updated_at`: its last event)."""

    id: str
    created_at: int
    updated_at: int
    event_count: int
    parent_id: str | None


def list_sessions(location: str | os.PathLike[str]) -> tuple[SessionInfo, ...]:
    """Every session at `location` (a `postgresql://` URL or a directory of logs), newest first."""
    if is_postgres_url(location):
        return _list_database(str(location))
    directory = Path(location)
    if not directory.is_dir():
        raise NotADirectoryError(f"list_sessions needs a postgresql:// URL or a directory of logs, not {str(location)!r}")
    infos = [_file_info(path) for path in sorted(directory.iterdir()) if path.suffix.lower() in LOG_SUFFIXES and path.is_file()]
    return tuple(sorted(infos, key=lambda info: (-info.updated_at, -info.created_at, info.id)))


def _file_info(path: Path) -> SessionInfo:
    store = store_for_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionRecoveryWarning)  # a torn tail is listed without it
        header_text, records = store.load("none", read_only=True)
    store.close()
    header = decode_header(header_text, store.describe(-1))
    updated_at = header["created_at"]
    if records:
        try:
            updated_at = max(updated_at, from_json(records[-1])["time"])
        except Exception:
            raise SessionCorruptError(f"{store.describe(len(records) - 1)}: not a valid event record") from None
    return SessionInfo(header["id"], header["created_at"], updated_at, len(records), header.get("parent_id"))


def _list_database(url: str) -> tuple[SessionInfo, ...]:
    from dshkit.session.stores.postgres_schema import LIST_SESSIONS
    from dshkit.session.stores.postgres import check_url, ensure_schema

    check_url(url)
    psycopg = import_psycopg()
    try:
        connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        raise ConnectionError(f"cannot connect to {redact(url)}: {str(error).strip()}") from None
    with connection:
        ensure_schema(connection)
        return tuple(SessionInfo(*row) for row in connection.execute(LIST_SESSIONS))
