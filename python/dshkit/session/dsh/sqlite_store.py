"""Reading the original harness's SQLite store (schema 17): one database, many sessions.

Each physical row becomes the JSONL record the original would have written for it, so the one
decoder of `records.py` reads both backends: `data` is JSON text or a zstd frame of it,
`source_event_seqs` a varint BLOB (first value plain, then ZigZag deltas), `surface_op` JSON
text, and `ignorable = 0` marks a packed chunk row (`seq`/`time` are its `seq0`/`time0`).
Read-only: dshkit never writes into the original's database.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from dshkit import to_json
from dshkit.session.errors import SessionCorruptError, SessionError
from dshkit.session.dsh.log_format import ORIGINAL_FORMAT
from dshkit.session.dsh.zstd_frames import decompress_frame
from dshkit.session.events import Event
from dshkit.session.dsh.attachment_root import original_attachment_root
from dshkit.session.stores.attachment_folder import FolderAttachments
from dshkit.session.stores.protocol import SessionStore, check_durability

SCHEMA_VERSION = 17
_HEADER_COLUMNS = (
    ("cwd", "cwd"),
    ("parent_session", "parentSession"),
    ("seed_length", "seedLength"),
    ("origin", "origin"),
    ("delegation_depth", "delegationDepth"),
    ("agent_preset", "agentPreset"),
)


def decode_source_seqs(blob: bytes) -> list[int]:
    """The seqs of a `source_event_seqs` BLOB; `ValueError` if truncated."""
    values: list[int] = []
    offset, previous = 0, 0
    while offset < len(blob):
        value, shift = 0, 0
        while True:
            if offset >= len(blob):
                raise ValueError("truncated varint in source_event_seqs")
            byte = blob[offset]
            offset += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if values:
            value = previous + (value // 2 if value % 2 == 0 else -((value + 1) // 2))
        values.append(value)
        previous = value
    return values


def encode_source_seqs(values: list[int]) -> bytes:
    """The BLOB the original writes for `values` (used by tests to build databases)."""
    out = bytearray()
    previous = 0
    for index, value in enumerate(values):
        encoded = value if index == 0 else (value - previous) * 2 if value >= previous else (previous - value) * 2 - 1
        while encoded >= 0x80:
            out.append((encoded & 0x7F) | 0x80)
            encoded >>= 7
        out.append(encoded)
        previous = value
    return bytes(out)


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such database")
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        connection.close()
        raise SessionCorruptError(f"{path}: not an original-harness session database (schema {version}, expected {SCHEMA_VERSION})")
    return connection


def list_original_sessions(db_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every session of an original SQLite database, oldest first.

    `{"id", "created_at", "cwd", "parent_session", "event_rows", "updated_at"}`: `event_rows` counts
    stored rows (a packed chunk row holds several events), `updated_at` is the last row's time.
    """
    connection = _connect(Path(db_path))
    try:
        rows = connection.execute(
            "SELECT s.id, s.created_at, s.cwd, s.parent_session, "
            "(SELECT count(*) FROM events e WHERE e.session_id = s.id), "
            "coalesce((SELECT max(e.time) FROM events e WHERE e.session_id = s.id), s.created_at) "
            "FROM sessions s ORDER BY s.created_at, s.id"
        ).fetchall()
    finally:
        connection.close()
    keys = ("id", "created_at", "cwd", "parent_session", "event_rows", "updated_at")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _data_text(value: Any) -> str:
    if isinstance(value, bytes):
        return decompress_frame(value).decode()
    return value  # type: ignore[no-any-return]


class DshSqliteStore(SessionStore):
    """One session of an original SQLite database, read-only."""

    path: Path  # a file store always has one (the protocol's default is None)

    log_format = ORIGINAL_FORMAT
    read_only = True

    def __init__(self, path: str | os.PathLike[str], session_id: str) -> None:
        self.path = Path(path)
        self.session_id = session_id
        self._seqs: list[int] = []

    def __repr__(self) -> str:
        return f"DshSqliteStore({str(self.path)!r}, session_id={self.session_id!r})"

    def attachment_backend(self) -> FolderAttachments:
        """The original's attachment folder (`<DSH_HOME>/attachments/v1`, `original_attachment_root`)."""
        return FolderAttachments(original_attachment_root(self.path))

    def describe(self, index: int) -> str:
        """The row at fault (its first seq)."""
        if index < 0:
            return f"{self.path}: session {self.session_id}"
        return f"{self.path}: session {self.session_id}: events row seq {self._seqs[index]}"

    def load(self, durability: str, *, read_only: bool) -> tuple[str, list[str]]:
        """The header and one JSONL record per physical row, in seq order; `FileNotFoundError` if the
        database holds no session `session_id` (as every store says of a log that is not there)."""
        check_durability(durability)
        connection = _connect(self.path)
        try:
            session = connection.execute(
                "SELECT version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset "
                "FROM sessions WHERE id = ?",
                (self.session_id,),
            ).fetchone()
            if session is None:
                raise FileNotFoundError(f"{self.path}: no session {self.session_id!r}")
            rows = connection.execute(
                "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable FROM events "
                "WHERE session_id = ? ORDER BY seq",
                (self.session_id,),
            ).fetchall()
        finally:
            connection.close()
        header: dict[str, Any] = {"type": "session", "version": session[0], "id": self.session_id, "createdAt": session[1]}
        for (_column, key), value in zip(_HEADER_COLUMNS, session[2:], strict=True):
            if value is not None or key == "delegationDepth":
                header[key] = 0 if value is None and key == "delegationDepth" else value
        records = []
        for seq, event_type, time, data, sources, surface_op, ignorable in rows:
            self._seqs.append(seq)
            try:
                text = _data_text(data)
                if ignorable == 0:
                    records.append(f'{{"type":{to_json(event_type)},"seq0":{seq},"time0":{time},"data":{text}}}')
                    continue
                parts = [f'{{"type":{to_json(event_type)},"seq":{seq},"time":{time},"data":{text}']
                if sources is not None:
                    parts.append(f',"sourceEventSeqs":{to_json(decode_source_seqs(sources))}')
                if surface_op is not None:
                    parts.append(f',"surfaceOp":{surface_op}')
                if ignorable == 1:
                    parts.append(',"ignorable":true')
                records.append("".join(parts) + "}")
            except Exception as error:
                raise SessionCorruptError(f"{self.path}: session {self.session_id}: events row seq {seq}: {error}") from None
        return to_json(header), records

    def create(self, header: str, durability: str) -> None:
        """Refused: the original's database is read here, never written."""
        check_durability(durability)
        raise SessionError(f"{self.path}: dshkit opens the original's SQLite store read-only")

    def append(self, event: Event, record: str) -> None:
        """Refused (read-only store)."""
        raise SessionError(f"{self.path}: dshkit opens the original's SQLite store read-only")

    def sync(self) -> None:
        """Nothing to sync (read-only)."""

    def close(self) -> None:
        """Nothing to release (the connection closes after loading)."""
