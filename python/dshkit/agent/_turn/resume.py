"""Continuing a turn that waits for approval after the process that asked has gone.

A turn whose calls wait for a person stays open in the log (crash repair leaves it: see
`dshkit.session._repair`). An agent on the re-opened log finds it here (`suspended_turn`) and,
once a decision comes (or on `wake()`), ends that step's calls (`finish_suspended_step`): an
asked call runs or is refused as decided, a call the earlier process had started and not
answered gets an "outcome unknown" result, a call it never started runs now. The turn then
goes on as any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dshkit.agent.approvals import ApprovalBook
from dshkit.agent._tools.runner import ToolCallRunner
from dshkit.agent._turn.state import StepResult, Turn
from dshkit.session import Session
from dshkit.session._approval_state import open_turn_asks
from dshkit.session.events import ASSISTANT_MESSAGE, STEP_START, TOOL_CALL, TOOL_RESULT
from dshkit.session._repair import open_turn_start


@dataclass(frozen=True)
class SuspendedTurn:
    """An open turn left waiting for approval: its number, step, and the step's unanswered calls."""

    turn: int
    step: int
    assistant_seq: int
    calls: tuple[Any, ...]  # unanswered calls of the step's assistant message, model order
    logged: dict[str, int]  # call id -> seq of its tool/call, for the calls that have one


def suspended_turn(session: Session) -> SuspendedTurn | None:
    """The turn the log ends inside, if it holds approval asks (else None: nothing to continue)."""
    events = session.events
    start = open_turn_start(events)
    if start is None or not open_turn_asks(events):
        return None
    step = 0
    assistant: Any = None
    logged: dict[str, int] = {}
    answered: set[str] = set()
    for event in events[start + 1 :]:
        if event.type == STEP_START:
            step = event.data["step"]
        elif event.type == ASSISTANT_MESSAGE:
            assistant, logged, answered = event, {}, set()
        elif event.type == TOOL_CALL:
            logged[event.data["call_id"]] = event.seq
        elif event.type == TOOL_RESULT:
            answered.add(event.data["message"].source.get("call_id"))
    if assistant is None:
        return None
    calls = tuple(call for call in assistant.data["message"].tool_calls if call["id"] not in answered)
    return SuspendedTurn(events[start].data["turn"], step, assistant.seq, calls, logged)


async def finish_suspended_step(
    suspended: SuspendedTurn, turn: Turn, runner: ToolCallRunner, book: ApprovalBook
) -> StepResult:
    """End the suspended step's calls (see the module doc) and say how the step ended."""
    remaining = []
    for call in suspended.calls:
        call_id = call["id"]
        seq = suspended.logged.get(call_id)
        record = book.prior_ask(call_id, turn.number, turn.step)
        if seq is not None and (record is None or (record.outcome is not None and not book.decided_here(record.id))):
            # started by the earlier process (run, or approved there): whether its body ran is unknown
            runner.answer_unknown(turn.number, turn.step, call, seq, suspended.assistant_seq)
        else:
            if record is not None and record.outcome is None and turn.token.cancelled:
                book.decide_pending(call_id, "cancelled", turn.token.cause)
            remaining.append(call)
    end_turn, context, _ = await runner.run(
        tuple(remaining), suspended.assistant_seq, turn=turn.number, step=turn.step, token=turn.token,
        logged=suspended.logged,
    )
    failure = runner.take_failure()
    if failure is not None:
        return StepResult("error", error=failure, context=context)
    return StepResult("tools", concluded=end_turn, context=context)


__all__ = ["SuspendedTurn", "finish_suspended_step", "suspended_turn"]
