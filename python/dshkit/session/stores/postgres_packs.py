"""Packs of the PostgreSQL store: whole ranges of a session's events moved into one row each.

The rule of which ranges to pack is `dshkit.session.stores.packs.packs_due`; the design, shared
with the SQLite store, is docs/decisions/session-packs.md. Here: the table `dshkit_packs`
(schema version 4, `postgres_schema.MIGRATIONS[3]`), keyed `(session_id, first_seq)`, with the
range's bodies joined by newlines as UTF-8 bytes, their checksums comma-separated and the
message ids the range brought. `pack_range` builds a pack in SQL from the rows and deletes them
in one transaction, after checking the range holds exactly its events; `checked_packs` is the
read's pack-by-pack check when the joined one fails, naming the pack and the event.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from dshkit.session._log.checksums import verified
from dshkit.session.errors import SessionCorruptError
from dshkit.session.stores.packs import checked_pack, pack_place, packs_due
from dshkit.session.stores.postgres_schema import READ_EVENTS

# The pack of events first..last, made only from exactly those rows, each checksummed and none
# holding a newline (the joined form would not split back): else no row is returned and nothing
# is packed. `ORDER BY seq` inside the aggregates: the bodies must be in seq order whatever the plan.
INSERT_PACK = """
INSERT INTO dshkit_packs (session_id, first_seq, last_seq, bodies, crcs, message_ids)
SELECT %(session)s, %(first)s, %(last)s,
       convert_to(string_agg(body, chr(10) ORDER BY seq), 'UTF8'),
       string_agg(crc::text, ',' ORDER BY seq),
       coalesce(array_agg(message_id ORDER BY seq) FILTER (WHERE message_id IS NOT NULL), '{}')
FROM dshkit_events WHERE session_id = %(session)s AND seq BETWEEN %(first)s AND %(last)s
HAVING count(*) = %(last)s - %(first)s + 1 AND min(seq) = %(first)s AND max(seq) = %(last)s
   AND count(crc) = count(*) AND bool_and(strpos(body, chr(10)) = 0)
RETURNING first_seq
"""
# The trigger `dshkit_events_packed_only` refuses this unless the pack above is in place.
DELETE_PACKED = "DELETE FROM dshkit_events WHERE session_id = %(session)s AND seq BETWEEN %(first)s AND %(last)s"
READ_PACKS = "SELECT first_seq, last_seq, bodies, crcs FROM dshkit_packs WHERE session_id = %s ORDER BY first_seq"

Packs = Sequence[tuple[int, int]]
"""A session's packs as (first seq, last seq), in seq order."""


def pack_range(connection: Any, session_id: str, first: int, last: int, during: Callable[[Any], None] | None = None) -> bool:
    """Move events `first`..`last` of a session into one pack, in one transaction; False (and
    nothing changed) unless the rows are exactly those events. `during(connection)` is a test
    hook run between the pack's insert and the rows' delete."""
    params = {"session": session_id, "first": first, "last": last}
    with connection.transaction():
        if connection.execute(INSERT_PACK, params).fetchone() is None:
            return False
        if during is not None:
            during(connection)
        deleted = connection.execute(DELETE_PACKED, params).rowcount
        if deleted != last - first + 1:
            raise SessionCorruptError(f"packing events {first}-{last} of session {session_id} deleted {deleted} rows")
    return True


def make_packs(connection: Any, session_id: str, packed_end: int, next_seq: int, pack_events: int,
               during: Callable[[Any], None] | None = None) -> tuple[int, bool]:
    """Pack every range `packs_due` names once `next_seq` events are written, the packs so far
    ending at `packed_end`: (where the packs now end, whether every due range was packed)."""
    end = packed_end
    for _ in packs_due(0, next_seq - packed_end, pack_events):  # ranges counted from `packed_end`
        if not pack_range(connection, session_id, end, end + pack_events - 1, during):
            return end, False
        end += pack_events
    return end, True


def packs_line_up(packs: Packs, rows: int, first_row: int | None, records: int) -> bool:
    """Whether packs run from seq 0 without a gap, the rows start where they end, and the joined
    read gave one record per event they hold."""
    end = 0
    for first, last in packs:
        if first != end or last < first:
            return False
        end = last + 1
    return (first_row is None or first_row == end) and records == end + rows


def event_place(where: str, packs: Packs, seq: int) -> str | None:
    """Where event `seq` lives if a pack holds it: "<where>: dshkit_packs row <i> (events a-b), event <seq>"."""
    index = bisect_right([first for first, _ in packs], seq) - 1
    if index < 0 or seq > packs[index][1]:
        return None
    first, last = packs[index]
    return f"{pack_place(where, index, first, last)}, event {seq}"


def checked_packs(connection: Any, session_id: str, where: str, describe: Callable[[int], str]) -> tuple[list[Any], list[tuple[int, int]]]:
    """Every record of a session, checked pack by pack and then row by row (the read's fallback),
    and the packs; `SessionCorruptError` naming the pack (and the event when its checksum fails),
    or the row (`describe(seq)`). Both are read in one snapshot, so a writer packing meanwhile
    can never make a range look missing."""
    records: list[Any] = []
    packs: list[tuple[int, int]] = []
    with connection.transaction():
        connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        stored_packs = connection.execute(READ_PACKS, (session_id,)).fetchall()
        rows = connection.execute(READ_EVENTS, (session_id,)).fetchall()
    for index, (first, last, bodies, crcs) in enumerate(stored_packs):
        place = pack_place(where, index, first, last)
        if first != len(records):
            raise SessionCorruptError(f"{place}: the events before it end at {len(records) - 1} (events missing)")
        records.extend(checked_pack(place, first, last, bodies, crcs))
        packs.append((first, last))
    records.extend(verified([row[1:] for row in rows], lambda index: describe(rows[index][0])))
    return records, packs
