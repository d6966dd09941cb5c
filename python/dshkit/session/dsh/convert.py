"""`convert_log`: one log, rewritten in dshkit's format or in the original harness's format.

Everything both formats can say survives both ways: events (types, data, seqs, times, surface
operations, source seqs) and message ids. The original's header (cwd, delegation depth, parent
session, ...) rides along in a dshkit log's header under `original_header`, so converting back
restores it. The attachments the log's messages refer to are copied (verified) to the
destination's attachment store before the log itself appears. The destination is written to a temporary file beside it and published with a
hard link, so it appears complete or not at all, and an existing file is never overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dshkit import thaw, to_json
from dshkit.session.attachments import Attachments, copy_attachments
from dshkit.session._log.event_codec import FORMAT_VERSION as DSHKIT_VERSION
from dshkit.session._log.event_codec import encode_event as encode_dshkit_event
from dshkit.session.events import MESSAGE_EVENT_TYPES
from dshkit.session._surface import Surface
from dshkit.session.dsh.chunk_rows import pack_runs
from dshkit.session.dsh.codec import encode_record, new_header
from dshkit.session.dsh.zstd_frames import compress_frame
from dshkit.session._log.checksums import seal_line
from dshkit.session.session import Session
from dshkit.session.stores import open_store
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.stores.jsonl import JsonlStore
from dshkit.session.stores.sqlite import SqliteStore

FORMATS = ("dshkit", "dsh")
Progress = Callable[[int, int], object]
_FRAME_LINES = 4096  # lines per Zstandard frame when writing a compressed log in one go


def _original_header(session: Any) -> dict[str, Any]:
    stored = thaw(session.stored_header)
    if session.format == "dsh":
        return stored  # type: ignore[no-any-return]
    if isinstance(stored.get("original_header"), dict):
        return stored["original_header"]  # type: ignore[no-any-return]
    return new_header(session.created_at, session_id=session.id)


def _dshkit_header(session: Any) -> dict[str, Any]:
    header: dict[str, Any] = {"type": "session", "version": DSHKIT_VERSION, "id": session.id, "created_at": session.created_at}
    stored = thaw(session.stored_header)
    if session.format == "dsh":
        header["original_header"] = stored
    elif "original_header" in stored:
        header["original_header"] = stored["original_header"]
    return header


def _dshkit_lines(events: Any, report: Callable[[int], None]) -> Iterator[str]:
    for event in events:
        if event.type in MESSAGE_EVENT_TYPES and event.surface_op is None:
            raise ValueError(
                f"event {event.seq} ({event.type}) is a message the original kept off the surface (no surfaceOp); "
                "dshkit's format has no way to say that"
            )
        yield encode_dshkit_event(event)
        report(event.seq)


def _original_records(events: Any, report: Callable[[int], None]) -> list[dict[str, Any]]:
    surface = Surface()
    records = []
    for event in events:
        records.append(encode_record(event, surface))
        if event.surface_op is not None:
            surface.fold(event)
        report(event.seq)
    return records


def _publish(dest: Path, chunks: Iterator[bytes]) -> None:
    if dest.exists():
        raise FileExistsError(f"{dest} already exists (convert_log never overwrites a log)")
    temporary = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.link(temporary, dest)  # fails if dest appeared meanwhile: never overwrite
    finally:
        temporary.unlink(missing_ok=True)


def convert_log(
    src: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    format: str = "dshkit",  # noqa: A002 - the contract's name
    session_id: str | None = None,
    progress: Progress | None = None,
) -> None:
    """Rewrite the log at `src` (either format; `session_id` for an original SQLite database) at `dest`.

    `format="dshkit"` writes dshkit's JSON Lines or SQLite, `format="dsh"` the original's JSONL,
    Zstandard-compressed for a `.jsonl.zstd` path, with its chunk runs packed: the store `dest`
    selects (`open_store`) says which. `progress(done, total)` is called as events are written.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be 'dshkit' or 'dsh', not {format!r}")
    if Path(dest).exists():
        raise FileExistsError(f"{dest} already exists (convert_log never overwrites a log)")
    target = open_store(dest, format=format)
    if not isinstance(target, (JsonlStore, SqliteStore) if format == "dshkit" else DshJsonlStore):
        raise ValueError(f"convert_log writes a {format} log file, not {target!r}")
    dest = Path(dest)
    session = Session.open(src, read_only=True, session_id=session_id)
    with session:
        events = session.events
        total = len(events)

        def report(seq: int) -> None:
            if progress is not None and (seq % 1000 == 999 or seq == total - 1):
                progress(seq + 1, total)

        if format == "dshkit":
            header = to_json(_dshkit_header(session))
            if isinstance(target, SqliteStore):
                _write_dshkit_sqlite(target, header, events, report, session.attachments)
                return
            copy_attachments(events, session.attachments, JsonlStore(dest).attachment_backend())
            _publish(dest, _sealed_lines(header, _dshkit_lines(events, report)))
            return
        copy_attachments(events, session.attachments, DshJsonlStore(dest).attachment_backend())
        header = to_json(_original_header(session))
        lines = [to_json(record) for record in pack_runs(_original_records(events, report))]
        if isinstance(target, DshJsonlStore) and target.compressed:
            _publish(dest, _frames(header, lines))
        else:
            _publish(dest, _lines_as_bytes(header, iter(lines)))


def _lines_as_bytes(header: str, lines: Iterator[str]) -> Iterator[bytes]:
    yield (header + "\n").encode()
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _FRAME_LINES:
            yield ("\n".join(batch) + "\n").encode()
            batch.clear()
    if batch:
        yield ("\n".join(batch) + "\n").encode()


def _sealed_lines(header: str, lines: Iterator[str]) -> Iterator[bytes]:
    """dshkit's JSON Lines (format version 2): every line sealed with its checksum."""
    yield seal_line(header)
    batch: list[bytes] = []
    for line in lines:
        batch.append(seal_line(line))
        if len(batch) >= _FRAME_LINES:
            yield b"".join(batch)
            batch.clear()
    if batch:
        yield b"".join(batch)


def _frames(header: str, lines: list[str]) -> Iterator[bytes]:
    yield compress_frame((header + "\n").encode())
    for start in range(0, len(lines), _FRAME_LINES):
        yield compress_frame(("\n".join(lines[start : start + _FRAME_LINES]) + "\n").encode())


def _write_dshkit_sqlite(
    store: SqliteStore, header: str, events: Any, report: Callable[[int], None], attachments: Attachments
) -> None:
    store.create(header, "none")
    try:
        copy_attachments(events, attachments, store)
        for event, line in zip(events, _dshkit_lines(events, report), strict=True):
            store.append(event, line)
        store.sync()
    finally:
        store.close()

