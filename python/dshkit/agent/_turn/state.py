"""The state of a running turn and how its steps end: `Turn`, `StepResult`, `TurnAborted`, and the
``error`` mapping a failure is recorded as (`error_info`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dshkit.agent._turn.assembly import StreamAssembler
from dshkit.agent.cancel import CancelToken
from dshkit.llm import Message
from dshkit.models.protocol import ModelError
from dshkit.session import Session
from dshkit.session.events import TURN_START

# One message of an admitted batch, with the seqs of the inbox claims it cites (none for context
# `pre_step` added).
Admitted = tuple[Message, tuple[int, ...]]


class TurnAborted(Exception):
    """The turn's cancel token fired at a checkpoint."""


@dataclass(frozen=True)
class StepResult:
    """How a step ended (immutable: the plain ones are shared, `STEPPED`)."""

    kind: str  # "stop" | "tools" | "max_tokens" | "aborted" | "error"
    concluded: bool = False  # a tool asked to end the turn
    error: Mapping[str, Any] | None = None
    context: tuple[Message, ...] = ()  # context the step's tools handed back, for the step boundary


@dataclass
class Turn:
    """A running turn: its number, cancel token, steer input, current step and (so far) its end reason."""

    number: int
    token: CancelToken
    steer: Callable[[Message], None]
    step: int = 0
    stepped: bool = False
    reason: dict[str, Any] = field(default_factory=lambda: {"kind": "completed"})
    run: Any = None  # the `RunState` of the `Agent.run` whose prompt this turn runs, if any


# The plain step results, made once: a step's result is alive across the step boundary, and one
# made per step would be one more object for the cyclic GC to promote at scale (issue 37).
STEPPED = {kind: StepResult(kind) for kind in ("stop", "tools", "max_tokens", "aborted")}


FinishStep = Callable[[Turn], Awaitable[StepResult]]  # ends the step a resumed turn was left in


# How a step that ends the turn stopped, as `turn_stopping` is told (ctx.reason).
STOP_REASONS = {"stop": "completed", "max_tokens": "max_tokens", "tools": "concluded"}


def error_info(exc: BaseException) -> dict[str, Any]:
    """The ``error`` mapping a turn end or step result records for `exc`."""
    if isinstance(exc, ModelError):
        return {**exc.to_info(), "name": type(exc).__name__}
    return {"code": "exception", "name": type(exc).__name__, "message": str(exc)}


def failed_response(outcome: object, assembler: StreamAssembler) -> tuple[BaseException, dict[str, Any]] | None:
    """The error and its ``error`` mapping when a read response failed: the model raised
    (`outcome` is its exception) or it finished with ``error``; None otherwise."""
    if isinstance(outcome, BaseException):
        return outcome, error_info(outcome)
    if assembler.finish_reason == "error":
        info = {"code": "model_error", "message": "model error", **(assembler.error or {})}
        return ModelError(str(info["message"]), code=str(info["code"])), info
    return None


def last_turn_number(session: Session) -> int:
    """The number of the session's latest turn (0 if none); turns are numbered upwards."""
    events = session.events
    numbers = (events[seq].data["turn"] for seq in range(len(events) - 1, -1, -1) if events[seq].type == TURN_START)
    return next(numbers, 0)


__all__ = ["STOP_REASONS", "Admitted", "FinishStep", "StepResult", "Turn", "TurnAborted", "error_info", "failed_response", "last_turn_number"]
