"""`EventsView`: the read-only, live sequence `session.events` returns."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from dshkit.session._log.event_log import EventLog
from dshkit.session.events import Event


class EventsView(Sequence[Event]):
    """A read-only, live view of a session's events (`session.events`)."""

    __slots__ = ("_events",)

    def __init__(self, events: EventLog) -> None:
        self._events = events

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...
    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        if isinstance(index, slice):
            return tuple(self._events[index])
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def type_at(self, seq: int) -> str:
        """The type of event `seq`, without rebuilding the event (a scan for a few types reads only those)."""
        return self._events.type_at(seq)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __repr__(self) -> str:
        return f"<EventsView of {len(self._events)} events>"
