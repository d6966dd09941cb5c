"""`packs_due`: which aligned ranges a database store packs, given what it has written."""

from __future__ import annotations

import pytest

from dshkit.session.stores.packs import packs_due


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
