"""The original harness's JSONL file, plain (`session.jsonl`) or compressed (`session.jsonl.zstd`).

Crash rules follow the original: in a plain file a torn last line is cut; in a compressed file an
incomplete last frame is cut and the complete lines it still yields are written back as one new
checksummed frame. A line that does not parse is a crash tail (cut, with a warning) unless a
`turn/end` follows it, in which case the log is corrupt: `SessionCorruptError` with its line.
Appends write one line (plain) or one checksummed frame per event (compressed), under an
exclusive `flock`, like dshkit's own JSON Lines store.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from dshkit._core import split_original_lines
from dshkit.session.errors import SessionCorruptError, SessionError, SessionRecoveryWarning
from dshkit.session.events import Event
from dshkit.session.dsh.log_format import ORIGINAL_FORMAT
from dshkit.session.dsh.codec import decode_header
from dshkit.session.stores.jsonl import cut_torn_line, write_all
from dshkit.session.stores.jsonl_read import read_all
from dshkit.session.dsh.attachment_root import original_attachment_root
from dshkit.session.dsh.plain_read import crash_tail_start, read_plain_log
from dshkit.session.stores.attachment_folder import FolderAttachments
from dshkit.session.stores.protocol import SessionStore, check_durability
from dshkit.session.dsh.zstd_frames import (
    compress_frame,
    decompress_frame,
    decompress_prefix,
    is_zstd,
    split_frames,
    zstandard_module,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: single writer by convention
    fcntl = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class DshJsonlStore(SessionStore):
    """An original-format log file; `compressed` is fixed at creation or read from the file."""

    path: Path  # a file store always has one (the protocol's default is None)

    log_format = ORIGINAL_FORMAT

    def __init__(self, path: str | os.PathLike[str], *, compressed: bool | None = None) -> None:
        self.path = Path(path)
        self.compressed = self.path.name.endswith(".zstd") if compressed is None else compressed
        self._fd: int | None = None
        self._durability = "checkpoint"
        self._size = 0
        self._dirty = False

    def __repr__(self) -> str:
        return f"DshJsonlStore({str(self.path)!r})"

    def attachment_backend(self) -> FolderAttachments:
        """The original's attachment folder (`<DSH_HOME>/attachments/v1`, `original_attachment_root`)."""
        return FolderAttachments(original_attachment_root(self.path))

    def describe(self, index: int) -> str:
        """Where logical line `index + 2` lives (the header is line 1; compressed: the decompressed line)."""
        suffix = " (decompressed)" if self.compressed else ""
        return f"{self.path}: line {index + 2}{suffix}"

    def _lock(self, fd: int) -> None:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SessionError(f"{self.path} is already open for writing (by this or another process)") from None

    def _encode(self, text: bytes) -> bytes:
        return compress_frame(text) if self.compressed else text

    def create(self, header: str, durability: str) -> None:
        """Write the header (its own frame when compressed); `FileExistsError` if the file exists."""
        self._durability = check_durability(durability)
        data = self._encode((header + "\n").encode())
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | _CLOEXEC, 0o644)
        try:
            self._lock(fd)
            write_all(fd, data)
            if durability != "none":
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(self.path)
            raise
        self._fd, self._size = fd, len(data)

    def load(self, durability: str, *, read_only: bool) -> tuple[bytes, Sequence[bytes]]:
        """The header line and every complete event line, after the original's crash-tail rules
        (`OriginalLines`, spans of the bytes read, when no torn frame was salvaged)."""
        self._durability = check_durability(durability)
        fd = os.open(self.path, (os.O_RDONLY if read_only else os.O_RDWR | os.O_APPEND) | _CLOEXEC)
        try:
            if not read_only:
                self._lock(fd)
            self.compressed = is_zstd(os.pread(fd, 4, 0))  # before reading: a compressed log is never mapped
            header, lines = self._load_frames(fd, read_all(fd), read_only) if self.compressed else self._load_plain(fd, read_only)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return header, lines

    def _load_plain(self, fd: int, read_only: bool) -> tuple[bytes, Sequence[bytes]]:
        content, rest = read_plain_log(fd)  # a large log: mapped up to a line no writer cuts, `rest` read
        header_end = content.find(b"\n")
        if header_end < 0:
            raise SessionCorruptError(f"{self.path}: line 1: not an original-harness session log (no complete header line)")
        decode_header(content[:header_end], f"{self.path}: line 1")
        pieces = split_original_lines(content, header_end + 1, rest)
        tail = pieces[-1]
        keep = len(content) + len(rest) - len(tail)
        lines, cut = self._crash_tail(pieces[:-1])
        keep -= sum(len(line) + 1 for line in cut)
        if tail or cut:
            why = "no newline" if not cut else "not JSON"
            self._cut(fd, keep, len(lines) + 2, why, read_only)
        self._size = keep
        return content[:header_end], lines

    def _crash_tail(self, lines: Sequence[bytes]) -> tuple[Sequence[bytes], Sequence[bytes]]:
        """Split off the crash tail (`crash_tail_start`)."""
        first_bad = crash_tail_start(lines)
        if first_bad == len(lines):
            return lines, []
        return lines[:first_bad], lines[first_bad:]

    def _load_frames(self, fd: int, content: bytes, read_only: bool) -> tuple[bytes, Sequence[bytes]]:
        frames, torn_start = split_frames(content, str(self.path))
        if not frames:
            raise SessionCorruptError(f"{self.path}: no complete header frame")
        zstandard_module()  # an ImportError naming the extra, not a corrupt-frame error
        texts = []
        for start, end in frames:
            try:
                texts.append(decompress_frame(content[start:end]))
            except Exception as error:
                raise SessionCorruptError(f"{self.path}: byte {start}: Zstandard frame does not decompress ({error})") from None
        header_text = texts[0]
        if not header_text.endswith(b"\n") or header_text.count(b"\n") != 1:
            raise SessionCorruptError(f"{self.path}: line 1: the first frame must hold exactly the header line")
        decode_header(header_text[:-1], f"{self.path}: line 1")
        body = [text for text in texts[1:] if text]
        if body and not body[-1].endswith(b"\n"):
            raise SessionCorruptError(f"{self.path}: a complete frame ends inside a line")
        if not all(text.endswith(b"\n") for text in body):  # a frame ending inside a line: joined
            body = [b"".join(body)]
        # The frames' texts as they are, not joined; the last piece is empty (the body ends with a newline).
        lines: Sequence[bytes] = split_original_lines(b"", 0, *body)[:-1]
        self._size = len(content) if torn_start is None else torn_start
        if torn_start is not None:
            salvaged = decompress_prefix(content[torn_start:])
            kept = salvaged[: salvaged.rfind(b"\n") + 1]
            kept_lines, _cut = self._crash_tail(kept.split(b"\n")[:-1])
            lines = [*lines, *kept_lines]
            self._rewrite_torn_frame(fd, torn_start, kept_lines, read_only)
        return header_text[:-1], lines

    def _rewrite_torn_frame(self, fd: int, torn_start: int, kept: Sequence[bytes], read_only: bool) -> None:
        if read_only:
            action = "ignored (read-only)"
        else:
            os.ftruncate(fd, torn_start)
            if kept:
                frame = compress_frame(b"".join(line + b"\n" for line in kept))
                write_all(fd, frame)
                self._size = torn_start + len(frame)
            if self._durability != "none":
                os.fsync(fd)
            action = f"cut; its {len(kept)} complete line(s) were written back as a new frame"
        warnings.warn(
            SessionRecoveryWarning(f"{self.path}: byte {torn_start}: torn last Zstandard frame (an unfinished append) {action}"),
            stacklevel=5,
        )

    def _cut(self, fd: int, keep: int, line: int, why: str, read_only: bool) -> None:
        cut_torn_line(fd, self.path, keep, line, f"{why}: an unfinished append", self._durability, read_only, stacklevel=6)

    def append(self, event: Event, record: str) -> None:
        """Write one line (or one frame); a failed write is cut back."""
        if self._fd is None:
            raise SessionError(f"{self.path}: store is closed")
        data = self._encode((record + "\n").encode())
        try:
            write_all(self._fd, data)
            if self._durability == "always":
                os.fsync(self._fd)
        except BaseException:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(data)
        self._dirty = self._durability == "checkpoint"

    def sync(self) -> None:
        """fsync if anything was appended since the last sync."""
        if self._dirty and self._fd is not None:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        """Close the file (releasing its lock); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
