"""Log formats: how a `Session` turns a store's records into events and back.

A store holds records in one format. dshkit's own (`DSHKIT_FORMAT`, `dshkit.session._log.event_codec`) is
the default; a store may carry another as its `log_format` member (`SessionStore.log_format`,
read through `dshkit.session.stores.protocol.log_format_of`; the original TypeScript harness's,
`dshkit.session.dsh.log_format.ORIGINAL_FORMAT`, is carried by its stores `dsh_jsonl` and
`dsh_sqlite`). Events are always presented in dshkit's vocabulary; a format
decides only how they are stored and how a crashed turn is closed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from dshkit import FrozenDict, new_message_id

from dshkit.session._log.event_codec import StoredRecords, decode_events, decode_header, decode_stored, encode_event, encode_header
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import Event
from dshkit.session._repair import plan_closers
from dshkit.session._surface import Surface

Closer = tuple[str, Any, tuple[int, ...]]


class LogFormat(Protocol):
    """What a `Session` needs of a log format."""

    name: str

    def new_header(self, created_at: int, session_id: str | None = None, fields: dict[str, Any] | None = None) -> tuple[str, str]:
        """(session id, header JSON text) for a new log (`session_id`, or a fresh id), with `fields` added."""

    def read_header(self, text: str | bytes, where: str) -> tuple[str, int, FrozenDict[Any]]:
        """(session id, created-at ms, the whole header) of a checked header record."""

    def decode_events(
        self,
        records: StoredRecords,
        describe: Callable[[int], str],
        fold: Callable[[Event], object],
        *,
        into: EventLog | None = None,
    ) -> EventLog:
        """The events of the stored records, added to `into` as `fold` is called on each in seq order."""

    def load_events(
        self,
        records: StoredRecords,
        describe: Callable[[int], str],
        fold: Callable[[Event], object],
        fold_appends: Callable[[list[int], list[Any], list[Any], int], int],
        *,
        into: EventLog | None = None,
    ) -> EventLog:
        """`decode_events` for opening a log: a run of appends a native pass vouched for goes to
        `fold_appends` (`Surface.fold_appends`) instead of `fold`."""

    def encode_event(self, event: Event, surface: Surface) -> str:
        """The stored record of an event about to be appended (`surface`: the fold before it)."""

    def plan_closers(self, events: Sequence[Event], surface: Surface) -> list[Closer]:
        """The events that close a turn a crash left open (empty if none is open)."""


class DshkitFormat:
    """dshkit's own format (`dshkit.session._log.event_codec`)."""

    name = "dshkit"

    @staticmethod
    def new_header(created_at: int, session_id: str | None = None, fields: dict[str, Any] | None = None) -> tuple[str, str]:
        """The session id (default: a new ULID-based one) and its header, with `fields` added."""
        session_id = session_id or new_message_id()
        return session_id, encode_header(session_id, created_at, extra=fields)

    @staticmethod
    def read_header(text: str | bytes, where: str) -> tuple[str, int, FrozenDict[Any]]:
        """The checked dshkit header."""
        header = decode_header(text, where)
        return header["id"], header["created_at"], header

    decode_events = staticmethod(decode_events)
    load_events = staticmethod(decode_stored)

    @staticmethod
    def encode_event(event: Event, surface: Surface) -> str:
        """dshkit's record (the surface plays no part)."""
        return encode_event(event)

    plan_closers = staticmethod(plan_closers)


DSHKIT_FORMAT: LogFormat = DshkitFormat()

