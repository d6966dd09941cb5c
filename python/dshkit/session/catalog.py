"""`list_sessions(location)`: the sessions in a PostgreSQL database, a directory of log files or an original-harness SQLite database."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import NamedTuple

from dshkit import from_json

from dshkit.session.errors import SessionCorruptError, SessionRecoveryWarning
from dshkit.session._log.event_codec import checked_records
from dshkit.session.stores import choose_store, open_store
from dshkit.session.stores.protocol import log_format_of
from dshkit.session.stores.postgres import import_psycopg, redact


class SessionInfo(NamedTuple):
    """One session of a catalog; times in ms since the epoch (`updated_at`: its last event)."""

    id: str
    created_at: int
    updated_at: int
    event_count: int
    parent_id: str | None
    origin: str | None = None  # "subagent" for a subagent's log (its parent_id is the delegating session)


def list_sessions(location: str | os.PathLike[str]) -> tuple[SessionInfo, ...]:
    """Every session at `location` (a `postgresql://` URL, a directory of logs or an original SQLite database), newest first."""
    chosen = choose_store(location)
    if chosen is not None and chosen.holds_many:  # a database: PostgreSQL, or an original SQLite file
        return _list_database(os.fspath(location)) if chosen.is_url else _list_original_database(location)
    directory = Path(location)
    if not directory.is_dir():
        raise NotADirectoryError(f"list_sessions needs a postgresql:// URL or a directory of logs, not {str(location)!r}")
    infos: list[SessionInfo] = []
    for log_file in list_log_files(directory):
        if log_file.error is not None:
            raise log_file.error
        infos.extend(log_file.sessions)
    return tuple(sorted(infos, key=newest_first))


def newest_first(info: SessionInfo) -> tuple[int, int, str]:
    """The order sessions are listed in: last event, then creation, newest first; then id."""
    return (-info.updated_at, -info.created_at, info.id)


class LogFile(NamedTuple):
    """One log file of a directory: its sessions, or the error that kept them from being read."""

    path: Path
    sessions: tuple[SessionInfo, ...]
    error: Exception | None = None


def list_log_files(directory: str | os.PathLike[str]) -> tuple[LogFile, ...]:
    """Each log file of `directory` (by name), read on its own: one unreadable file does not hide the others."""
    files: list[LogFile] = []
    for path in sorted(Path(directory).iterdir()):
        chosen = choose_store(path) if path.is_file() else None
        if chosen is None:
            continue
        try:
            sessions = _list_original_database(path) if chosen.holds_many else (_file_info(path),)
        except Exception as error:  # noqa: BLE001 - kept with the file, raised or shown by the caller
            files.append(LogFile(path, (), error))
        else:
            files.append(LogFile(path, sessions))
    return tuple(files)


def _file_info(path: Path) -> SessionInfo:
    store = open_store(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SessionRecoveryWarning)  # a torn tail is listed without it
        header_text, records = store.load("none", read_only=True)
    store.close()
    records = checked_records(records, store.describe)
    session_id, created_at, header = log_format_of(store).read_header(header_text, store.describe(-1))
    if log_format_of(store).name != "dshkit":  # the original packs chunk events into rows: count events
        events = log_format_of(store).decode_events(records, store.describe, lambda event: None)
        updated_at = max(created_at, events[-1].time) if len(events) else created_at
        return SessionInfo(session_id, created_at, updated_at, len(events), header.get("parentSession"))
    updated_at = created_at
    if records:
        try:
            updated_at = max(updated_at, from_json(records[-1])["time"])
        except Exception:
            raise SessionCorruptError(f"{store.describe(len(records) - 1)}: not a valid event record") from None
    return SessionInfo(session_id, created_at, updated_at, len(records), header.get("parent_id"), header.get("origin"))


def _list_original_database(path: str | os.PathLike[str]) -> tuple[SessionInfo, ...]:
    """The sessions of an original-harness SQLite database (`updated_at`: its last row's time; `event_count`: rows)."""
    from dshkit.session.dsh.sqlite_store import list_original_sessions

    return tuple(
        SessionInfo(row["id"], row["created_at"], row["updated_at"], row["event_rows"], row["parent_session"])
        for row in sorted(list_original_sessions(path), key=lambda row: (-row["updated_at"], -row["created_at"], row["id"]))
    )


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
