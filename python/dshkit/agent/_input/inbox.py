"""The agent's inbox: two ordered pending lists, changed only through durable splice events.

``next_turn`` holds follow-ups (one turn each); ``next_step`` holds steering and injected
context (all claimed together at the next step boundary). Every change is one
``agent/inbox/spliced`` event ``{target, start, removed_count, inserted, outcome, cause?}``
appended to the session *before* the in-memory list changes, so a failed append changes nothing
and re-opening the session rebuilds exactly the pending input.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dshkit.agent._input.checks import check_rewrite, check_user_message
from dshkit.agent.notifications import NotificationHub
from dshkit.llm import Message, freeze_message
from dshkit.session.events import INBOX_SPLICED

if TYPE_CHECKING:
    from dshkit.session import Session

NEXT_TURN = "next_turn"
NEXT_STEP = "next_step"
_TARGETS = (NEXT_TURN, NEXT_STEP)


class Inbox:
    """Pending agent input: ``next_turn`` and ``next_step``, ids unique across both."""

    def __init__(self, session: Session, hub: NotificationHub) -> None:
        self._session = session
        self._hub = hub
        self._lists: dict[str, list[Message]] = {NEXT_TURN: [], NEXT_STEP: []}
        self._pending: dict[str, str] = {}  # message id -> target
        # The cause of a clear asked for by a session observer, run once its append returns.
        self.deferred_clear: str | None = None
        self._rebuild()

    def _rebuild(self) -> None:
        for target, messages in inbox_snapshot(self._session.events).items():
            self._lists[target][:] = messages
            for message in messages:
                self._pending[message.id] = target

    @property
    def next_turn(self) -> tuple[Message, ...]:
        """Pending follow-ups, one turn each, in order."""
        return tuple(self._lists[NEXT_TURN])

    @property
    def next_step(self) -> tuple[Message, ...]:
        """Pending steering and injected context, all entering at the next step boundary."""
        return tuple(self._lists[NEXT_STEP])

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._pending

    def has_step_input(self) -> bool:
        """True when next-step input is pending."""
        return bool(self._lists[NEXT_STEP])

    def knows(self, message_id: str) -> bool:
        """Whether `message_id` is pending here or already logged (so a new message cannot take it)."""
        return message_id in self._pending or self._session.has_message(message_id)

    def check_new(self, message: object, where: str) -> Message:
        """Validate a message about to be queued: user role, id neither pending nor logged."""
        checked = check_user_message(message, where)
        if checked.id in self._pending:
            raise ValueError(f"{where}: message id {checked.id} is already pending in the inbox ({self._pending[checked.id]})")
        if self._session.has_message(checked.id):
            raise ValueError(f"{where}: message id {checked.id} is already in the session log; a new message needs a new id")
        return checked

    # Every mutation goes through _splice: log first, then memory, then live events.
    def _splice(
        self,
        target: str,
        start: int,
        removed_count: int,
        inserted: tuple[Message, ...],
        outcome: str,
        cause: str | None = None,
    ) -> tuple[int, list[Message]]:
        data: dict[str, Any] = {
            "target": target,
            "start": start,
            "removed_count": removed_count,
            "inserted": list(inserted),
            "outcome": outcome,
        }
        if cause is not None:
            data["cause"] = cause
        seq = self._session.append(INBOX_SPLICED, data).seq
        pending = self._lists[target]
        removed = pending[start : start + removed_count]
        pending[start : start + removed_count] = inserted
        for message in removed:
            del self._pending[message.id]
        for message in inserted:
            self._pending[message.id] = target
        if self.deferred_clear is not None:
            self.run_deferred_clear()  # an observer of this splice cancelled the turn
        return seq, removed

    def insert(self, target: str, messages: tuple[Message, ...], *, cause: str | None = None) -> int:
        """Append checked messages to the end of `target`; returns the splice seq.

        `ValueError` (and nothing logged) if an id is already pending or appears twice: ids are
        unique across both lists.
        """
        self.run_deferred_clear()  # a clear asked for earlier comes before this change
        ids: set[str] = set()
        for message in messages:
            if message.id in self._pending:
                raise ValueError(f"message id {message.id} is already pending in the inbox ({self._pending[message.id]})")
            if message.id in ids:
                raise ValueError(f"message id {message.id} appears twice in one insert")
            ids.add(message.id)
        seq, _ = self._splice(target, len(self._lists[target]), 0, messages, "inserted", cause)
        if self._hub.maybe_listening:
            for message in messages:
                self._hub.emit("inserted", message=message, target=target, seq=seq)
        return seq

    def claim(self, *, first_step: bool, turn: int | None = None) -> list[tuple[Message, int]]:
        """Claim a step's input: all next-step items, plus one follow-up on a turn's first step.

        Returns ``(message, claim seq)`` pairs in batch order (next-step items, then the
        follow-up). An empty claim logs nothing.
        """
        if self.deferred_clear is not None:
            self.run_deferred_clear()  # a clear asked for earlier comes before this change
        step_items = self._lists[NEXT_STEP]
        if not step_items and not (first_step and self._lists[NEXT_TURN]):
            return []  # the usual step boundary of a running turn: nothing pending
        batch: list[tuple[Message, int]] = []
        claimed: list[tuple[str, int, Message]] = []
        if step_items:
            seq, removed = self._splice(NEXT_STEP, 0, len(step_items), (), "claimed")
            claimed.extend((NEXT_STEP, seq, message) for message in removed)
        if first_step and self._lists[NEXT_TURN]:
            seq, removed = self._splice(NEXT_TURN, 0, 1, (), "claimed")
            claimed.extend((NEXT_TURN, seq, message) for message in removed)
        for target, seq, message in claimed:
            batch.append((message, seq))
            if self._hub.maybe_listening:
                self._hub.emit("claimed", turn=turn, message=message, target=target, seq=seq)
        return batch

    def remove(self, message_id: str, *, cause: str = "removed") -> bool:
        """Discard a pending message by id; False when no such id is pending."""
        self.run_deferred_clear()  # a clear asked for earlier comes before this change
        target = self._pending.get(message_id)
        if target is None:
            return False
        index = next(i for i, message in enumerate(self._lists[target]) if message.id == message_id)
        seq, removed = self._splice(target, index, 1, (), "discarded", cause)
        if self._hub.maybe_listening:
            self._hub.emit("discarded", message=removed[0], target=target, seq=seq, cause=cause)
        return True

    def replace(self, message_id: str, message: Message) -> bool:
        """Put `message` in the place of pending `message_id`; False when that id is not pending.

        `message` may be a same-id rewrite (same role and source, new content: `check_rewrite`)
        or a different message with a new id (neither pending elsewhere nor in the session log).
        """
        self.run_deferred_clear()  # a clear asked for earlier comes before this change
        checked = check_user_message(message, "inbox.replace")
        target = self._pending.get(message_id)
        if checked.id != message_id:
            self.check_new(checked, "inbox.replace")
        if target is None:
            return False
        index = next(i for i, pending in enumerate(self._lists[target]) if pending.id == message_id)
        if checked.id == message_id:
            check_rewrite(self._lists[target][index], checked, "inbox.replace", held="pending")
        seq, removed = self._splice(target, index, 1, (checked,), "replaced")
        if self._hub.maybe_listening:
            self._hub.emit("replaced", message=checked, target=target, seq=seq, previous=removed[0])
        return True

    def clear(self, cause: str) -> None:
        """Discard every pending message (one splice per non-empty list).

        Asked from a session observer, where appending would be re-entrant, the clear is
        deferred: it runs as soon as the append being published returns (every append the agent
        makes calls `run_deferred_clear` then), so the log is the same as for a clear made
        right after that append.
        """
        if self._session.publishing:
            if self.deferred_clear is None:
                self.deferred_clear = cause
            return
        self.run_deferred_clear()  # an earlier clear, with its cause, comes first
        for target in _TARGETS:
            pending = self._lists[target]
            if not pending:
                continue
            seq, removed = self._splice(target, 0, len(pending), (), "discarded", cause)
            if self._hub.maybe_listening:
                for message in removed:
                    self._hub.emit("discarded", message=message, target=target, seq=seq, cause=cause)

    def clear_soon(self, cause: str) -> None:
        """`clear(cause)`, and when it was deferred, its run scheduled on the running event loop."""
        self.clear(cause)
        if self.deferred_clear is not None:
            # Called from a session observer: the agent's own appends run the clear as soon
            # as the append being published returns; for an append someone else made, the
            # event loop runs it right after that append's caller yields.
            # (The driver's end runs it too, should there be no loop in this thread.)
            try:
                asyncio.get_running_loop().call_soon(self.run_deferred_clear)
            except RuntimeError:
                pass

    def run_deferred_clear(self) -> None:
        """Run a clear deferred by `clear` (nothing when none is, or while still publishing)."""
        cause = self.deferred_clear
        if cause is not None and not self._session.publishing:
            self.deferred_clear = None
            self.clear(cause)


def inbox_snapshot(events: Any) -> Mapping[str, tuple[Message, ...]]:
    """The pending lists a log prefix describes (what an agent opened on it would see)."""
    lists: dict[str, list[Message]] = {NEXT_TURN: [], NEXT_STEP: []}
    for event in events:
        if event.type == INBOX_SPLICED:
            data = event.data
            inserted = [item if isinstance(item, Message) else freeze_message(item) for item in data["inserted"]]
            removed = data.get("removed_count", 0)  # the original harness leaves out a count of 0
            lists[data["target"]][data["start"] : data["start"] + removed] = inserted
    return {target: tuple(items) for target, items in lists.items()}


__all__ = [
    "INBOX_SPLICED",
    "NEXT_STEP",
    "NEXT_TURN",
    "Inbox",
    "inbox_snapshot",
]
