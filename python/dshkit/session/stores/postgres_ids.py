"""The message ids a PostgreSQL session already holds, as a writer's open reads them: decoded on
first use.

A writer must know which message ids its session holds (`PostgresStore._new_message_id`): a
same-id replacement reuses its message's id and is not indexed again (the unique index
`dshkit_events_message_id`). The open reads them with the session (`READ_SESSION`: one `text[]`
per pack and one for the rows), and psycopg would decode every id into a `str` and the store
gather them into a set: ~0.9 ms of a 10,000-message writer's open, for a question only a
replacement asks. So the arrays are kept as psycopg received them (views over the query's
result, `bytea_view_loader`), and decoded by psycopg's own `text[]` loader when first asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def text_array_oid() -> int:
    """The type oid of `text[]`, whose arrays the open keeps undecoded."""
    import psycopg

    return int(psycopg.postgres.types["text"].array_oid)


class MessageIds:
    """The ids a session's stored events brought (binary `text[]` arrays, decoded on the first
    membership question) and those added since the open."""

    def __init__(self, stored: Iterable[Any] = ()) -> None:
        self._stored = [array for array in stored if array is not None]
        self._ids: set[str] = set()

    def __contains__(self, message_id: object) -> bool:
        if self._stored:
            self._decode()
        return message_id in self._ids

    def add(self, message_id: str) -> None:
        """Note an id an event brings (no question asked: nothing is decoded)."""
        self._ids.add(message_id)

    def _decode(self) -> None:
        import psycopg

        oid = text_array_oid()
        loader_type = psycopg.adapters.get_loader(oid, psycopg.pq.Format.BINARY)
        assert loader_type is not None  # psycopg always has one for text[]
        loader = loader_type(oid, None)
        stored, self._stored = self._stored, []
        for array in stored:
            self._ids.update(loader.load(array))
