"""The PostgreSQL store: many sessions in one database, one fenced writer per session.

A writer holds a session-level advisory lock on its session for as long as it is open; the
server releases it when the writer's connection dies, so a crashed worker's session can be taken
over at once, and a second writer gets `SessionError` before writing anything. Appends are
idempotent on `(session_id, seq)` (see `postgres_schema.WRITE_EVENTS`), which is what lets the
store retry a write after a connection error without losing or duplicating an event: it
reconnects, takes its lock again, and resends the same batch.

Durability: `"always"` writes each append in its own transaction; `"checkpoint"` holds appends
and writes them at `sync()` in one statement (one round trip); `"none"` does the same with
`synchronous_commit=off`. psycopg 3 is imported on first use (the `dshkit[postgres]` extra).

Every record carries its CRC-32C in column `crc` (`dshkit.session._log.checksums`), checked on load; a
session whose header row has none is a format version 1 log (written before schema version 2)
and stays one: read unchecked, appended to without checksums.

A writer packs its session's older events (`postgres_packs`, schema version 4) after a write
commits: each whole range of `pack_events` events becomes one row, so an open reads tens of rows
instead of tens of thousands; the newest events always stay rows.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from dshkit.session._log.event_codec import StoredRecords, decode_header
from dshkit.session.errors import SessionConflictError, SessionCorruptError, SessionError
from dshkit.session.events import MESSAGE_EVENT_TYPES, SURFACE_APPEND, USER_MESSAGE, Event
from dshkit.session._log.checksums import check_header, checksum, verified, verified_join
from dshkit.session.stores.packs import PACK_EVENTS
from dshkit.session.stores.postgres_ids import MessageIds
from dshkit.session.stores.postgres_packs import Packs, checked_packs, event_place, make_packs, packs_line_up
from dshkit.session.stores.postgres_schema import (
    CONFLICT_SQLSTATE,
    CREATE_SESSION,
    LOAD_ATTACHMENT,
    READ_EVENTS,
    SAVE_ATTACHMENT,
    TRY_LOCK,
    UNLOCK,
    WRITE_EVENTS,
    WriteRow,
    connection_settings,
    ensure_schema as ensure_schema,  # re-exported: callers import it from here
    open_session,
    write_params,
)
from dshkit.session.stores.protocol import SessionStore, check_durability

URL_SCHEMES = ("postgresql", "postgres")
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)  # seconds before each reconnect attempt


def is_postgres_url(location: object) -> bool:
    """Whether `location` is a `postgresql://` (or `postgres://`) URL."""
    return isinstance(location, str) and location.split("://", 1)[0].lower() in URL_SCHEMES and "://" in location


def redact(url: str) -> str:
    """`url` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def lock_key(session_id: str) -> int:
    """The advisory-lock key of a session: 64 bits of a hash of its id (a signed bigint)."""
    return int.from_bytes(hashlib.sha256(b"dshkit/session\x00" + session_id.encode()).digest()[:8], "big", signed=True)


def import_psycopg() -> Any:
    """psycopg 3, or an `ImportError` saying which extra to install."""
    try:
        import psycopg
    except ImportError:
        raise ImportError("PostgreSQL sessions need psycopg 3: pip install 'dshkit[postgres]'") from None
    return psycopg


def check_url(url: str) -> None:
    """`ValueError` naming the problem if `url` is no usable libpq URL."""
    if not is_postgres_url(url):
        raise ValueError(f"not a PostgreSQL URL: {url!r} (expected postgresql://user@host:port/dbname)")
    psycopg = import_psycopg()
    try:
        if "," not in urlsplit(url).netloc:  # libpq's multi-host form lists several host:port pairs
            urlsplit(url).port  # noqa: B018 - raises ValueError for a port that is no number
        psycopg.conninfo.conninfo_to_dict(url)
    except (psycopg.ProgrammingError, ValueError) as error:
        raise ValueError(f"bad PostgreSQL URL {redact(url)!r}: {error}") from None


class PostgresConnections(Protocol):
    """Where a `PostgresStore` takes its connection from, and gives it back: a caller's pool.

    The method names are those of `psycopg_pool.ConnectionPool`. `getconn()` returns an open
    psycopg 3 connection to the store's database in autocommit mode, with the session tables in
    place (a store opened on the URL creates them; see `ensure_schema`); `putconn(connection)`
    takes it back, also a closed or broken one. The store changes no setting of a connection it was
    given, and gives it back with no lock held (closing it instead when it cannot release one).
    """

    def getconn(self) -> Any: ...

    def putconn(self, connection: Any) -> None: ...


class PostgresStore(SessionStore):
    """One session log in a PostgreSQL database (`url`), selected by `session_id`.

    `connections`: take connections from a caller's pool (`PostgresConnections`) instead of
    opening one per store; `url` then only names the database in messages and `describe`.
    """

    url: str  # always set: the database this store opened (the protocol's default is None)

    waits_on_network = True  # the agent syncs it off the event loop

    def __init__(self, url: str, session_id: str | None = None, *, connections: PostgresConnections | None = None) -> None:
        check_url(url)
        if connections is not None and not (callable(getattr(connections, "getconn", None)) and callable(getattr(connections, "putconn", None))):
            raise TypeError(f"connections: expected an object with getconn() and putconn(connection), got {type(connections).__name__}")
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise ValueError(f"session_id must be a non-empty str, not {session_id!r}")
        self.url = url
        self.session_id = session_id
        self._connection: Any = None
        self._connections = connections
        self._durability = "checkpoint"
        self._locked = False
        self._held: list[WriteRow] = []
        self._sealed = True  # records carry checksums (format version 2); False for a version 1 session
        self._message_ids = MessageIds()
        self._after_write: Callable[[Any], None] | None = None  # test hook: after commit, before the ack returns
        self._during_pack: Callable[[Any], None] | None = None  # test hook: inside a pack's transaction
        self.pack_events = PACK_EVENTS  # events per pack (tests use a few)
        self._packs: Packs = ()  # (first seq, last seq) of the packs the open read
        self._packed_end = 0  # the seq the packs end before (the first row's)
        self._packing = True  # False once a range could not be packed, or in a version 1 session
        self.retries = 0  # writes resent after a connection error (observable for tests and operators)
        self.pack_failures = 0  # packing transactions that failed and were rolled back (rows kept)

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r}, session_id={self.session_id!r})"

    def describe(self, index: int) -> str:
        """Where record `index` lives: the session's header row or its event with that seq."""
        where = f"{redact(self.url)} session {self.session_id}"
        if index < 0:
            return f"{where}: header"
        return event_place(where, self._packs, index) or f"{where}: event {index}"

    # -- connections ----------------------------------------------------------------------

    def _connect(self, *, schema: bool = True) -> Any:
        """A pool's connection, or a new one set up, its schema checked unless `schema` is false (`load`'s read does)."""
        if self._connections is not None:
            return self._borrow(self._connections)
        psycopg = import_psycopg()
        try:
            connection = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as error:
            raise ConnectionError(f"cannot connect to {redact(self.url)}: {str(error).strip()}") from error
        try:
            if schema:
                ensure_schema(connection, connection_settings(self._durability))
        except BaseException:
            connection.close()
            raise
        return connection

    def _borrow(self, connections: PostgresConnections) -> Any:
        """A connection of the caller's pool, checked to be usable as this store's own."""
        psycopg = import_psycopg()
        try:
            connection = connections.getconn()
        except psycopg.OperationalError as error:
            raise ConnectionError(f"cannot connect to {redact(self.url)}: {str(error).strip()}") from error
        if not getattr(connection, "autocommit", False) or connection.closed:
            connections.putconn(connection)
            raise ValueError(f"connections.getconn() for {redact(self.url)}: expected an open connection in autocommit mode")
        return connection

    def _release(self, connection: Any) -> None:
        """Unlock if locked (best effort), then give the connection back or close it."""
        locked, self._locked = self._locked, False
        if locked and not connection.closed and self.session_id is not None:
            try:
                connection.execute(UNLOCK, (lock_key(self.session_id),))
            except Exception:
                connection.close()  # closing releases the lock; a pool must never get it held
        self._give_back(connection)

    def _give_back(self, connection: Any) -> None:
        if self._connections is None:
            connection.close()
        else:
            self._connections.putconn(connection)

    def _open_connection(self, *, lock: bool, schema: bool = True) -> Any:
        """Connect (retrying connection errors; `_connect`) and, for a writer, take the session's lock."""
        psycopg = import_psycopg()
        last: BaseException | None = None
        for delay in (0.0, *RETRY_DELAYS):
            if delay:  # `sleep(0)` still gives up the CPU: on a busy machine, a scheduler slice per open
                time.sleep(delay)
            try:
                connection = self._connect(schema=schema)
            except ConnectionError as error:
                last = error
                continue
            if lock:
                try:
                    self._take_lock(connection)
                except psycopg.OperationalError as error:
                    self._release(connection)
                    last = error
                    continue
                except BaseException:
                    self._release(connection)
                    raise
            return connection
        raise SessionError(str(last)) from last

    def _take_lock(self, connection: Any, taken: bool | None = None) -> None:
        """Take the session's lock, or note `taken`, what a `TRY_LOCK` already run answered."""
        assert self.session_id is not None
        if taken is None:
            taken = connection.execute(TRY_LOCK, (lock_key(self.session_id),)).fetchone()[0]
        self._locked = bool(taken)
        if not taken:
            raise SessionError(
                f"session {self.session_id} in {redact(self.url)} is open for writing by another "
                "connection (this or another process or machine)"
            )

    def _check_durability(self, durability: str) -> str:
        durability = check_durability(durability)
        if durability == "none" and self._connections is not None:
            raise ValueError(
                "durability 'none' sets synchronous_commit=off on the store's connection, and a store given "
                "connections= changes none of theirs: configure it in your pool, and use 'checkpoint'"
            )
        return durability

    def _need_session_id(self, verb: str) -> str:
        if self.session_id is None:
            raise ValueError(f"to {verb} a PostgreSQL session, pass session_id=")
        return self.session_id

    # -- the store protocol ---------------------------------------------------------------

    def create(self, header: str, durability: str) -> None:
        """Add the session's header row and lock it; `FileExistsError` if the id is taken."""
        self._durability = self._check_durability(durability)
        fields = decode_header(header, "new session header")
        if self.session_id is None:
            self.session_id = fields["id"]
        elif fields["id"] != self.session_id:
            raise ValueError(f"header id {fields['id']} is not the store's session_id {self.session_id}")
        connection = self._open_connection(lock=False)
        try:
            try:
                self._take_lock(connection)
            except SessionError:  # its writer (or another `create` of this id) holds it
                raise FileExistsError(
                    f"session {self.session_id} already exists in {redact(self.url)} or another writer is creating it"
                ) from None
            created = connection.execute(
                CREATE_SESSION, (self.session_id, header, checksum(header), fields["created_at"], fields.get("parent_id"))
            ).fetchone()
        except BaseException:
            self._release(connection)
            raise
        if created is None:
            self._release(connection)
            raise FileExistsError(f"session {self.session_id} already exists in {redact(self.url)}")
        self._connection, self._sealed = connection, True

    def load(self, durability: str, *, read_only: bool) -> tuple[str, StoredRecords]:
        """The header and every event record in seq order, checksums checked (locking the session unless read-only)."""
        session_id = self._need_session_id("open")
        self._durability = self._check_durability(durability)
        connection = self._open_connection(lock=False, schema=False)  # schema and lock: in the read's round trip
        try:
            self._locked = not read_only  # until the read answers: one failing after its lock must unlock
            settings = None if self._connections is not None else connection_settings(self._durability)
            taken, row = open_session(connection, session_id, message_ids=not read_only, lock=None if read_only else lock_key(session_id), settings=settings)
            if not read_only:
                self._take_lock(connection, taken)
            if row is None:
                raise FileNotFoundError(f"no session {session_id} in {redact(self.url)}")
            header, header_crc, bodies, crcs, message_ids, self._packs, count, first_row = row
            self._sealed = header_crc is not None
            if self._sealed:
                verified([(header, header_crc)], lambda _: self.describe(-1))
            check_header(header, self._sealed, self.describe(-1))
            if self._sealed:
                records = self._checked_records(connection, session_id, bodies, crcs, (count, first_row))
                if self._packs:  # a writer keeps the size the session was packed at
                    self._packed_end, self.pack_events = self._packs[-1][1] + 1, self._packs[0][1] - self._packs[0][0] + 1
            else:
                rows = connection.execute(READ_EVENTS, (session_id,)).fetchall()
                records = [self._unchecked(seq, body, crc) for seq, body, crc in rows]
            if not read_only:
                self._message_ids = message_ids or MessageIds()
            self._packing = self._sealed
        except BaseException:
            self._release(connection)
            raise
        self._connection = connection
        return header, records

    def _checked_records(self, connection: Any, session_id: str, bodies: list[Any], crcs: list[str],
                         rows: tuple[int, int | None]) -> StoredRecords:
        """The session's records as `READ_SESSION` joined them (packs, then rows), paired with their
        checksums in one native call (`verified_join`; each compared where the decode first reads
        it, `describe` naming a failing one); if they do not pair up or line up (`packs_line_up`),
        checked pack by pack (`checked_packs`) and row by row (`verified`), naming the place."""
        records = verified_join(bodies, crcs)
        if records is not None and packs_line_up(self._packs, *rows, len(records)):
            return records
        checked, self._packs = checked_packs(connection, session_id, f"{redact(self.url)} session {session_id}", self.describe)
        return checked

    def _unchecked(self, seq: int, body: str, crc: int | None) -> str:
        """The record of a version 1 session, which must carry no checksum (no mixed sessions)."""
        if crc is not None:
            raise SessionCorruptError(f"{self.describe(seq)}: a checksum on a record of a version 1 session")
        return body

    def append(self, event: Event, record: str) -> None:
        """Write one event ("always") or hold it for the next `sync()`."""
        if self._connection is None:
            raise SessionError(f"{self.describe(-1)}: store is closed")
        crc = checksum(record) if self._sealed else None
        row = (event.seq, event.type, event.time, self._new_message_id(event), record, crc)
        if self._durability == "always":
            self._write([row])
        else:
            self._held.append(row)

    def _new_message_id(self, event: Event) -> str | None:
        """The id a message event brings into the session (unique per session), else None.

        A same-id replacement (a rewrite) reuses its message's id by contract: not indexed.
        """
        if event.type not in MESSAGE_EVENT_TYPES:
            return None
        message_id: str = (event.data if event.type == USER_MESSAGE else event.data["message"]).id
        if event.surface_op != SURFACE_APPEND and message_id in self._message_ids:
            return None
        self._message_ids.add(message_id)
        return message_id

    def sync(self) -> None:
        """Write every held append in one statement (one round trip, one transaction)."""
        if self._held:
            self._write(self._held)
            self._held = []

    def _write(self, rows: list[WriteRow]) -> None:
        psycopg = import_psycopg()
        session_id = self._need_session_id("write")
        params = write_params(session_id, rows)
        for attempt in range(len(RETRY_DELAYS) + 1):
            connection = self._connection
            try:
                if connection is None or connection.closed or connection.broken:
                    # Reconnecting means taking the lock again: if another writer took over
                    # meanwhile, this fails before anything is written.
                    fresh = self._open_connection(lock=True)
                    if connection is not None:
                        self._give_back(connection)  # dead: the server dropped its lock with it
                    connection = self._connection = fresh
                connection.execute(WRITE_EVENTS, params).fetchone()
                if self._after_write is not None:
                    self._after_write(connection)
                break
            except psycopg.errors.UniqueViolation as error:
                raise SessionConflictError(
                    f"{self.describe(rows[0][0])}: a message id of this batch is already in the session "
                    f"at another seq ({str(error).strip()})"
                ) from None
            except psycopg.Error as error:
                if error.sqlstate == CONFLICT_SQLSTATE:
                    raise SessionConflictError(
                        f"{redact(self.url)}: {error.diag.message_primary}: another writer appended to this session"
                    ) from None
                if not isinstance(error, psycopg.OperationalError) or (connection is not None and not connection.closed and not connection.broken):
                    raise SessionError(f"{self.describe(rows[0][0])}: write failed: {str(error).strip()}") from error
                self._locked = False  # the server released it with the connection
                self.retries += 1
                if attempt == len(RETRY_DELAYS):
                    raise SessionError(f"{self.describe(rows[0][0])}: write failed after {attempt + 1} attempts: {error}") from error
        self._pack(rows[-1][0] + 1)

    def _pack(self, next_seq: int) -> None:
        """Pack the ranges due now that `next_seq` events are written (`postgres_packs.make_packs`).

        The write is committed: a failure here leaves the rows as they were (each pack is one
        transaction), and the next write tries again; a range that is not exactly its events
        stops packing for this store.
        """
        if not self._packing or self._connection is None:
            return
        psycopg = import_psycopg()
        try:
            self._packed_end, self._packing = make_packs(
                self._connection, self._need_session_id("pack"), self._packed_end, next_seq, self.pack_events, self._during_pack
            )
        except psycopg.Error:
            self.pack_failures += 1

    # -- attachments: the table `dshkit_attachments`, shared by the database's sessions ----

    def attachment_backend(self) -> PostgresStore:
        """Attachment bytes live in this database, table `dshkit_attachments` (digest, data)."""
        return self

    def attachment_location(self, digest: str) -> str:
        return f"{redact(self.url)}: dshkit_attachments row {digest}"

    def load_attachment(self, digest: str) -> bytes | None:
        if self._connection is None:
            raise SessionError(f"{self.describe(-1)}: store is closed")
        row = self._connection.execute(LOAD_ATTACHMENT, (digest,)).fetchone()
        return None if row is None else bytes(row[0])

    def save_attachment(self, digest: str, data: bytes) -> None:
        # Committed at once (autocommit), so before any event that refers to it is written.
        if self._connection is None:
            raise SessionError(f"{self.describe(-1)}: store is closed")
        self._connection.execute(SAVE_ATTACHMENT, (digest, data))

    def close(self) -> None:
        """Release the lock and the connection (back to `connections` if given); idempotent (held
        appends are dropped: sync first)."""
        connection, self._connection = self._connection, None
        self._held = []
        if connection is not None:
            self._release(connection)
