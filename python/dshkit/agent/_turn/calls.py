"""After a step's response is logged: the run's checks, then its tool calls.

`TurnRunner._run_steps` runs the calls itself once `TurnRunner._run_step` has returned, so
that what the model call held (the request, the stream assembler, the chunk seqs) is freed
before the tool bodies run, and no coroutine of this module waits beside them: with many agents
at once, what a step keeps in flight is what the cyclic GC promotes and scans (issue 37).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit.agent._run.state import refusing
from dshkit.agent._tools.runner import ToolCallRunner
from dshkit.agent._turn.state import STEPPED, StepResult, Turn
from dshkit.llm import Message
from dshkit.session.events import Event


def answer_without_tools(turn: Turn, response: Event) -> StepResult | Mapping[str, Any] | None:
    """How the step of the logged response (its `assistant/message` event) ends when its calls do not
    run as they are: its `StepResult`, or the error of a run that refuses the calls (they still get
    results, `refuse_calls`). None: run them (`ToolCallRunner.run`, then `after_tools`)."""
    data = response.data
    message = data["message"]
    calls = message.tool_calls
    run = turn.run if turn.run is not None and turn.run.active else None
    if run is not None and (refused := run.after_response(data.get("usage")) or (run.before_tools(calls) if calls else None)):
        return refused  # type: ignore[no-any-return]
    if data["finish_reason"] == "max_tokens":
        return STEPPED["max_tokens"]
    if not calls:
        if run is not None and (retry := run.check_answer(message)) is not None:
            failure = run.take_failure()  # the output retries spent
            return StepResult("stop", context=(retry,)) if failure is None else StepResult("error", error=failure)
        return STEPPED["stop"]
    return None


async def refuse_calls(tool_calls: ToolCallRunner, turn: Turn, response: Event, refused: Mapping[str, Any]) -> StepResult:
    """A run refused the response's calls (`refused`): each still gets a result, "not run", as for
    an aborted batch, and the step ends in that error."""
    calls = response.data["message"].tool_calls
    if calls:
        await tool_calls.run(calls, response.seq, turn=turn.number, step=turn.step, token=refusing(refused))
    return StepResult("error", error=refused)


def after_tools(tool_calls: ToolCallRunner, turn: Turn, end_turn: bool, context: tuple[Message, ...]) -> StepResult:
    """How a step whose calls ran ended: in error when a tool's retry budget for invalid arguments,
    or the run's output retries, are spent; else "tools" (concluded if a tool ended the turn)."""
    run = turn.run if turn.run is not None and turn.run.active else None
    failure = tool_calls.take_failure() or (run.take_failure() if run is not None else None)
    if failure is not None:
        return StepResult("error", error=failure, context=context)
    if end_turn or context:
        return StepResult("tools", concluded=end_turn, context=context)
    return STEPPED["tools"]


__all__ = ["after_tools", "answer_without_tools", "refuse_calls"]
