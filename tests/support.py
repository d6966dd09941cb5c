"""Helpers shared by the test modules (on sys.path through pytest's `pythonpath` setting)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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
