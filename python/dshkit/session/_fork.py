"""How `Session.fork` seeds a child: the fork point, and the parent's events copied record for record.

The child's log starts with the parent's events, record for record (same seqs, times, message
ids), so the child derives the same history up to the fork point; its header names the parent
(`parent_id`) and how many events were copied (`seed_length`). A fork point inside a turn would
copy half a turn, which the child's open would then "repair" as a crash: it is refused.
Everything here takes public values (the parent's events, its id lookup); `Session.fork` creates
the child from the `ForkSeed` and writes its records to the child's store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from dshkit import new_message_id

from dshkit.session.attachments import Attachments, copy_attachments
from dshkit.session._log.event_codec import decode_events, encode_event, encode_header
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import MESSAGE_EVENT_TYPES, TURN_END, TURN_START, Event
from dshkit.session._repair import open_turn_start
from dshkit.session.stores.protocol import SessionStore
from dshkit.session._surface import Surface


class Child(Protocol):
    """What `write_seed` uses of the child `Session`."""

    @property
    def store(self) -> SessionStore | None: ...

    @property
    def attachments(self) -> Attachments: ...

    def close(self) -> None: ...


class ForkSeed(NamedTuple):
    """What a child starts with: its id and header, the copied events, their fold and their records."""

    session_id: str
    header: str
    events: EventLog
    surface: Surface
    records: list[str]


def fork_point(events: Any, first_seq: Callable[[str], int | None], at: int | str | None) -> int:
    """How many events a fork at `at` copies; `ValueError` unless that is a turn boundary."""
    if at is None:
        if open_turn_start(events) is not None:
            raise ValueError("cannot fork now: a turn is open (fork between turns, or pass at= a turn's end)")
        return len(events)
    if isinstance(at, bool) or not isinstance(at, (int, str)):
        raise TypeError(f"at must be an event seq (int), a message id (str) or None, not {type(at).__name__}")
    if isinstance(at, int):
        if not 0 <= at < len(events):
            raise ValueError(f"at={at}: the session has events 0..{len(events) - 1}")
        if open_turn_start(events[: at + 1]) is not None:
            raise ValueError(f"at={at}: event {at} ({events[at].type}) is inside a turn; fork at a turn/end")
        return at + 1
    seq = first_seq(at)
    if seq is None:
        raise ValueError(f"at={at!r}: the session holds no message with that id")
    if open_turn_start(events[: seq + 1]) is None:
        return seq + 1  # logged between turns
    for later in events[seq + 1 :]:
        if later.type == TURN_END:
            return int(later.seq) + 1
        if later.type in MESSAGE_EVENT_TYPES or later.type == TURN_START:
            raise ValueError(f"at={at!r}: message {at} does not end its turn ({later.type} follows at event {later.seq})")
    raise ValueError(f"at={at!r}: the turn holding message {at} has not ended")


def fork_records(events: Sequence[Event], first_seq: Callable[[str], int | None], at: int | str | None) -> list[str]:
    """The records a fork of the log `events` at `at` copies (taken while the log cannot change)."""
    return [encode_event(event) for event in events[: fork_point(events, first_seq, at)]]


def fork_seed(records: list[str], *, parent_id: str, session_id: str | None, created_at: int) -> ForkSeed:
    """The seed of a child of `parent_id` starting with `records`; `session_id` `None`: a new id."""
    child_id = session_id or new_message_id()
    header = encode_header(child_id, created_at, parent_id=parent_id, seed_length=len(records))
    surface = Surface()
    child_events = decode_events(records, lambda index: f"fork of {parent_id}: event {index}", surface.fold)
    return ForkSeed(child_id, header, child_events, surface, records)


def write_seed(child: Child, seed: ForkSeed, attachments: Attachments) -> None:
    """Copy the attachments the seed refers to from `attachments` (the parent's) into `child`, then
    write the seed's events to its store (created with the seed's header) and sync; on failure close `child`."""
    try:
        copy_attachments(seed.events, attachments, child.attachments.backend)  # before any event refers to them
        store = child.store
        if store is not None:  # in memory, the child holds the seed's events already
            for event, record in zip(seed.events, seed.records):
                store.append(event, record)
            store.sync()
    except BaseException:
        child.close()
        raise
