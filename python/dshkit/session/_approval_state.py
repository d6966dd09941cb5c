"""Approvals as the log holds them: the asks of an open turn, their decisions, remembered policies.

Nothing about an approval lives outside the log: `approval/asked` is written before a call waits
for a person, `approval/decided` when the answer comes, `approval/policy` when an answer is to be
remembered. These folds read that state back, for the agent (`pending_approvals`, the policy it
applies) and for crash repair (a turn that waits for a person is suspended, not crashed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dshkit.session.events import (
    APPROVAL_ASKED,
    APPROVAL_DECIDED,
    APPROVAL_POLICY,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)


@dataclass(frozen=True)
class AskRecord:
    """One `approval/asked` of the open turn and, once there is one, its decision."""

    id: str
    call_id: str
    tool: str
    arguments: str
    reason: str | None
    turn: int | None
    step: int | None
    seq: int
    outcome: str | None = None  # the `approval/decided` outcome, None while undecided
    answered: bool = False  # the call has its tool/result


def open_turn_asks(events: Sequence[Event]) -> dict[str, AskRecord]:
    """The asks of the turn the log ends inside (none when the last turn ended), by call id.

    A call asked twice in the turn (a call id repeated in a later step) counts by its latest ask.
    """
    asks: dict[str, AskRecord] = {}
    by_id: dict[str, str] = {}
    for index in range(len(events) - 1, -1, -1):
        event_type = events[index].type
        if event_type == TURN_END:
            return {}
        if event_type == TURN_START:
            break
    else:
        return {}
    for event in events[index + 1 :]:
        event_type = event.type
        if event_type == APPROVAL_ASKED:
            data = event.data
            if data.get("ignorable") is True or data.get("call_id") is None:
                continue  # another harness's record, or an ask about no particular call
            record = AskRecord(
                data["id"], data["call_id"], data["tool"], data.get("arguments", ""), data.get("reason"),
                data.get("turn"), data.get("step"), event.seq,
            )
            asks[record.call_id] = record
            by_id[record.id] = record.call_id
        elif event_type == APPROVAL_DECIDED:
            call_id = by_id.get(event.data.get("id"))
            if call_id is not None:
                asks[call_id] = replace(asks[call_id], outcome=event.data["outcome"])
        elif event_type == TOOL_RESULT:
            call_id = event.data["message"].source.get("call_id")
            if call_id in asks:
                asks[call_id] = replace(asks[call_id], answered=True)
    return asks


def undecided_asks(events: Sequence[Event]) -> list[AskRecord]:
    """The asks of the open turn still waiting for a person: undecided, their call unanswered."""
    return [record for record in open_turn_asks(events).values() if record.outcome is None and not record.answered]


def remembered_policies(events: Sequence[Event]) -> tuple[dict[str, str], str | None]:
    """The policies remembered in the log: per tool, and the session-wide one (None if never set).

    The latest `approval/policy` for a tool (or without one, for the session) wins.
    """
    per_tool: dict[str, str] = {}
    session_wide: str | None = None
    for event in events:
        if event.type == APPROVAL_POLICY:
            data: Mapping[str, Any] = event.data
            if data.get("ignorable") is True:
                continue
            tool = data.get("tool")
            if tool is None:
                session_wide = data["policy"]
            else:
                per_tool[tool] = data["policy"]
    return per_tool, session_wide


__all__ = ["AskRecord", "open_turn_asks", "remembered_policies", "undecided_asks"]
