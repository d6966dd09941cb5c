"""How an open reads a SQLite log: what decides its reading in one statement, then the header,
the packs and the rows in one more, with the database file mapped for that statement only.

An open is one read transaction (one snapshot, whatever a writer packs meanwhile) of four
statements besides `BEGIN` and `COMMIT`: `LOG_FACTS`; `PRAGMA mmap_size` up; `SEALED_LOG`; and
`PRAGMA mmap_size=0`. The packs' megabytes are SQLite overflow pages, which without a map each
cost a `pread` through the page cache of a connection that is new at every open; mapped, they
are copied from the page cache in place (docs/decisions/session-open-native.md, "The store's
share"). The map lasts one statement, so a connection kept for appends holds none, and dshkit
never shrinks a database file, which is what makes a map unsafe (a page cut off under it is a
SIGBUS); within the read transaction SQLite itself cuts no page the snapshot reads.
"""

from __future__ import annotations

import sqlite3
from typing import Any, NamedTuple

from dshkit.session.stores.sqlite_packs import Pack

# Whether the rows carry checksums (a version 1 database has no `crc` column), the pack version
# (`PRAGMA user_version`), and whether `dshkit_packs` exists: by the table, not by the version,
# as a copy made through SQL text (`.dump`) may lose the version.
LOG_FACTS = (
    "SELECT (SELECT count(*) FROM pragma_table_info('dshkit_events') WHERE name = 'crc'), "
    "(SELECT user_version FROM pragma_user_version), "
    "(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'dshkit_packs')"
)
# A sealed log in one statement, each row tagged by what it holds: 0, the header row(s) and
# checksum; 1, a pack (first seq, last seq, bodies, checksums); 2, the event rows as one row:
# their count, every body joined by newlines, every checksum comma-separated, where only an
# integer is written as itself (NULL, text or a real as `x`, which no checksum matches). The
# rows in seq order with no ORDER BY: seq is the rowid and the table has no index, so SQLite
# scans it in rowid order (an ORDER BY would cost a quarter of the query, and one over the whole
# compound would sort the packs' megabytes); the packs are put in order here. Were the rows'
# order ever otherwise, each record's own seq is checked against its place when it is decoded,
# so an out-of-order read is refused, never taken.
_HEADER_PART = "SELECT 0, NULL, NULL, header, crc FROM dshkit_session"
_PACKS_PART = "SELECT 1, first_seq, last_seq, bodies, crcs FROM dshkit_packs"
_ROWS_PART = (
    "SELECT 2, count(*), NULL, CAST(group_concat(body, char(10)) AS BLOB), "
    "group_concat(CASE WHEN typeof(crc) = 'integer' THEN crc ELSE 'x' END) FROM dshkit_events"
)
SEALED_LOG = f"{_HEADER_PART} UNION ALL {_PACKS_PART} UNION ALL {_ROWS_PART}"
SEALED_LOG_WITHOUT_PACKS = f"{_HEADER_PART} UNION ALL {_ROWS_PART}"
MAP_FOR_READ = "PRAGMA mmap_size=1073741824"
UNMAP = "PRAGMA mmap_size=0"


class SealedLog(NamedTuple):
    """What `read_sealed_log` read: the header rows, the packs in seq order and the joined rows."""

    headers: list[tuple[Any, Any]]  # (header, checksum): exactly one in a log
    packs: list[Pack]
    bodies: bytes | None  # the rows' bodies joined by newlines (None: no rows)
    crcs: str | None  # their checksums, comma-separated
    rows: int


def read_sealed_log(db: sqlite3.Connection, has_packs: bool) -> SealedLog:
    """The header, the packs and the rows of a sealed log (`SEALED_LOG`), the file mapped for that
    one statement; run inside the open's read transaction."""
    db.execute(MAP_FOR_READ)
    try:
        tagged = db.execute(SEALED_LOG if has_packs else SEALED_LOG_WITHOUT_PACKS).fetchall()
    finally:
        db.execute(UNMAP)
    headers = [(row[3], row[4]) for row in tagged if row[0] == 0]
    packs = sorted(((row[1], row[2], row[3], row[4]) for row in tagged if row[0] == 1), key=lambda pack: pack[0])
    _, rows, _, bodies, crcs = next(row for row in tagged if row[0] == 2)  # an aggregate: always one row
    return SealedLog(headers, packs, bodies, crcs, rows)
