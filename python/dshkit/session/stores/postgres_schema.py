"""The PostgreSQL tables of the session store, their version, and the statements that use them.

`dshkit_events` is append-only: the store never updates an event, nor deletes one but to move
it into a pack (below), and triggers refuse anything else from anyone. One statement (`WRITE_EVENTS`) appends a batch in
one round trip and one transaction; it is idempotent on `(session_id, seq)`: a row already
holding the identical record counts as written, a different one aborts the whole batch with
SQLSTATE `DK001` (the store's `SessionConflictError`).

Since schema version 2 every record carries its checksum (`dshkit.session._log.checksums`): column
`crc` beside `header` and beside `body`. Migration 1 -> 2 only adds the columns (no rewrite of
the table): rows written before it keep `crc` NULL, and a session whose header row has a NULL
`crc` is a format version 1 log, read unchecked and appended to without checksums (no mixed
sessions), as a version 1 SQLite database is. Schema version 3 adds `dshkit_attachments`.

Schema version 4 adds `dshkit_packs` (`postgres_packs`): a writer moves each whole range of a
session's events into one pack row and deletes the rows in the same transaction, the only
DELETE the events' triggers let through (every deleted row must lie in a pack of its session).
A dshkit before version 4 refuses the database ("upgrade dshkit"): it would see a seq gap.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

from dshkit.session.errors import SessionError
from dshkit.session.stores.postgres_ids import MessageIds, text_array_oid

SCHEMA_VERSION = 4
CONFLICT_SQLSTATE = "DK001"
APPEND_ONLY_SQLSTATE = "DK002"
SCHEMA_LOCK_KEY = 0x64736B5F736368  # "dsk_sch": serialises schema creation across processes

# Statements that bring a database at version N (the key) to N + 1. Version 0: no tables.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    0: (
        "CREATE TABLE dshkit_schema (version integer NOT NULL)",
        "CREATE TABLE dshkit_sessions ("
        " session_id text PRIMARY KEY,"
        " header text NOT NULL,"
        " created_at bigint NOT NULL,"
        " parent_id text)",
        "CREATE TABLE dshkit_events ("
        " session_id text NOT NULL REFERENCES dshkit_sessions (session_id),"
        " seq bigint NOT NULL CHECK (seq >= 0),"
        " type text NOT NULL,"
        " time bigint NOT NULL,"
        " message_id text,"
        " body text NOT NULL,"
        " PRIMARY KEY (session_id, seq))",
        "CREATE UNIQUE INDEX dshkit_events_message_id ON dshkit_events (session_id, message_id)"
        " WHERE message_id IS NOT NULL",
        "CREATE FUNCTION dshkit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" RAISE EXCEPTION 'dshkit_events is append-only: % refused', TG_OP USING ERRCODE = '{APPEND_ONLY_SQLSTATE}';"
        " END $$",
        "CREATE TRIGGER dshkit_events_append_only BEFORE UPDATE OR DELETE ON dshkit_events"
        " FOR EACH ROW EXECUTE FUNCTION dshkit_refuse_change()",
        "CREATE FUNCTION dshkit_check_write(session text, expected bigint, written bigint, first_bad bigint)"
        " RETURNS bigint LANGUAGE plpgsql AS $$ BEGIN"
        " IF written < expected THEN"
        "  RAISE EXCEPTION 'session %: event % is already stored with a different record', session, first_bad"
        f"   USING ERRCODE = '{CONFLICT_SQLSTATE}';"
        " END IF; RETURN written; END $$",
        "INSERT INTO dshkit_schema (version) VALUES (0)",
    ),
    # Nullable and without a default, so adding them touches no row: NULL marks a version 1 record.
    1: (
        "ALTER TABLE dshkit_sessions ADD COLUMN crc bigint",
        "ALTER TABLE dshkit_events ADD COLUMN crc bigint",
    ),
    # The bytes attachment blocks refer to, by SHA-256 digest, shared by the database's sessions.
    2: ("CREATE TABLE dshkit_attachments (digest text PRIMARY KEY, data bytea NOT NULL)",),
    # Packs (`postgres_packs`): a range's bodies joined by newlines (UTF-8 bytes, stored out of
    # line uncompressed: read whole at every open, never searched), their checksums as the read
    # joins them, and the message ids the range brought (for a writer's open).
    3: (
        "CREATE TABLE dshkit_packs ("
        " session_id text NOT NULL REFERENCES dshkit_sessions (session_id),"
        " first_seq bigint NOT NULL CHECK (first_seq >= 0),"
        " last_seq bigint NOT NULL CHECK (last_seq >= first_seq),"
        " bodies bytea NOT NULL,"
        " crcs text NOT NULL,"
        " message_ids text[] NOT NULL,"
        " PRIMARY KEY (session_id, first_seq))",
        "ALTER TABLE dshkit_packs ALTER COLUMN bodies SET STORAGE EXTERNAL",
        "CREATE OR REPLACE FUNCTION dshkit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        f" RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = '{APPEND_ONLY_SQLSTATE}';"
        " END $$",
        "CREATE TRIGGER dshkit_packs_append_only BEFORE UPDATE OR DELETE ON dshkit_packs"
        " FOR EACH ROW EXECUTE FUNCTION dshkit_refuse_change()",
        # Events may now be deleted, but only once a pack of their session holds them: checked
        # once per statement over the deleted rows, not by a lookup per row.
        "DROP TRIGGER dshkit_events_append_only ON dshkit_events",
        "CREATE TRIGGER dshkit_events_append_only BEFORE UPDATE ON dshkit_events"
        " FOR EACH ROW EXECUTE FUNCTION dshkit_refuse_change()",
        "CREATE FUNCTION dshkit_check_packed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF EXISTS (SELECT 1 FROM deleted d WHERE NOT EXISTS (SELECT 1 FROM dshkit_packs p"
        "  WHERE p.session_id = d.session_id AND d.seq BETWEEN p.first_seq AND p.last_seq)) THEN"
        "  RAISE EXCEPTION 'dshkit_events is append-only: DELETE refused (only events a pack holds are deleted)'"
        f"   USING ERRCODE = '{APPEND_ONLY_SQLSTATE}';"
        " END IF; RETURN NULL; END $$",
        "CREATE TRIGGER dshkit_events_packed_only AFTER DELETE ON dshkit_events REFERENCING OLD TABLE AS deleted"
        " FOR EACH STATEMENT EXECUTE FUNCTION dshkit_check_packed()",
    ),
}

READ_VERSION = "SELECT version FROM dshkit_schema"
# Damaged bytes under a digest are replaced by the next save of the right ones.
SAVE_ATTACHMENT = (
    "INSERT INTO dshkit_attachments (digest, data) VALUES (%s, %s) ON CONFLICT (digest) "
    "DO UPDATE SET data = EXCLUDED.data WHERE dshkit_attachments.data IS DISTINCT FROM EXCLUDED.data"
)
LOAD_ATTACHMENT = "SELECT data FROM dshkit_attachments WHERE digest = %s"
SET_VERSION = "UPDATE dshkit_schema SET version = %s"

CREATE_SESSION = (
    "INSERT INTO dshkit_sessions (session_id, header, crc, created_at, parent_id) VALUES (%s, %s, %s, %s, %s)"
    " ON CONFLICT (session_id) DO NOTHING RETURNING session_id"
)
READ_EVENTS = "SELECT seq, body, crc FROM dshkit_events WHERE session_id = %s ORDER BY seq"
# A session in one statement (`read_session`). Its first row: the header and its checksum, the
# event rows' bodies joined by newlines as UTF-8 bytes (`bytea`, read in binary: the client
# neither decodes megabytes of text nor encodes them again for the native check), their checksums
# comma-separated (NULL as `x`, which no checksum matches), for a writer (`message_ids` true) the
# message ids those events brought (`PostgresStore._new_message_id`) as one array from the same
# scan, and the rows' count and first seq. Then one row per pack (`postgres_packs`): its bodies
# and checksums as stored, its message ids for a writer, its first and last seq; the client puts
# them in seq order and joins them before the rows' (the server's `string_agg` of 38 packs' 8 MB
# cost 25 ms, sending them as rows 7). The event rows come in seq order from an ordered subquery
# read along the primary key, under `READ_SESSION_PLAN`. Were the order ever otherwise, each
# record's own seq is checked against its place as it is decoded: refused, never taken.
READ_SESSION = (
    "SELECT s.header, s.crc, e.bodies, e.crcs, e.message_ids, e.rows, e.first_row, NULL::bigint, NULL::bigint"
    " FROM dshkit_sessions s CROSS JOIN ("
    " SELECT convert_to(string_agg(body, chr(10)), 'UTF8') AS bodies, string_agg(coalesce(crc::text, 'x'), ',') AS crcs,"
    " array_agg(message_id) FILTER (WHERE %(message_ids)s AND message_id IS NOT NULL) AS message_ids,"
    " count(*) AS rows, min(seq) AS first_row"
    " FROM (SELECT seq, body, crc, message_id FROM dshkit_events WHERE session_id = %(session)s ORDER BY seq) AS ordered"
    ") AS e WHERE s.session_id = %(session)s"
    " UNION ALL"
    " SELECT NULL, NULL, bodies, crcs, CASE WHEN %(message_ids)s THEN message_ids END, NULL, NULL, first_seq, last_seq"
    " FROM dshkit_packs WHERE session_id = %(session)s"
)
# Run before `READ_SESSION` in its transaction, and local to it (a caller's pooled connection keeps
# its settings): the only plan left without a sort is the primary key's index scan, already in seq
# order. Otherwise the planner sorts whenever it thinks few rows match, as it does for a session
# written since the table was last analyzed (it guessed 339 of 40,000): a sort of every body, on
# disk past `work_mem` (8.7 MB for 10,000 messages), 59 ms against 24 for the index scan.
READ_SESSION_PLAN = "SELECT set_config('enable_sort', 'off', true)"
TRY_LOCK = "SELECT pg_try_advisory_lock(%s)"
UNLOCK = "SELECT pg_advisory_unlock(%s)"

# Rows that were inserted plus rows already holding the identical record (text and checksum)
# must cover the batch.
# The outer SELECT sees the table as it was before the INSERT (one snapshot), so a row that a
# concurrent writer committed meanwhile counts neither as inserted nor as identical: conflict.
#
# The cost of a write must not grow with the session (or the table): the stored rows are read
# only when some row of the batch was not inserted (a retry, or a conflict): the CASE evaluates
# `identical` only then, and `identical` probes the primary key once per batch row (LATERAL with
# LIMIT 1), never a join the planner could turn into a scan of the table.
WRITE_EVENTS = """
WITH batch AS (
    SELECT * FROM unnest(%(seqs)s::bigint[], %(types)s::text[], %(times)s::bigint[],
                         %(message_ids)s::text[], %(bodies)s::text[], %(crcs)s::bigint[])
        AS b(seq, type, time, message_id, body, crc)
), inserted AS (
    INSERT INTO dshkit_events (session_id, seq, type, time, message_id, body, crc)
    SELECT %(session)s, seq, type, time, message_id, body, crc FROM batch
    ON CONFLICT (session_id, seq) DO NOTHING
    RETURNING seq
), identical AS (
    SELECT batch.seq FROM batch CROSS JOIN LATERAL (
        SELECT stored.body, stored.crc FROM dshkit_events stored
        WHERE stored.session_id = %(session)s AND stored.seq = batch.seq
        LIMIT 1
    ) stored
    WHERE stored.body = batch.body AND stored.crc IS NOT DISTINCT FROM batch.crc
)
SELECT CASE WHEN (SELECT count(*) FROM inserted) = %(expected)s::bigint THEN %(expected)s::bigint
ELSE dshkit_check_write(
    %(session)s,
    %(expected)s,
    (SELECT count(*) FROM inserted) + (SELECT count(*) FROM identical),
    (SELECT min(seq) FROM batch WHERE seq NOT IN (SELECT seq FROM inserted)
                                  AND seq NOT IN (SELECT seq FROM identical))
) END, (SELECT count(*) FROM inserted)
"""

LIST_SESSIONS = """
SELECT s.session_id, s.created_at, greatest(last.time, s.created_at), coalesce(last.seq + 1, 0), s.parent_id
FROM dshkit_sessions s
LEFT JOIN LATERAL (
    SELECT seq, time FROM dshkit_events e WHERE e.session_id = s.session_id ORDER BY seq DESC LIMIT 1
) last ON true
ORDER BY 3 DESC, 2 DESC, 1
"""


WriteRow = tuple[int, str, int, str | None, str, int | None]
"""One event to write: (seq, type, time, message_id, record, checksum or None in a version 1 session)."""


def write_params(session_id: str, rows: list[WriteRow]) -> dict[str, Any]:
    """The parameters of `WRITE_EVENTS` for `rows`."""
    seqs, types, times, message_ids, bodies, crcs = (list(column) for column in zip(*rows))
    return {
        "session": session_id,
        "expected": len(rows),
        "seqs": seqs,
        "types": types,
        "times": times,
        "message_ids": message_ids,
        "bodies": bodies,
        "crcs": crcs,
    }


class SessionRead(NamedTuple):
    """What `read_session` read of a session: packs and event rows joined in seq order."""

    header: str
    header_crc: int | None
    bodies: list[Any]  # packs' then rows' records, each part joined by newlines (psycopg's buffers)
    crcs: list[str]  # their checksums, comma-separated, a list per part
    message_ids: MessageIds | None  # for a writer: the ids its events brought
    packs: list[tuple[int, int]]  # (first seq, last seq) of each pack, in seq order
    rows: int  # how many event rows
    first_row: int | None  # the first row's seq


@functools.cache
def bytea_view_loader() -> type:
    """A psycopg loader of binary `bytea` that returns the buffer it is given instead of a copy
    (also a writer's `text[]` of message ids: `postgres_ids`).

    psycopg's C implementation hands a Python loader a read-only memoryview over the query's
    result that keeps the result alive (the pure Python one, bytes): the packs' megabytes are
    then read where psycopg received them (`verified_join` takes the views as they are), where
    the default loader's `bytes`, joined, made two copies.
    """
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    class ByteaViewLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> Any:
            return data

    return ByteaViewLoader


def read_session(connection: Any, session_id: str, *, message_ids: bool, lock: int | None = None) -> tuple[bool | None, SessionRead | None]:
    """Whether `TRY_LOCK` of advisory lock `lock` took it (None: not asked), then the session as
    `READ_SESSION` reads it (None if there is no such session), run after the lock and
    `READ_SESSION_PLAN` in one transaction: in one round trip where libpq can pipeline (a
    pipeline's statements up to its sync are one implicit transaction), else in an explicit one.
    The lock is the session-level one a writer holds until it closes: a rollback keeps it."""
    import psycopg

    with connection.pipeline() if psycopg.Pipeline.is_supported() else connection.transaction():
        locking = None if lock is None else connection.execute(TRY_LOCK, (lock,))
        cursor = _send_read(connection, session_id, message_ids)
    return None if locking is None else bool(locking.fetchone()[0]), _session_read(cursor.fetchall(), message_ids)


def open_session(connection: Any, session_id: str, *, message_ids: bool, lock: int | None,
                 settings: Sequence[tuple[str, str]] | None) -> tuple[bool | None, SessionRead | None]:
    """`read_session` on a connection just opened, its schema checked (`ensure_schema`) and
    `settings` set in the same round trip (None: a caller's connection, neither checked nor set).

    One pipeline: the version, `settings` and, only where the version is this dshkit's, a
    writer's `pg_try_advisory_lock` in one statement, then the read. Any other version (no
    tables yet, an older schema, a newer one) takes no lock and uses nothing the read returned:
    `ensure_schema` makes, migrates or refuses the schema, then `read_session` reads. A failure
    after the lock was taken is raised (the lock outlives it: the caller releases it)."""
    import psycopg

    if settings is None or not psycopg.Pipeline.is_supported():
        if settings is not None:
            ensure_schema(connection, settings)
        return read_session(connection, session_id, message_ids=message_ids, lock=lock)
    configure = "".join(", set_config(%s, %s, false)" for _ in settings)
    locking = f", CASE WHEN version = {SCHEMA_VERSION} THEN pg_try_advisory_lock(%s) END" * (lock is not None)
    checked: Any = None
    try:
        with connection.pipeline():
            checked = connection.execute(
                f"SELECT version{configure}{locking} FROM dshkit_schema", [*(v for pair in settings for v in pair), *[lock] * (lock is not None)]
            )
            cursor = _send_read(connection, session_id, message_ids)
    except psycopg.Error:
        if _version_row(checked)[0] == SCHEMA_VERSION:
            raise
    else:
        row = _version_row(checked)
        if row[0] == SCHEMA_VERSION:
            return None if lock is None else bool(row[-1]), _session_read(cursor.fetchall(), message_ids)
    ensure_schema(connection, settings)
    return read_session(connection, session_id, message_ids=message_ids, lock=lock)


def _version_row(checked: Any) -> tuple[Any, ...]:
    """The version check's row, `(None,)` if it has none (it failed, or `dshkit_schema` is empty)."""
    import psycopg

    try:
        row = None if checked is None else checked.fetchone()
    except psycopg.Error:  # no result: the statement failed, or never ran
        row = None
    return (None,) if row is None else tuple(row)


def _send_read(connection: Any, session_id: str, message_ids: bool) -> Any:
    """Run `READ_SESSION_PLAN` and `READ_SESSION` (in the caller's pipeline or transaction): the
    cursor whose rows are the session's, its bytea read in place (`bytea_view_loader`)."""
    connection.execute(READ_SESSION_PLAN)
    cursor = connection.cursor(binary=True)
    cursor.adapters.register_loader("bytea", bytea_view_loader())
    if message_ids:  # kept as received, decoded on first use (`MessageIds`)
        cursor.adapters.register_loader(text_array_oid(), bytea_view_loader())
    cursor.execute(READ_SESSION, {"session": session_id, "message_ids": message_ids})
    return cursor


def _session_read(rows: list[Any], message_ids: bool) -> SessionRead | None:
    """The session in `READ_SESSION`'s rows (None if there is none): the packs in seq order, then the rows."""
    session = next((row for row in rows if row[7] is None), None)
    if session is None:
        return None
    parts = sorted((row for row in rows if row[7] is not None), key=lambda row: row[7])
    ids = MessageIds([session[4], *(part[4] for part in parts)]) if message_ids else None
    if session[5]:
        parts.append(session)
    return SessionRead(
        session[0], session[1], [part[2] for part in parts], [part[3] for part in parts],
        ids, [(part[7], part[8]) for part in parts if part is not session], session[5], session[6],
    )


def connection_settings(durability: str) -> list[tuple[str, str]]:
    """What a store sets on a connection of its own (never on a caller's), for `durability`."""
    # psycopg prepares a statement on the server after 5 runs; the write is the same statement
    # every time and every lookup in it is by the full primary key, so its plan never depends on
    # the values: without this, PostgreSQL may judge a fresh plan per write cheaper (it did for
    # WRITE_EVENTS) and spend more planning than writing.
    return [("plan_cache_mode", "force_generic_plan")] + [("synchronous_commit", "off")] * (durability == "none")


def ensure_schema(connection: Any, settings: Sequence[tuple[str, str]] = ()) -> None:
    """Create the tables on first use, migrate an older schema, refuse a newer one; and set
    `settings` ((name, value) pairs) for the connection's session, in the version check's round
    trip (`set_config` beside the version) unless the tables are still to be made."""
    import psycopg

    configure = "".join(", set_config(%s, %s, false)" for _ in settings)
    try:
        version = connection.execute(f"SELECT version{configure} FROM dshkit_schema", [v for pair in settings for v in pair]).fetchone()[0]
    except psycopg.errors.UndefinedTable:
        version = 0
        for name, value in settings:
            connection.execute("SELECT set_config(%s, %s, false)", (name, value))
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise SessionError(
            f"the database holds dshkit session schema version {version}; this dshkit knows up to "
            f"version {SCHEMA_VERSION}: upgrade dshkit"
        )
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        try:
            with connection.transaction():  # a savepoint: a missing table must not abort the outer one
                version = connection.execute(READ_VERSION).fetchone()[0]
        except psycopg.errors.UndefinedTable:
            version = 0
        while version < SCHEMA_VERSION:
            for statement in MIGRATIONS[version]:
                connection.execute(statement)
            version += 1
            connection.execute(SET_VERSION, (version,))
