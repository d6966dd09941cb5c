"""Ratios timed in paired rounds: both sides back to back in each round, the median of the rounds.

Two pytest-benchmark rows are timed seconds apart, so on a shared machine their ratio also holds
whatever the machine did in between (the same code's 200-row JSON dump read 0.62x, 1.14x and
1.58x orjson's in three runs within half an hour). Within one round both sides see the same
machine; the median over the rounds drops the rounds a pause hit on one side only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def paired_ratio(
    function: Callable[[Any], Any],
    value: Any,
    versus: Callable[[Any], Any],
    versus_value: Any,
    *,
    rounds: int = 60,
    best_of: int = 5,
) -> float:
    """`function(value)`'s time over `versus(versus_value)`'s: in each round, the best of
    `best_of` batches of each (a batch is ~0.2 ms of calls, or one call); the median of the rounds."""
    inner = max(1, int(2e-4 / max(_seconds_per_call(versus, versus_value), 1e-9)))

    def best_batch(call: Callable[[Any], Any], argument: Any) -> float:
        best = float("inf")
        for _ in range(best_of):
            start = time.perf_counter()
            for _ in range(inner):
                call(argument)
            best = min(best, time.perf_counter() - start)
        return best

    return statistics.median(best_batch(function, value) / best_batch(versus, versus_value) for _ in range(rounds))


def _seconds_per_call(call: Callable[[Any], Any], argument: Any) -> float:
    """Up to ten calls, as many as fit in a millisecond (at least one)."""
    calls, start = 0, time.perf_counter()
    while calls < 10 and (calls == 0 or time.perf_counter() - start < 1e-3):
        call(argument)
        calls += 1
    return (time.perf_counter() - start) / calls
