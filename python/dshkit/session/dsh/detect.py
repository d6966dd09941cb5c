"""Telling an original-harness log from a dshkit one by its first bytes (no store is imported).

A compressed log starts with the Zstandard frame magic; a plain one with the original's header
line (`{"type": "session", "version": 0, "createdAt": ...}`, where dshkit writes `created_at`); the
original's SQLite database has `PRAGMA user_version` 17 (bytes 60-63 of the SQLite file header),
where dshkit's own SQLite store leaves it 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from dshkit import from_json

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SQLITE_MAGIC = b"SQLite format 3\x00"
ORIGINAL_SQLITE_SCHEMA = 17
_HEADER_PROBE = 64 * 1024


def is_original_header(header: object) -> bool:
    """Whether a parsed first line is the original's header (`{"type": "session", ..., "createdAt": ...}`)."""
    return isinstance(header, Mapping) and header.get("type") == "session" and "createdAt" in header


def original_kind(path: str | os.PathLike[str]) -> str | None:
    """`"zstd"`, `"jsonl"` or `"sqlite"` for an existing original-harness log at `path`, else `None`."""
    try:
        with open(path, "rb") as file:
            probe = file.read(_HEADER_PROBE)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    if probe.startswith(ZSTD_MAGIC):
        return "zstd"
    if probe.startswith(SQLITE_MAGIC):
        schema = int.from_bytes(probe[60:64], "big") if len(probe) >= 64 else 0
        return "sqlite" if schema == ORIGINAL_SQLITE_SCHEMA else None
    end = probe.find(b"\n")
    try:
        header = from_json(probe if end < 0 else probe[:end])
    except Exception:  # not JSON: not ours to judge here (the dshkit store reports it)
        return None
    return "jsonl" if is_original_header(header) else None
