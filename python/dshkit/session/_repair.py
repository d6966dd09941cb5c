"""Crash repair: closing a turn that a crash left open, without truncating anything.

A log whose last turn has `turn/start` but no `turn/end` is closed on open by appending, in log
order, an error `tool/result` for every tool call of that turn still without a result, then
`step/end` (if a step is open) and `turn/end {"reason": {"kind": "interrupted"}}`. A call with a
`tool/call` event was started and its outcome is unknown (code `INTERRUPTED`: retry only if
idempotent); a call without one never ran (code `NOT_STARTED`: retry if still needed).

Each closer result has a deterministic message id, a function of the call id and the seq of its
`tool/call` (or, for a call never started, of the `assistant/message` that requested it), so a
repair that is itself interrupted and redone produces the same ids; once `turn/end` is written
there is nothing left to repair.

A compaction left open (`compaction/start` without `compaction/end`: the process stopped while a
summary was being written) is closed first, by a `compaction/end` whose `error` says so
(`compaction_closer`); nothing it would have replaced was touched, as the replacement is the
last thing a compaction writes before its end.

A turn whose unanswered calls include one waiting for a person (an `approval/asked` without
`approval/decided`) is suspended, not crashed: it is left open for the agent that re-opens the
log to continue once the person decides.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from dshkit import Message, create_tool_result_message, freeze_message
from dshkit.llm import encode_ulid

from dshkit.session._approval_state import undecided_asks
from dshkit.session.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
)
from dshkit.session._surface import Surface

INTERRUPTED = "INTERRUPTED"
NOT_STARTED = "NOT_STARTED"
ERROR_NAME = "SessionInterrupted"

_TEXT = {
    INTERRUPTED: (
        "The session stopped before this tool call reported a result; its outcome is unknown. "
        "Retry it only if the tool is idempotent."
    ),
    NOT_STARTED: "The session stopped before this tool call was started; it did not run. Retry it if it is still needed.",
}


def closer_message_id(call_id: str, seq: int) -> str:
    """The deterministic id of the closer result for `call_id` anchored at event `seq`.

    A 26-character Crockford base32 string (a syntactically valid ULID) from a SHA-256 of both.
    """
    digest = hashlib.sha256(f"dshkit/crash-repair\x00{call_id}\x00{seq}".encode()).digest()
    value = int.from_bytes(digest[:17], "big") >> 6  # 130 bits: the first character stays <= '7'
    return encode_ulid(value & ((1 << 128) - 1))


def closer_message(call_id: str, seq: int, code: str) -> Message:
    """The error tool result that answers an unanswered call after a crash."""
    template = create_tool_result_message(call_id, _TEXT[code], is_error=True)
    return freeze_message({**template.to_dict(), "id": closer_message_id(call_id, seq)})


def event_type_reader(events: Sequence[Event]) -> Callable[[int], str]:
    """A function giving the type of event `index` (>= 0) of `events`: `EventLog.type_at` for a
    session's log, which reads it without rebuilding the event (the backward scans below would
    otherwise decode every event of a log without turns, issue 37), else `events[index].type`."""
    type_at: Callable[[int], str] | None = getattr(events, "type_at", None)
    return type_at if type_at is not None else lambda index: events[index].type


def open_turn_start(events: Sequence[Event]) -> int | None:
    """Index of the `turn/start` of a turn left without `turn/end`, if the log ends inside one."""
    type_at = event_type_reader(events)
    for index in range(len(events) - 1, -1, -1):
        event_type = type_at(index)
        if event_type == TURN_END:
            return None
        if event_type == TURN_START:
            return index
    return None


COMPACTION_INTERRUPTED = "interrupted: the session stopped before the compaction ended"


def compaction_closer(events: Sequence[Event]) -> tuple[str, Any, tuple[int, ...]] | None:
    """The `compaction/end` that closes a compaction the log left open, if any.

    A compaction never crosses a turn boundary, so the search stops at the latest one.
    """
    type_at = event_type_reader(events)
    for index in range(len(events) - 1, -1, -1):
        event_type = type_at(index)
        if event_type == COMPACTION_END or event_type == TURN_START or event_type == TURN_END:
            return None
        if event_type == COMPACTION_START:
            event = events[index]
            data = event.data
            closer = {key: data[key] for key in ("compaction_id", "turn") if key in data}
            if "compaction_id" not in data:
                closer["start_seq"] = event.seq  # `Session.compact`'s own events name no id
            closer["error"] = COMPACTION_INTERRUPTED
            return (COMPACTION_END, closer, ())
    return None


def plan_closers(events: Sequence[Event], surface: Surface) -> list[tuple[str, Any, tuple[int, ...]]]:
    """The events (type, data, source seqs) that close an open compaction and the open turn; empty if none is open."""
    compaction = compaction_closer(events)
    start = open_turn_start(events)
    if start is None or undecided_asks(events):
        return [compaction] if compaction is not None else []
    turn = events[start].data.get("turn")
    open_step: Any = None
    calls: dict[str, tuple[int, Any]] = {}  # unanswered call id -> (assistant seq, step), log order
    started: dict[str, int] = {}  # call id -> seq of its tool/call
    for event in events[start + 1 :]:
        event_type = event.type
        if event_type == STEP_START:
            open_step = event.data.get("step")
        elif event_type == STEP_END:
            open_step = None
        elif event_type == ASSISTANT_MESSAGE:
            for call in event.data["message"].tool_calls:
                call_id = call.get("id")
                calls.pop(call_id, None)  # call ids may repeat across steps: the latest counts
                started.pop(call_id, None)
                calls[call_id] = (event.seq, event.data.get("step"))
        elif event_type == TOOL_CALL:
            started[event.data["call_id"]] = event.seq
        elif event_type == TOOL_RESULT:
            calls.pop(event.data["message"].source.get("call_id"), None)
    pending = surface.pending_calls()
    closers: list[tuple[str, Any, tuple[int, ...]]] = [compaction] if compaction is not None else []
    for call_id, (assistant_seq, step) in calls.items():
        if call_id not in pending:
            continue  # replaced away from the surface: nothing the model would see unanswered
        call_seq = started.get(call_id)
        anchor, code = (call_seq, INTERRUPTED) if call_seq is not None else (assistant_seq, NOT_STARTED)
        data: dict[str, Any] = {"turn": turn}
        step = step if step is not None else open_step
        if step is not None:
            data["step"] = step
        data["message"] = closer_message(call_id, anchor, code)
        data["error"] = {"name": ERROR_NAME, "code": code}
        closers.append((TOOL_RESULT, data, (anchor,)))
    if open_step is not None:
        closers.append((STEP_END, {"turn": turn, "step": open_step}, ()))
    closers.append((TURN_END, {"turn": turn, "reason": {"kind": "interrupted"}}, ()))
    return closers
