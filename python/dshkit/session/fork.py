"""`Session.fork`: a new session seeded with a copy of another's log up to a turn boundary.

The child's log starts with the parent's events, record for record (same seqs, times, message
ids), so the child derives the same history up to the fork point; its header names the parent
(`parent_id`) and how many events were copied (`seed_length`). A fork point inside a turn would
copy half a turn, which the child's open would then "repair" as a crash: it is refused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dshkit import new_message_id

from dshkit.session.attachments import copy_attachments
from dshkit.session.codec import decode_events, encode_event, encode_header
from dshkit.session.events import MESSAGE_EVENT_TYPES, TURN_END, TURN_START
from dshkit.session.repair import open_turn_start
from dshkit.session.surface import Surface
from dshkit.session.stores import store_for_location

if TYPE_CHECKING:
    from dshkit.session.session import Session


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


def fork_session(parent: Session, at: int | str | None, dest: str | os.PathLike[str] | None, session_id: str | None) -> Session:
    """The child of `parent` (see `Session.fork`), created in `dest` or in memory."""
    from dshkit.session.session import Session, _now_ms

    with parent._lock:
        events = list(parent.events)
        count = fork_point(events, parent._surface.first_seq, at)
        records = [encode_event(event) for event in events[:count]]
    child_id = session_id or new_message_id()
    header = encode_header(child_id, _now_ms(), parent_id=parent.id, seed_length=count)
    store = store_for_location(dest, child_id) if dest is not None else None
    durability = parent.durability if store is not None else "none"
    surface = Surface()
    child_events = decode_events(records, lambda index: f"fork of {parent.id}: event {index}", surface.fold)
    child = Session._start(store, durability, header, child_events, surface)
    try:
        copy_attachments(child_events, parent.attachments, child.attachments.backend)  # before the events
        if store is not None:
            for event, record in zip(child._events, records):
                store.append(event, record)
            store.sync()
    except BaseException:
        child.close()
        raise
    return child
