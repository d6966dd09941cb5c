"""The SQLite store's packs: each sealed range of events as one row of `dshkit_packs` (`packs.py`).

`dshkit_packs` (`first_seq` INTEGER PRIMARY KEY, `last_seq`, `bodies`: the range's records joined
by newlines as a BLOB, `crcs`: their checksums comma-separated) is made by the writer with the
first pack, which also sets `PRAGMA user_version` to `PACKED_VERSION`: a database whose version
is above it was written by a newer dshkit and is refused by name. Every pack of a log holds the
same number of events, the size of its first pack (`PackLayout`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import NamedTuple

from dshkit.session._log.checksums import verified_join
from dshkit.session._log.event_codec import StoredRecords
from dshkit.session.errors import SessionCorruptError
from dshkit.session.stores.packs import checked_pack, pack_place

PACKED_VERSION = 1
"""`PRAGMA user_version` of a database holding `dshkit_packs` (0: rows only, as before packs)."""

Pack = tuple[int, int, bytes, str]
"""A pack as read: (first seq, last seq, bodies, checksums)."""

_PACKS_TABLE = (
    "CREATE TABLE IF NOT EXISTS dshkit_packs ("
    "first_seq INTEGER PRIMARY KEY, last_seq INTEGER NOT NULL, bodies BLOB NOT NULL, crcs TEXT NOT NULL)"
)
# What a range must be to be packed: exactly its events, each a record without a newline (so the
# joined bodies split back into the rows) under an integer checksum. GLOB, not instr: instr
# counts characters and took twice as long over a range's 800 KB.
_RANGE_FACTS = (
    "SELECT count(*), min(seq), max(seq), "
    "sum(coalesce(body GLOB ('*' || char(10) || '*'), 1) OR typeof(crc) != 'integer') "
    "FROM dshkit_events WHERE seq BETWEEN ? AND ?"
)
# In seq order without ORDER BY, as `sqlite_read.SEALED_LOG` reads the rows (a rowid range scan); a reader checks
# each record's seq against its place anyway.
_MAKE_PACK = (
    "INSERT INTO dshkit_packs (first_seq, last_seq, bodies, crcs) "
    "SELECT ?1, ?2, CAST(group_concat(body, char(10)) AS BLOB), group_concat(crc) "
    "FROM dshkit_events WHERE seq BETWEEN ?1 AND ?2"
)
_DELETE_RANGE = "DELETE FROM dshkit_events WHERE seq BETWEEN ? AND ?"


class PackLayout(NamedTuple):
    """The packs of a log: `packs` packs of `size` events each, holding events 0 to `packs * size - 1`."""

    size: int
    packs: int

    @property
    def events(self) -> int:
        return self.size * self.packs

    def place(self, where: str, index: int) -> str:
        """Where event `index` (below `events`) of the log at `where` lives: its pack and seq."""
        pack = index // self.size
        first = pack * self.size
        return f"{pack_place(where, pack, first, first + self.size - 1)}, event {index}"


NO_PACKS = PackLayout(0, 0)


def pack_range(db: sqlite3.Connection, first: int, last: int) -> bool:
    """Move events `first`..`last` from `dshkit_events` into one pack, in one transaction.

    Only a range holding exactly those events, each without a newline and with an integer
    checksum, is packed (False otherwise, nothing changed); any failure rolls the whole move
    back, so every event stays in exactly one place.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        count, low, high, unfit = db.execute(_RANGE_FACTS, (first, last)).fetchone()
        if (count, low, high, unfit) != (last - first + 1, first, last, 0):
            db.execute("ROLLBACK")
            return False
        db.execute(_PACKS_TABLE)
        db.execute(f"PRAGMA user_version={PACKED_VERSION}")
        db.execute(_MAKE_PACK, (first, last))
        db.execute(_DELETE_RANGE, (first, last))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return True


def check_packs_version(version: int, where: str) -> None:
    """`SessionCorruptError` if `version` (the database's `PRAGMA user_version`) is a newer dshkit's."""
    if version > PACKED_VERSION:
        raise SessionCorruptError(
            f"{where}: database version {version} was written by a newer dshkit (this one reads up to "
            f"{PACKED_VERSION}); upgrade dshkit to open it"
        )


def pack_layout(packs: list[Pack], where: str) -> PackLayout:
    """The layout of a log's packs, in seq order (none: `NO_PACKS`); `SessionCorruptError` naming a
    pack out of place (every pack holds as many events as the first, from seq 0 on)."""
    if not packs:
        return NO_PACKS
    size = packs[0][1] - packs[0][0] + 1
    for index, (first, last, bodies, crcs) in enumerate(packs):
        if (first, last) != (index * size, (index + 1) * size - 1) or type(bodies) is not bytes or type(crcs) is not str:
            raise SessionCorruptError(
                f"{where}: dshkit_packs row {index} (events {first}-{last}): not a pack of events "
                f"{index * size}-{(index + 1) * size - 1} (every pack holds as many events as the first)"
            )
    return PackLayout(size, len(packs))


def joined_records(packs: list[Pack], bodies: bytes | None, crcs: str | None) -> StoredRecords | None:
    """The records of the packs then the rows, paired with their checksums in one native call
    (each compared where it is first read); None if they do not pair up."""
    parts: list[bytes | memoryview] = [pack[2] for pack in packs]
    checksums = [pack[3] for pack in packs]
    if bodies is not None:
        parts.append(bodies)
        checksums.append(crcs or "")
    return verified_join(parts, checksums)


def checked_pack_records(
    packs: list[Pack], layout: PackLayout, where: str
) -> list[bytes]:
    """The records of every pack, pack by pack (`checked_pack`); `SessionCorruptError` naming the
    pack and the event of the first that fails."""
    records: list[bytes] = []
    for index, (first, last, bodies, crcs) in enumerate(packs):
        records.extend(checked_pack(pack_place(where, index, first, last), first, last, bodies, crcs))
    return records


def row_describer(layout: PackLayout, describe_row: Callable[[int], str]) -> Callable[[int], str]:
    """`describe_row` for the rows after the packs (indexes counted from the log's first event)."""
    return lambda offset: describe_row(layout.events + offset)
