"""Telling an original-harness log file from a dshkit one, by its first bytes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dshkit.session.dsh.records import is_original_header
from dshkit.session.dsh.zstd_frames import is_zstd

_HEADER_PROBE = 64 * 1024


def _first_line(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as file:
            probe = file.read(_HEADER_PROBE)
    except (FileNotFoundError, IsADirectoryError):
        return None
    end = probe.find(b"\n")
    return probe if end < 0 else probe[:end]


def is_original_log(path: str | os.PathLike[str]) -> bool:
    """Whether the file is an original-harness JSONL log (compressed, or with the original's header)."""
    from dshkit import from_json

    line = _first_line(Path(path))
    if line is None:
        return False
    if is_zstd(line):
        return True
    try:
        return is_original_header(from_json(line))
    except Exception:
        return False


def original_store_for(path: str | os.PathLike[str]) -> Any:
    """A `DshJsonlStore` for an original log at `path` (or a `.zstd` path), else `None`."""
    from dshkit.session.dsh.store_jsonl import DshJsonlStore

    path = Path(path)
    if path.name.endswith(".zstd"):
        return DshJsonlStore(path, compressed=True)
    if path.suffix.lower() == ".jsonl" and is_original_log(path):
        return DshJsonlStore(path)
    return None
