"""Subagent logs: a child session created beside its parent's, and the links between the two.

A child's header names its parent (`parent_id`, as a fork's does, with `seed_length` 0: nothing
is copied), `origin: "subagent"`, the parent's tool call that started it (`parent_call_id`) and
its `delegation_depth` (1 for a child of a top-level session; `delegation_of` refuses a header
whose fields are missing or malformed). The parent's log records the
other direction: an ignorable `agent/subagent/started` event per child, naming the call and the
child's session id. Both survive a restart, so a re-opened log knows its depth and its links.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from dshkit import new_message_id

from dshkit.session.errors import SessionCorruptError
from dshkit.session.session import Session
from dshkit.session.stores import in_folder, sibling_location

SUBAGENT_ORIGIN = "subagent"
SUBAGENT_STARTED = "agent/subagent/started"  # in the parent's log: {call_id, session_id, depth, ignorable}


class Delegation(NamedTuple):
    """Where a subagent's log came from: the parent session, the call that started it, its depth."""

    parent_id: str
    call_id: str
    depth: int


def delegation_of(session: Session) -> Delegation | None:
    """The delegation a subagent's log header records (`None` for a log that is no subagent's).

    `SessionCorruptError` naming the log and the field if the header says `origin: "subagent"`
    without a non-empty `parent_id` and `parent_call_id` and an int `delegation_depth` >= 1: a
    depth limit must never be met by a depth that is missing, negative or not a number.
    """
    header = session.stored_header
    if header is None or header.get("origin") != SUBAGENT_ORIGIN:
        return None
    parent_id, call_id, depth = header.get("parent_id"), header.get("parent_call_id"), header.get("delegation_depth")
    problem = None
    if not isinstance(parent_id, str) or not parent_id:
        problem = f"'parent_id' must be a non-empty str, not {parent_id!r}"
    elif not isinstance(call_id, str) or not call_id:
        problem = f"'parent_call_id' must be a non-empty str, not {call_id!r}"
    elif isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        problem = f"'delegation_depth' must be an int >= 1, not {depth!r}"
    if problem is not None:
        where = session.store.describe(-1) if session.store is not None else f"session {session.id}"
        raise SessionCorruptError(f"{where}: a subagent log's header: {problem}")
    return Delegation(parent_id, call_id, depth)


def delegation_depth(session: Session) -> int:
    """How many delegations deep `session` is: 0 for a top-level session, 1 for its child, ..."""
    delegation = delegation_of(session)
    return 0 if delegation is None else delegation.depth


def child_location(parent: Session, child_id: str) -> str | os.PathLike[str] | None:
    """Where a child of `parent` is logged: beside a file log (same folder and suffix), in the same
    database for a `postgresql://` log, in memory for a session in memory."""
    store = parent.store
    if store is None:
        return None
    where = sibling_location(store, child_id, same_kind=parent.format == "dshkit")
    if where is None:
        raise ValueError(f"cannot tell where to log a subagent of {store!r}: pass location=")
    return where


def create_child_session(
    parent: Session, call_id: str, *, location: str | os.PathLike[str] | None = None
) -> Session:
    """A new, empty subagent log for the tool call `call_id` of `parent`, one delegation deeper.

    `location` is a folder (the child is ``<folder>/<child id>.jsonl``) or a `postgresql://` URL;
    by default the child goes beside the parent's log (`child_location`).
    """
    if not isinstance(call_id, str) or not call_id:
        raise ValueError(f"create_child_session: call_id must be a non-empty str, not {call_id!r}")
    child_id = new_message_id()
    where = child_location(parent, child_id) if location is None else in_folder(location, child_id)
    fields: dict[str, Any] = {
        "parent_id": parent.id,
        "seed_length": 0,
        "origin": SUBAGENT_ORIGIN,
        "parent_call_id": call_id,
        "delegation_depth": delegation_depth(parent) + 1,
    }
    if where is None:
        return Session.create(session_id=child_id, header_fields=fields)
    return Session.create(where, durability=parent.durability, session_id=child_id, header_fields=fields)


def children_of(session: Session) -> dict[str, str]:
    """The subagent sessions `session`'s log says it started: call id -> child session id."""
    return {
        event.data["call_id"]: event.data["session_id"] for event in session.events if event.type == SUBAGENT_STARTED
    }


__all__ = [
    "SUBAGENT_ORIGIN",
    "SUBAGENT_STARTED",
    "Delegation",
    "child_location",
    "children_of",
    "create_child_session",
    "delegation_depth",
    "delegation_of",
]
