"""The SQLite store: one database per log, in WAL mode.

Tables `dshkit_session` (one row: the header record and its checksum) and `dshkit_events` (`seq`
primary key, `type`, `time`, `body`: the same JSON record the JSON Lines store writes, `crc`: its
checksum, `dshkit.session._log.checksums`; a version 1 database has no `crc` columns), and, once
something is attached, `dshkit_attachments` (`digest`, `data`: the bytes attachment blocks refer to); once
the log is long enough, `dshkit_packs`: every sealed range of events moved into one row
(`dshkit.session.stores.sqlite_packs`, docs/decisions/session-packs.md). Every append is its own
transaction, so a crash never leaves half an event, and so is each pack. Durability maps onto SQLite's own:
`"always"` is `synchronous=FULL` (the WAL is fsynced at every commit), `"checkpoint"` is
`synchronous=NORMAL` plus an fsync of the WAL file at `sync()`, `"none"` is `synchronous=OFF`.

One writer per log, as with JSON Lines: a writer holds an exclusive `flock` on the side file
`<real path>-lock` (not on the database file: closing any descriptor of a file drops the
process's POSIX locks on it, SQLite's own included), taken before anything is written. The
side file is named after the file's real path, with symbolic links resolved, as SQLite names
its `-wal` and `-shm`: every name of one file meets the same lock. A database with more than
one hard link is refused for writing: SQLite finds the write-ahead log by name, so each name
would have a WAL of its own and appends through one would be lost to the other
(docs/decisions/session-sqlite-writer-lock.md). `create` builds the database aside and links
it into place, so a crash inside `create` leaves no half-made log.
"""

from __future__ import annotations

import errno
import glob
import os
import secrets
import sqlite3
from pathlib import Path
from typing import Any

from dshkit.session.errors import SessionCorruptError, SessionError
from dshkit.session._log.checksums import check_header, checksum, verified
from dshkit.session._log.event_codec import StoredRecords
from dshkit.session.events import Event
from dshkit.session.stores.packs import PACK_EVENTS, packs_due
from dshkit.session.stores.protocol import SessionStore, check_durability
from dshkit.session.stores.sqlite_packs import (
    NO_PACKS, PackLayout, check_packs_version, checked_pack_records, joined_records, pack_layout, pack_range,
    row_describer,
)
from dshkit.session.stores.sqlite_read import LOG_FACTS, SealedLog, read_sealed_log

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock, single writer by convention
    fcntl = None  # type: ignore[assignment]

_SCHEMA = (
    "CREATE TABLE dshkit_session (header TEXT NOT NULL, crc INTEGER NOT NULL)",
    "CREATE TABLE dshkit_events ("
    "seq INTEGER PRIMARY KEY, type TEXT NOT NULL, time INTEGER NOT NULL, body TEXT NOT NULL, crc INTEGER NOT NULL)",
)
_EVENT_ROWS = "SELECT CAST(body AS BLOB), crc FROM dshkit_events ORDER BY seq"
_ATTACHMENTS_TABLE = "CREATE TABLE IF NOT EXISTS dshkit_attachments (digest TEXT PRIMARY KEY, data BLOB NOT NULL)"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_SYNCHRONOUS = {"always": "FULL", "checkpoint": "NORMAL", "none": "OFF"}


class SqliteStore(SessionStore):
    """A session log in a SQLite database (WAL)."""

    path: Path  # a file store always has one (the protocol's default is None)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._durability = "checkpoint"
        self._dirty = False
        self._sealed = True  # rows carry checksums (format version 2); False for a version 1 database
        self._lock_fd: int | None = None
        self._broken: str | None = None
        # Events per pack this store makes; a log that has packs keeps the size of its first.
        self.pack_events = PACK_EVENTS
        self._layout: PackLayout = NO_PACKS  # the packs read or made
        self._packing = True  # False once a range could not be packed: the rest stays rows

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"

    def describe(self, index: int) -> str:
        """Where record `index` lives: its pack, or its row of `dshkit_events` (-1: the header row)."""
        if index < 0:
            return f"{self.path}: dshkit_session header"
        if index < self._layout.events:
            return self._layout.place(str(self.path), index)
        return f"{self.path}: row {index + 1} of dshkit_events"

    def _connect(self, mode: str) -> sqlite3.Connection:
        uri = f"{self.path.absolute().as_uri()}?mode={mode}"
        return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=10.0)

    def _configure(self, db: sqlite3.Connection, durability: str) -> None:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")

    def _lock(self) -> None:
        """Take the writer lock (`<real path>-lock`); `SessionError` if another writer holds it."""
        if fcntl is None:
            return
        fd = os.open(f"{os.path.realpath(self.path)}-lock", os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SessionError(f"{self.path} is already open for writing (by this or another process)") from None
        self._lock_fd = fd

    def _check_single_name(self) -> None:
        """`SessionError` if the database file has other hard links (SQLite keeps a WAL per name).

        A `create` killed between its link and the removal of its side name leaves that name
        linked to the log: it is removed here (under the writer lock, so no `create` of this
        path is running), as no one else ever opens it.
        """
        real = Path(os.path.realpath(self.path))
        own = os.stat(real)
        if own.st_nlink > 1:
            for side in real.parent.glob(f".{glob.escape(real.name)}.*.creating"):
                try:
                    found = os.stat(side)
                except FileNotFoundError:
                    continue
                if (found.st_dev, found.st_ino) == (own.st_dev, own.st_ino):
                    side.unlink(missing_ok=True)
        links = os.stat(real).st_nlink
        if links > 1:
            raise SessionError(
                f"{self.path} has {links} hard links: SQLite finds a database's write-ahead log by the "
                "name it is opened with, so writers through two names would each keep their own and "
                "lose each other's appends; open it for writing through one name only (remove the "
                "other links, or copy the file)"
            )

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)

    def create(self, header: str, durability: str) -> None:
        """Create the database with its header row; `FileExistsError` if the path exists.

        The database is built and closed under a side name, then hard-linked into place (`link`
        never replaces a file): a crash leaves no log, or a complete one.
        """
        self._durability = check_durability(durability)
        if self.path.exists():
            raise FileExistsError(errno.EEXIST, "a session log already exists", str(self.path))
        aside = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.creating")
        try:
            # Only a writer holds the lock of a path that does not exist yet: another `create`
            # (its log about to appear), or the writer of a log removed from under it.
            try:
                self._lock()
            except SessionError:
                raise FileExistsError(
                    errno.EEXIST, "a session log already exists or another writer is creating it", str(self.path)
                ) from None
            os.close(os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o644))
            build = sqlite3.connect(aside, isolation_level=None)
            try:
                self._configure(build, durability)
                build.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA:
                    build.execute(statement)
                build.execute("INSERT INTO dshkit_session (header, crc) VALUES (?, ?)", (header, checksum(header)))
                build.execute("COMMIT")
            finally:
                build.close()  # the last connection checkpoints the WAL into the file and removes it
            if durability != "none":
                fd = os.open(aside, os.O_RDONLY | _CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            os.link(aside, self.path)
        except BaseException:
            self._unlock()
            raise
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{aside}{suffix}").unlink(missing_ok=True)
        try:
            if durability != "none":
                fd = os.open(self.path.parent, os.O_RDONLY | _CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            db = self._connect("rw")
            self._configure(db, durability)
        except BaseException:
            self._unlock()
            raise
        self._db, self._sealed = db, True

    def load(self, durability: str, *, read_only: bool) -> tuple[str | bytes, StoredRecords]:
        """The header and every event record in seq order, checksums checked; `SessionCorruptError` if not a dshkit log.

        A writer takes the writer lock before anything else (`SessionError` if it is held).
        """
        self._durability = check_durability(durability)
        if not self.path.exists():
            raise FileNotFoundError(f"no session log at {self.path}")
        if not read_only:
            self._lock()
        db = None
        try:
            if not read_only:
                self._check_single_name()
            db = self._connect("ro" if read_only else "rw")
            if not read_only:
                self._configure(db, durability)
            db.execute("BEGIN")  # one snapshot, whatever a writer packs meanwhile
            try:
                header, records = self._read(db)
            finally:
                if db.in_transaction:
                    db.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            if db is not None:
                db.close()
            self._unlock()
            raise SessionCorruptError(f"{self.path}: not a dshkit session database ({error})") from None
        except BaseException:
            if db is not None:
                db.close()
            self._unlock()
            raise
        self._db = db
        return header, records

    def _read(self, db: sqlite3.Connection) -> tuple[str, StoredRecords]:
        """The header and the records, read in the open's transaction (`sqlite_read`): a version 1
        database's rows as they are, a sealed log's checked (`_checked_records`)."""
        has_crc, version, has_packs = db.execute(LOG_FACTS).fetchone()
        self._sealed = bool(has_crc)
        if not self._sealed:
            header = self._checked_header(db.execute("SELECT header, NULL FROM dshkit_session").fetchall())
            return header, [row[0] for row in db.execute("SELECT CAST(body AS BLOB) FROM dshkit_events ORDER BY seq")]
        check_packs_version(version, str(self.path))
        log = read_sealed_log(db, bool(has_packs))
        return self._checked_header(log.headers), self._checked_records(db, log)

    def _checked_header(self, headers: list[Any]) -> str:
        """The one header row's record, its checksum checked in a sealed log (`check_header`)."""
        if len(headers) != 1 or not isinstance(headers[0][0], str):
            raise SessionCorruptError(f"{self.path}: dshkit_session must hold exactly one header row")
        header: str = headers[0][0]
        if self._sealed:
            verified([tuple(headers[0])], lambda _: self.describe(-1))
        check_header(header, self._sealed, self.describe(-1))
        return header

    def _checked_records(self, db: sqlite3.Connection, log: SealedLog) -> StoredRecords:
        """Every event record in seq order, the packs' then the rows', each checked against its
        checksum; `SessionCorruptError` naming the first pack event or row that fails.

        The packs and the rows as `read_sealed_log` read them (the rows as two joined values, so
        no Python object is made per row) are paired with their checksums in one native call
        (`verified_join`), each compared where the decode first reads its record (`describe`
        names a failing one: its pack and event, or its row). If the pairing fails (a stored
        checksum is not an integer, a record holds a newline, a body is NULL, a pack holds a wrong
        number of records), the packs are checked one by one and the rows row by row
        (`verified`), still in the open's transaction, which names the place.
        """
        where = str(self.path)
        layout = self._layout = pack_layout(log.packs, where)
        records = joined_records(log.packs, log.bodies, log.crcs)
        if records is None or len(records) != layout.events + log.rows:
            records = checked_pack_records(log.packs, layout, where)
            records += verified(db.execute(_EVENT_ROWS), row_describer(layout, self.describe))
        if layout.packs:
            self.pack_events = layout.size
        return records

    def append(self, event: Event, record: str) -> None:
        """Insert one event in a transaction of its own (durable at commit in "always" mode)."""
        if self._broken is not None:
            raise SessionError(f"{self.path}: no further appends: {self._broken}")
        if self._db is None:
            raise SessionError(f"{self.path}: store is closed")
        try:
            if self._sealed:
                self._db.execute(
                    "INSERT INTO dshkit_events (seq, type, time, body, crc) VALUES (?, ?, ?, ?, ?)",
                    (event.seq, event.type, event.time, record, checksum(record)),
                )
            else:
                self._db.execute(
                    "INSERT INTO dshkit_events (seq, type, time, body) VALUES (?, ?, ?, ?)",
                    (event.seq, event.type, event.time, record),
                )
        except sqlite3.IntegrityError:
            raise SessionError(f"{self.path}: event {event.seq} already exists: another writer appended to this log") from None
        self._dirty = self._durability == "checkpoint"
        if self._sealed and self._packing:
            self._pack(self._db, event.seq + 1)

    def _pack(self, db: sqlite3.Connection, next_seq: int) -> None:
        """Make the packs due once events up to `next_seq` are committed (`packs_due`), each in its
        own transaction. The append is already committed, so a range that cannot be packed, or
        a pack that fails, is left as rows and packing stops for this writer (the next packs)."""
        size = self.pack_events
        for pack in packs_due(self._layout.packs, next_seq, size):
            try:
                packed = pack_range(db, pack * size, (pack + 1) * size - 1)
            except sqlite3.Error:
                packed = False
            if not packed:
                self._packing = False
                return
            self._layout = PackLayout(size, pack + 1)

    def sync(self) -> None:
        """Make every committed event durable by fsyncing the WAL file."""
        if not self._dirty or self._db is None:
            return
        # synchronous=NORMAL leaves committed WAL frames in the OS cache; an fsync of the WAL
        # file makes them durable, which is what synchronous=FULL does at every commit.
        try:
            fd = os.open(f"{self.path}-wal", os.O_RDONLY)
        except FileNotFoundError:
            fd = None  # checkpointed and removed: the database file itself was synced
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as error:
                # After a failed fsync the kernel may have dropped the pages: nothing later can be trusted.
                self._broken = f"fsync failed ({error!r})"
                raise
            finally:
                os.close(fd)
        self._dirty = False

    # -- attachments: the table `dshkit_attachments` (made by the first attach) -------------

    def attachment_backend(self) -> SqliteStore:
        """Attachment bytes live in this database, table `dshkit_attachments` (digest, data)."""
        return self

    def attachment_location(self, digest: str) -> str:
        return f"{self.path}: dshkit_attachments row {digest}"

    def load_attachment(self, digest: str) -> bytes | None:
        if self._db is None:
            raise SessionError(f"{self.path}: store is closed")
        try:
            row = self._db.execute("SELECT data FROM dshkit_attachments WHERE digest = ?", (digest,)).fetchone()
        except sqlite3.OperationalError:
            return None  # no table: nothing was ever attached
        return None if row is None else bytes(row[0])

    def save_attachment(self, digest: str, data: bytes) -> None:
        # Committed before the event that refers to it, in the same WAL: durable with it.
        if self._db is None:
            raise SessionError(f"{self.path}: store is closed")
        self._db.execute(_ATTACHMENTS_TABLE)
        self._db.execute(  # damaged bytes under this digest are replaced, the right ones left alone
            "INSERT INTO dshkit_attachments (digest, data) VALUES (?, ?) "
            "ON CONFLICT (digest) DO UPDATE SET data = excluded.data WHERE data IS NOT excluded.data",
            (digest, data),
        )
        self._dirty = self._durability == "checkpoint"

    def close(self) -> None:
        """Close the connection; idempotent."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
        self._unlock()
