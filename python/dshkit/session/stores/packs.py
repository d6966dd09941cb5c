"""Packs: a sealed range of a database log's events stored as one row (SQLite and PostgreSQL).

A log of 10,000 messages holds some 40,000 events; reading them as 40,000 rows costs the
database more than decoding them costs dshkit (docs/decisions/session-packs.md). So the writer
moves each whole range of `PACK_EVENTS` events into one pack row, in the transaction that deletes
its rows: the records joined by newlines (exactly the bodies of the rows, in seq order) and their
checksums comma-separated, the form `verified_join` reads. Ranges are aligned (pack `k` holds
seqs `k * PACK_EVENTS` up to `(k + 1) * PACK_EVENTS - 1`), and a range is packed only once the
whole range after it is written too: the newest events are always rows, so a reader of the last
seq, a retried write and a repair only ever meet rows, and the rows of a log start where its
packs end.
"""

from __future__ import annotations

from dshkit.session._log.checksums import verified
from dshkit.session.errors import SessionCorruptError

PACK_EVENTS = 1024


def packs_due(packed: int, next_seq: int, pack_events: int = PACK_EVENTS) -> range:
    """The indexes of the packs to make now, given `packed` packs made and `next_seq` events written.

    Pack `k` is due once every event of range `k + 1` is written (`next_seq >= (k + 2) * pack_events`).
    """
    if pack_events < 1:
        raise ValueError(f"pack_events must be at least 1, not {pack_events}")
    return range(packed, max(packed, next_seq // pack_events - 1))


def pack_place(where: str, index: int, first: int, last: int) -> str:
    """How an error names pack `index` of a log at `where`: "<where>: dshkit_packs row <index> (events <first>-<last>)"."""
    return f"{where}: dshkit_packs row {index} (events {first}-{last})"


def checked_pack(place: str, first: int, last: int, bodies: bytes, crcs: str) -> list[bytes]:
    """The records of the pack of events `first`..`last`, each checked against its checksum;
    `SessionCorruptError` naming the pack (`place`) when it does not hold one record and one
    checksum per event, or the pack and the event whose checksum fails."""
    texts, stored = bytes(bodies).split(b"\n"), crcs.split(",")
    if len(texts) != last - first + 1 or len(stored) != len(texts):
        raise SessionCorruptError(f"{place}: holds {len(texts)} records and {len(stored)} checksums for {last - first + 1} events")
    return verified(zip(texts, map(_stored_checksum, stored)), lambda offset: f"{place}, event {first + offset}")


def _stored_checksum(text: str) -> int | None:
    """A pack's checksum as its row held it: an integer written as itself (anything else matches nothing)."""
    return int(text) if text.isdigit() and str(int(text)) == text else None
