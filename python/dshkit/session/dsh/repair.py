"""Crash repair of an original-format log, by the original's own rules (`repair.ts`).

A log ending inside a turn is closed with: an error `tool/result` for each call of the open step
still without a result (`TOOL_OUTCOME_UNKNOWN` when a `tool/call` recorded its start, citing that
seq; `TOOL_NOT_STARTED` otherwise), then `step/end` if a step is open, then
`turn/end {"reason": {"kind": "interrupted"}}`. Each closer result has the original's id
`interrupted-tool-result-<callId>-<seq>` where seq is the seq the closer itself gets. A
`step/end` clears the pending calls, as in the original. A compaction the crash left open is closed
before all that, by a `compaction/end` with an `error` (`compaction_closer`, shared with dshkit's
format): the original's invariant refuses a turn boundary inside an open compaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dshkit import freeze_message
from dshkit.session.events import Event
from dshkit.session._repair import compaction_closer, event_type_reader

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"
_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is "
    "unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or "
    "idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
)
_NOT_STARTED_TEXT = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."


def closer_message_id(call_id: str, seq: int) -> str:
    """The original's id for the closer result of `call_id` logged at `seq`."""
    return f"interrupted-tool-result-{call_id}-{seq}"


def plan_closers(events: Sequence[Event]) -> list[tuple[str, Any, tuple[int, ...]]]:
    """The closer events (type, data in dshkit's vocabulary, source seqs); empty for a balanced log."""
    open_turn: Any = None
    open_step: Any = None
    pending: dict[str, list[Any]] = {}  # call id -> [step, seq of its tool/call or None], log order
    for seq in range(_last_turn_boundary(events), len(events)):
        event = events[seq]
        event_type, data = event.type, event.data
        if event_type == "turn/start":
            open_turn, open_step = data["turn"], None
            pending.clear()
        elif event_type == "turn/end":
            open_turn = open_step = None
            pending.clear()
        elif event_type == "step/start":
            open_step = data["step"]
        elif event_type == "step/end":
            open_step = None
            pending.clear()
        elif event_type == "assistant/message":
            for block in data["message"].content:
                if block.get("type") == "tool_call":
                    pending[block["id"]] = [data.get("step"), None]
        elif event_type == "tool/call":
            entry = pending.get(data.get("call_id"))
            if entry is not None:
                entry[1] = event.seq
        elif event_type == "tool/result":
            pending.pop(data["message"].source.get("call_id"), None)
    compaction = compaction_closer(events)
    closers: list[tuple[str, Any, tuple[int, ...]]] = [compaction] if compaction is not None else []
    if open_turn is None or not events:
        return closers
    seq = events[-1].seq + 1 + len(closers)
    for call_id, (step, call_seq) in pending.items():
        closers.append(_closer_result(call_id, seq, open_turn, step, call_seq))
        seq += 1
    if open_step is not None:
        closers.append(("step/end", {"turn": open_turn, "step": open_step}, ()))
    closers.append(("turn/end", {"turn": open_turn, "reason": {"kind": "interrupted"}}, ()))
    return closers


def _last_turn_boundary(events: Sequence[Event]) -> int:
    """Index of the last `turn/start` or `turn/end` (0 if none): both reset everything
    `plan_closers` tracks, so it reads the events from there on, not the whole log (issue 37)."""
    type_at = event_type_reader(events)
    for index in range(len(events) - 1, -1, -1):
        if type_at(index) in ("turn/start", "turn/end"):
            return index
    return 0


def _closer_result(call_id: str, seq: int, turn: Any, step: Any, call_seq: int | None) -> tuple[str, Any, tuple[int, ...]]:
    """The error `tool/result` closing `call_id` at `seq`: outcome unknown when its `tool/call` at
    `call_seq` recorded its start, not started otherwise."""
    started = call_seq is not None
    message = freeze_message(
        {
            "id": closer_message_id(call_id, seq),
            "role": "user",
            "source": {"kind": "tool", "call_id": call_id},
            "content": [
                {
                    "type": "tool_result",
                    "tool_call_id": call_id,
                    "is_error": True,
                    "content": [{"type": "text", "text": _UNKNOWN_TEXT if started else _NOT_STARTED_TEXT}],
                }
            ],
        }
    )
    error = (
        {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
        if started
        else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    )
    closer: dict[str, Any] = {"turn": turn}
    if step is not None:
        closer["step"] = step
    closer["message"], closer["error"] = message, error
    return ("tool/result", closer, (call_seq,) if call_seq is not None else ())
