"""The JSON Lines store: the embedded default.

Line 1 is the header, then one event per line, each written with a single `write` on a file
opened with `O_APPEND`; since format version 2 every line ends with its record's checksum
(`dshkit.session._log.checksums`). A writer holds an exclusive `flock` on the file, so two processes (or
two sessions in one process) never interleave appends. `create` builds the header in a side file
and links it into place, so a crash inside `create` leaves either no log or a complete one.

On open, a torn last line (no newline: an append that never completed) is cut off with a
`SessionRecoveryWarning`; any other bad line, a newline-terminated last one included, is a
`SessionCorruptError` naming the file and line. A failed `fsync` poisons the store: every later
append raises `SessionError` until the log is opened again.
"""

from __future__ import annotations

import errno
import os
import secrets
import threading
import warnings
from pathlib import Path

from dshkit import from_json
from dshkit._core import Records, split_records
from dshkit.session._log.event_codec import decode_header
from dshkit.session._log.checksums import (
    SUFFIX_LENGTH,
    VOID_SUFFIX,
    check_header,
    seal_line,
    unseal_body,
    unseal_line,
    void_suffix_at,
)
from dshkit.session.errors import SessionCorruptError, SessionError, SessionRecoveryWarning
from dshkit.session.events import Event
from dshkit.session.stores.attachment_folder import FolderAttachments
from dshkit.session.stores.jsonl_read import LogBytes, read_log
from dshkit.session.stores.protocol import SessionStore, check_durability

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock, single writer by convention
    fcntl = None  # type: ignore[assignment]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`."""
    written = os.write(fd, data)
    while written < len(data):  # a short write on a regular file: finish it
        written += os.write(fd, data[written:])


def _fsync_directory(path: Path) -> None:
    fd = os.open(path.parent, os.O_RDONLY | _CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cut_torn_line(
    fd: int, path: Path, keep: int, line: int, what: str, durability: str, read_only: bool, *, stacklevel: int
) -> None:
    """Cut a torn last line off at byte `keep` (left in place when `read_only`), and say so."""
    if read_only:
        action = "ignored (read-only; it is cut when the log is opened for writing)"
    else:
        os.ftruncate(fd, keep)
        if durability != "none":
            os.fsync(fd)
        action = "cut off; every line before it is intact"
    warnings.warn(
        SessionRecoveryWarning(f"{path}: line {line}: torn last line ({what}) {action}"),
        stacklevel=stacklevel,
    )


class JsonlStore(SessionStore):
    """A session log in a JSON Lines file."""

    path: Path  # a file store always has one (the protocol's default is None)
    syncs_beside_appends = True
    """`sync()` may run on another thread while appends go on (the agent fsyncs off its loop):
    it covers every line written before it was called, and `close` waits for it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._durability = "checkpoint"
        self._size = 0  # bytes of complete lines: where a failed append is cut back to
        self._dirty = False
        self._sync_lock = threading.Lock()  # a sync on a worker thread and `close` never overlap
        self._broken: str | None = None
        self._sealed = True  # records carry checksums (format version 2); False for a version 1 log

    def __repr__(self) -> str:
        return f"JsonlStore({str(self.path)!r})"

    def describe(self, index: int) -> str:
        """Where record `index` lives: its line number (the header is line 1)."""
        return f"{self.path}: line {index + 2}"

    def _lock(self, fd: int) -> None:
        if fcntl is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionError(f"{self.path} is already open for writing (by this or another process)") from None

    def create(self, header: str, durability: str) -> None:
        """Create the file with its header line and lock it; `FileExistsError` if it exists.

        The header is written and synced in a side file that is then hard-linked into place
        (`link` never replaces an existing file), so the log appears whole or not at all.
        """
        self._durability = check_durability(durability)
        if self.path.exists():
            raise FileExistsError(errno.EEXIST, "a session log already exists", str(self.path))
        aside = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.creating")
        fd = os.open(aside, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | _CLOEXEC, 0o644)
        try:
            self._lock(fd)  # the lock belongs to the file, so it holds once the file is linked
            data = seal_line(header)
            write_all(fd, data)
            if durability != "none":
                os.fsync(fd)
            os.link(aside, self.path)
        except BaseException:
            os.close(fd)
            raise
        finally:
            aside.unlink(missing_ok=True)
        if durability != "none":
            _fsync_directory(self.path)
        self._fd, self._size, self._sealed = fd, len(data), True

    def load(self, durability: str, *, read_only: bool) -> tuple[bytes, Records]:
        """Lock the file and read it: the header and every complete event line (a torn last line is cut)."""
        self._durability = check_durability(durability)
        fd = os.open(self.path, (os.O_RDONLY if read_only else os.O_RDWR | os.O_APPEND) | _CLOEXEC)
        try:
            if not read_only:
                self._lock(fd)
            header, records, torn = self._split(read_log(fd))
            if torn is not None:
                self._cut(fd, torn, len(records), read_only)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return header, records

    def _header(self, line: bytes) -> bytes:
        """The header record of line 1, its checksum checked; sets whether records are sealed."""
        where = f"{self.path}: line 1"
        self._sealed = line[-SUFFIX_LENGTH:-10] == b',"crc":"'
        record = unseal_line(line) if self._sealed else line
        if record is None:
            decode_header(line, where)  # a clear "not a dshkit log" for anything else
            raise SessionCorruptError(f"{where}: checksum mismatch: the header changed after it was written")
        check_header(record, self._sealed, where)
        return record

    def _split(self, log: LogBytes) -> tuple[bytes, Records, tuple[int, str] | None]:
        """Header, event records, and (size to keep, why) when the last line is torn or void.

        Nothing is decided from a line that fails its checksum except at the very end: a last
        line without its newline is an unfinished append, unless it is a whole record followed
        by one stray byte (a damaged newline), which no unfinished append can leave.
        """
        content, keep, tail = log.content, log.keep, log.tail
        if not content:
            raise SessionCorruptError(f"{self.path}: line 1: empty file, not a dshkit session log")
        header_end = content.find(b"\n")
        if header_end < 0:
            raise SessionCorruptError(f"{self.path}: line 1: not a dshkit session log (no complete header line)")
        # Only a dshkit log is ever repaired: check the header before touching anything.
        header = self._header(content[:header_end])
        body = header_end + 1
        torn: tuple[int, str] | None = None  # what follows the last newline is a torn tail
        if tail:
            if self._sealed and unseal_line(tail[:-1]) is not None:
                line = content[body:keep].count(b"\n") + 2
                raise SessionCorruptError(
                    f"{self.path}: line {line}: a complete record followed by "
                    f"{tail[-1:]!r} where its newline belongs: damage, not an unfinished append"
                )
            torn = (keep, "no newline")
        elif keep > body:
            last_start, last = log.last_start, log.last_line  # not through a mapping: a writer may cut it
            if last.endswith(VOID_SUFFIX):
                keep = last_start
                torn = (keep, "void: its write failed and could not be cut back")
            elif not self._sealed:
                try:
                    from_json(last)
                except Exception:
                    keep = last_start
                    torn = (keep, "not JSON")
        if self._sealed:
            records = unseal_body(content, body, keep, self.describe)
        else:
            unchecked = split_records(content, body, keep, False)[0]
            assert unchecked is not None  # with no checksums to check, every line is a record
            records = unchecked
        self._size = keep
        return header, records, torn

    def _cut(self, fd: int, torn: tuple[int, str], line_count: int, read_only: bool) -> None:
        keep, why = torn
        what = why if why.startswith("void") else f"{why}: an unfinished append"
        cut_torn_line(fd, self.path, keep, line_count + 2, what, self._durability, read_only, stacklevel=5)

    def append(self, event: Event, record: str) -> None:
        """Write one event line with one `write` (fsynced in "always" mode); a failed write is cut back.

        A failed fsync also poisons the store (the kernel may have dropped the written pages, so
        nothing later can be trusted): every later append raises `SessionError`.
        """
        fd = self._writable()
        data = seal_line(record) if self._sealed else (record + "\n").encode()
        try:
            write_all(fd, data)
        except BaseException as error:
            self._undo_partial_write(fd, error, len(data))
            raise
        if self._durability == "always":
            try:
                os.fsync(fd)
            except BaseException as error:
                if isinstance(error, OSError):
                    self._broken = f"fsync failed ({error!r})"
                self._undo_partial_write(fd, error, len(data))
                raise
        self._size += len(data)
        self._dirty = self._durability == "checkpoint"

    def _undo_partial_write(self, fd: int, error: BaseException, length: int) -> None:
        """Cut the file back to its last complete line; failing that, void the line in place."""
        try:
            os.ftruncate(fd, self._size)
            return
        except OSError:
            pass
        self._broken = f"an append failed ({error!r}) and could not be cut back"
        try:
            # pwrite ignores the offset on an O_APPEND descriptor (Linux): use a plain one.
            plain = os.open(self.path, os.O_WRONLY | _CLOEXEC)
            try:
                os.pwrite(plain, VOID_SUFFIX, self._size + void_suffix_at(length))
            finally:
                os.close(plain)
        except OSError:
            pass  # nothing more can be done: the store refuses appends, the next open reports the line

    def _writable(self) -> int:
        if self._broken is not None:
            raise SessionError(f"{self.path}: no further appends: {self._broken}")
        if self._fd is None:
            raise SessionError(f"{self.path}: store is closed")
        return self._fd

    @property
    def pending_sync(self) -> bool:
        """Whether lines were appended since the last sync (a `sync()` now would fsync)."""
        return self._dirty and self._fd is not None

    def sync(self) -> None:
        """fsync the file if anything was appended since the last sync.

        Safe on another thread while appends go on: the flag is cleared before the fsync, so a
        line written meanwhile either is in this fsync or leaves the flag set for the next one.
        """
        with self._sync_lock:
            fd = self._fd
            if not self._dirty or fd is None:
                return
            self._dirty = False
            try:
                os.fsync(fd)
            except OSError as error:
                # After a failed fsync the kernel may have dropped the pages: nothing later can be trusted.
                self._broken = f"fsync failed ({error!r})"
                self._dirty = True
                raise

    def close(self) -> None:
        """Close the file (releasing its lock); idempotent. Waits for a sync under way on another thread."""
        with self._sync_lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def attachment_backend(self) -> FolderAttachments:
        """Attachment bytes live in the folder `attachments/` beside the log (shared by its directory's logs)."""
        return FolderAttachments(self.path.parent / "attachments")

    @property
    def size(self) -> int:
        """Bytes of the file that hold complete lines."""
        return self._size
