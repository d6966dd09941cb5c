"""Id minting: `new_message_id()` against the id generators a user would reach for."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import ulid
import uuid_utils

from dshkit import new_message_id

TARGETS = [
    {
        "name": "new_message_id() no slower than uuid_utils.uuid7()",
        "group": "new-message-id",
        "versus": "uuid7",
        # A ~100-300 ns call: the least disturbed of ~1000 rounds of 100 µs is the stable estimate
        # on a busy machine (rows run at different moments, so their medians see different loads).
        "stat": "min",
        "max_ratio": 1.0,
    },
    {
        "name": "new_message_id() >= 10x faster than str(ulid.ULID()) (python-ulid)",
        "group": "new-message-id",
        "versus": "python_ulid",
        "min_speedup": 10.0,
    },
]

MINTERS: dict[str, Callable[[], object]] = {
    "dshkit": new_message_id,
    # The target's reference: uuid7 as uuid-utils returns it (a UUID object, not yet a str).
    "uuid7": uuid_utils.uuid7,
    "uuid7_str": lambda: str(uuid_utils.uuid7()),
    "uuid4": lambda: str(uuid.uuid4()),
    "python_ulid": lambda: str(ulid.ULID()),
}


@pytest.mark.benchmark(group="new-message-id")
@pytest.mark.parametrize("minter", list(MINTERS.values()), ids=list(MINTERS))
def test_new_message_id(benchmark, minter: Callable[[], object]) -> None:
    first, second = minter(), minter()
    assert first != second
    benchmark(minter)
