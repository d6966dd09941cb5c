"""`packs.py`: which aligned ranges a database store packs (`packs_due`), and how a pack read back is checked (`checked_pack`)."""

from __future__ import annotations

import pytest

from dshkit.session._log.checksums import checksum
from dshkit.session.errors import SessionCorruptError
from dshkit.session.stores.packs import checked_pack, pack_place, packs_due


@pytest.mark.parametrize(
    ("packed", "next_seq", "due"),
    [
        (0, 0, []),
        (0, 7, []),
        (0, 15, []),  # range 1 not wholly written: range 0 stays rows
        (0, 16, [0]),
        (0, 23, [0]),
        (0, 24, [0, 1]),
        (1, 24, [1]),
        (2, 24, []),
        (3, 24, []),  # more packs than due (a log cut back by hand): nothing, never a negative range
    ],
)
def test_a_range_is_packed_once_the_next_range_is_written(packed: int, next_seq: int, due: list[int]) -> None:
    assert list(packs_due(packed, next_seq, pack_events=8)) == due


def test_the_rows_left_always_hold_at_least_one_whole_range() -> None:
    for next_seq in range(200):
        made = len(packs_due(0, next_seq, pack_events=8))
        assert next_seq - made * 8 >= min(next_seq, 8)


def test_a_pack_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="pack_events must be at least 1, not 0"):
        packs_due(0, 10, pack_events=0)


RECORDS = [b'{"seq":4,"x":1}', b'{"seq":5,"x":2}', b'{"seq":6,"x":3}']
PLACE = pack_place("log.db", 1, 4, 6)


def pack_of(records: list[bytes], crcs: list[str] | None = None) -> tuple[bytes, str]:
    return b"\n".join(records), ",".join(crcs if crcs is not None else [str(checksum(r.decode())) for r in records])


def test_a_whole_pack_gives_its_records() -> None:
    assert PLACE == "log.db: dshkit_packs row 1 (events 4-6)"
    assert checked_pack(PLACE, 4, 6, *pack_of(RECORDS)) == RECORDS


def test_a_changed_record_is_named_by_pack_and_event() -> None:
    bodies, crcs = pack_of(RECORDS)
    with pytest.raises(SessionCorruptError, match=r"^log\.db: dshkit_packs row 1 \(events 4-6\), event 5: "):
        checked_pack(PLACE, 4, 6, bodies.replace(b'"x":2', b'"x":9'), crcs)


@pytest.mark.parametrize("written", ["0{}", "+{}", " {}", "{}.0", "x"])
def test_a_checksum_not_written_as_its_integer_matches_nothing(written: str) -> None:
    crcs = [str(checksum(r.decode())) for r in RECORDS]
    crcs[2] = written.format(crcs[2])
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 1 \(events 4-6\), event 6: "):
        checked_pack(PLACE, 4, 6, *pack_of(RECORDS, crcs))


@pytest.mark.parametrize(
    ("records", "crcs", "held"),
    [(RECORDS[:2], None, "2 records and 2 checksums"), (RECORDS, ["1", "2"], "3 records and 2 checksums")],
)
def test_a_pack_not_holding_one_record_and_checksum_per_event_is_refused_whole(records: list[bytes], crcs: list[str] | None, held: str) -> None:
    with pytest.raises(SessionCorruptError, match=rf"^log\.db: dshkit_packs row 1 \(events 4-6\): holds {held} for 3 events$"):
        checked_pack(PLACE, 4, 6, *pack_of(records, crcs))
