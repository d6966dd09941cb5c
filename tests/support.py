"""Helpers shared by the test modules (on sys.path through pytest's `pythonpath` setting)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from typing import Any


class PlainMapping(Mapping[Any, Any]):
    """A minimal third-party Mapping (not a dict): what a caller's own mapping type looks like."""

    def __init__(self, data: dict[Any, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def traced_allocation(call: Callable[[], object]) -> tuple[int, int]:
    """Bytes `call()` left allocated and its peak, both above the level before it (tracemalloc)."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        call()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before, peak - before
