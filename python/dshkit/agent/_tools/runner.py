"""Running one response's tool calls: ordering, the call bodies, results committed in model order.

Every call of a response ends with a `tool/result` in the log, whatever stops the batch: a call
never started gets "aborted before dispatch", and a call whose body could not finish (the driver
task was cancelled, or the log failed) gets "aborted while running". Context a tool hands back
(`ToolOutput.context`) is returned to the turn, which queues it at the step boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Any

from dshkit.agent._user_code import durability_point
from dshkit.agent.cancel import CancelToken
from dshkit.agent._turn.eager import start_eagerly
from dshkit.agent.notifications import NotificationHub
from dshkit.agent._input.inbox import Inbox
from dshkit.agent._tools.gate import CallResult, ToolGate, error_result
from dshkit.agent.tools import Tool, ToolContext
from dshkit.llm import Message, create_tool_result_message
from dshkit.session import Session
from dshkit.session.events import TOOL_CALL, TOOL_RESULT

_log = logging.getLogger("dshkit.agent")
_is_done = methodcaller("done")  # a task's done(), called from C (no generator frame per batch wait)


@dataclass
class _Batch:
    """One response's calls on their way: each call's result once it has one, and how far the
    results are logged (in model order; some past a call that waits for a person)."""

    calls: tuple[Any, ...]
    assistant_seq: int
    turn: int
    step: int
    results: list[CallResult | None] = field(default_factory=list)
    committed: int = 0  # results logged so far, in model order
    logged_early: set[int] = field(default_factory=set)  # results logged past a call that waits for a person
    running: dict[asyncio.Future[CallResult], tuple[int, int]] = field(default_factory=dict)  # task -> (index, call seq)
    loop_ran: bool = False

    def __post_init__(self) -> None:
        self.results = [None] * len(self.calls)


class ToolCallRunner:
    """Runs the tool calls of assistant messages for one agent (its tools, log and live events);
    each call passes through the agent's `ToolGate` (`dshkit.agent._tools.gate`) once."""

    def __init__(self, session: Session, hub: NotificationHub, inbox: Inbox, tools: Mapping[str, Tool], gate: ToolGate) -> None:
        self._session = session
        self._hub = hub
        self._inbox = inbox
        self._tools = tools
        self._gate = gate  # the pass of one call: validation, hooks, approvals, the timed body
        self.suspended = False  # set when the agent's task stops while calls wait for a person

    @property
    def turn_tools(self) -> Mapping[str, Tool]:
        """Tools of the running turn only (a run's final-answer tool), which the gate finds by name."""
        return self._gate.turn_tools

    @turn_tools.setter
    def turn_tools(self, tools: Mapping[str, Tool]) -> None:
        self._gate.turn_tools = tools

    async def run(
        self, calls: tuple[Any, ...], assistant_seq: int, *, turn: int, step: int, token: CancelToken,
        logged: Mapping[str, int] | None = None,
    ) -> tuple[bool, tuple[Message, ...], bool]:
        """Run a response's tool calls; results are committed in model order as they are ready
        (a call waiting for approval holds back no result after it).

        Consecutive parallel calls run together, an exclusive one alone (`segments`); no call
        starts after `token` fired. Returns whether a tool asked to end the turn, the context
        the tools handed back (model order, each id once) for the step boundary, and whether
        the event loop ran other tasks meanwhile (it does once any call started: the batch
        waits for its bodies, or yields once for bodies that finished at once). `logged` maps
        the ids of calls whose `tool/call` an earlier process logged (a resumed turn) to its seq.
        """
        batch = _Batch(calls, assistant_seq, turn, step)
        try:
            for segment in self.segments(calls):
                if token.cancelled:
                    break  # no new call starts after a cancel
                await self._run_segment(batch, segment, token, logged)
        except BaseException as exc:
            self._answer_on_the_way_out(batch, token, exc)
            raise
        if batch.committed < len(calls):  # a cancel stopped the batch: every call still gets its result
            _answer_every_call(token, batch.results, batch.running)
            self._commit_ready(batch)
        end_turn, context = _handed_back(batch.results)
        return end_turn, context, batch.loop_ran

    async def _run_segment(self, batch: _Batch, segment: list[int], token: CancelToken, logged: Mapping[str, int] | None) -> None:
        """Start the segment's calls together and log their results as they end."""
        calls = batch.calls
        call_seqs = [
            logged[calls[index]["id"]] if logged and calls[index]["id"] in logged else self._log_call(batch.turn, batch.step, calls[index])
            for index in segment
        ]
        # Durability point: every started call is on disk before its body runs.
        if (synced := durability_point(self._session)) is not None:
            await synced
        # Each body starts at once and is a task only if it has to wait (`start_eagerly`).
        batch_wait = _BatchWait()
        batch.running = running = {}
        for index, seq in zip(segment, call_seqs):
            running[start_eagerly(self._run_call(batch.turn, batch.step, token, calls[index], seq, batch_wait.body_ended))] = (index, seq)
        pending = set(running)
        self._gate.listen_for_waits(batch_wait.wake)  # a call starting to wait may free results after it
        try:
            await self._wait_for_bodies(batch, running, pending, batch_wait)
        finally:
            self._gate.listen_for_waits(None)

    async def _wait_for_bodies(
        self, batch: _Batch, running: dict[Any, tuple[int, int]], pending: set[Any], batch_wait: _BatchWait
    ) -> None:
        """Log the segment's results as its bodies end, in model order (`_commit_ready`)."""
        calls = batch.calls
        while pending:
            if any(map(_is_done, pending)):
                # What asyncio.wait would do for a finished body, without its callbacks:
                # the loop runs what is ready first, then the finished results are taken.
                await asyncio.sleep(0)
            else:
                # Waiting for a done callback, unlike awaiting the task, tells a body that
                # raised CancelledError itself (the task is done) from this driver being
                # cancelled (the wait raises), on Python 3.10 too.
                await batch_wait.first_done(pending)
            batch.loop_ran = True
            done = set(filter(_is_done, pending))
            pending -= done
            for task in done:
                index, seq = running[task]
                if task.cancelled() and self._gate.is_waiting(calls[index]["id"]):
                    # Its wait for a person was stopped from outside (the process shutting
                    # down cancels every task, in no set order): the same as this driver
                    # being cancelled first, never an error result for that call.
                    raise asyncio.CancelledError
                batch.results[index] = _task_result(task, seq)
            self._commit_ready(batch)

    def _answer_on_the_way_out(self, batch: _Batch, token: CancelToken, exc: BaseException) -> None:
        """The batch stopped by an exception: every call gets its result, except, when the agent's own
        task was cancelled (a process shutting down) while calls wait for a person, those calls and the
        calls not started: they are left for the next process, and the turn stays open (`suspended`),
        as if the process had died."""
        try:
            waiting = [index for index, _ in batch.running.values() if self._gate.is_waiting(batch.calls[index]["id"])]
            if not isinstance(exc, Exception) and waiting:
                self.suspended = True
            _answer_every_call(token, batch.results, batch.running, leave=set(waiting) if self.suspended else None)
            self._commit_ready(batch)
        except Exception:
            _log.exception("agent loop: could not log results for the unanswered tool calls")

    def _commit_ready(self, batch: _Batch) -> None:
        """Log the results that are next in model order; past a call that waits for a person, the ready
        results after it too (`_commit_past_waiting`). Counted one result at a time: a log failure half
        way leaves `committed` exact."""
        calls, results = batch.calls, batch.results
        while batch.committed < len(calls):
            result = results[batch.committed]
            if result is None:
                if self._gate.is_waiting(calls[batch.committed]["id"]):
                    self._commit_past_waiting(batch)
                return
            if batch.committed not in batch.logged_early:
                self._commit_result(batch.turn, batch.step, calls[batch.committed], result, batch.assistant_seq)
            batch.committed += 1

    def _commit_past_waiting(self, batch: _Batch) -> None:
        """A call waiting for a person (maybe for days, across a restart) does not hold back the
        results after it: those are logged now, in model order among themselves."""
        for index in range(batch.committed + 1, len(batch.calls)):
            result = batch.results[index]
            if result is None:
                if self._gate.is_waiting(batch.calls[index]["id"]):
                    continue
                return
            if index not in batch.logged_early:
                self._commit_result(batch.turn, batch.step, batch.calls[index], result, batch.assistant_seq)
                batch.logged_early.add(index)

    def segments(self, calls: tuple[Any, ...]) -> list[list[int]]:
        """Consecutive parallel calls run together; an exclusive (parallel=False) call runs alone."""
        segments: list[list[int]] = []
        for index, call in enumerate(calls):
            if segments and not self._is_exclusive(call) and not self._is_exclusive(calls[segments[-1][-1]]):
                segments[-1].append(index)
            else:
                segments.append([index])
        return segments

    def _is_exclusive(self, call: Any) -> bool:
        tool = self._tools.get(call["name"])
        return tool is not None and not tool.parallel

    def _log_call(self, turn: int, step: int, call: Any) -> int:
        event = self._session.append(
            TOOL_CALL,
            {"turn": turn, "step": step, "call_id": call["id"], "name": call["name"], "arguments": call["arguments"]},
        )
        if self._inbox.deferred_clear is not None:
            self._inbox.run_deferred_clear()  # an observer of this append cancelled the turn
        if self._hub.maybe_listening:
            self._hub.emit("tool_call", turn=turn, step=step, call_id=call["id"], name=call["name"], seq=event.seq)
        return int(event.seq)

    async def _run_call(
        self, turn: int, step: int, token: CancelToken, call: Any, call_seq: int, ended: Callable[[], None]
    ) -> CallResult:
        """One call's pass through the gate; `ended()` runs as its last act, in the step that ends the
        body's task (`_BatchWait`: the driver then wakes in the next loop iteration, not two later)."""
        try:
            ctx = ToolContext(call["id"], call["name"], turn, step, token, self._session)
            return await self._gate.run_call(call, ctx, call_seq)
        finally:
            ended()

    def answer_unknown(self, turn: int, step: int, call: Any, call_seq: int, assistant_seq: int) -> None:
        """Log the result of a call an earlier process started and never answered (outcome unknown)."""
        result = error_result(_UNKNOWN_OUTCOME, "Aborted", "aborted_while_running", call_seq)
        self._commit_result(turn, step, call, result, assistant_seq)

    def take_failure(self) -> dict[str, Any] | None:
        """An error the tools' gate says ends the turn (a retry budget spent), once; else None."""
        return self._gate.take_failure()

    def _commit_result(self, turn: int, step: int, call: Any, result: CallResult, assistant_seq: int) -> None:
        try:
            message = create_tool_result_message(call["id"], result.content, is_error=result.is_error)
        except (TypeError, ValueError) as exc:
            # The tool returned blocks that are not valid content: the model gets the reason.
            result = error_result(
                f"{type(exc).__name__}: tool returned invalid content: {exc}", type(exc).__name__, "invalid_content", result.call_seq
            )
            message = create_tool_result_message(call["id"], result.content, is_error=True)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if result.error is not None:
            data["error"] = result.error
        if result.meta is not None:
            data["meta"] = result.meta
        seqs = (result.call_seq,) if result.call_seq is not None else (assistant_seq,)
        event = self._session.append(TOOL_RESULT, data, source_event_seqs=seqs)
        self._gate.mark_answered(call["id"])
        if self._inbox.deferred_clear is not None:
            self._inbox.run_deferred_clear()
        if self._hub.maybe_listening:
            self._hub.emit("message", turn=turn, step=step, message=message, event_type=TOOL_RESULT, seq=event.seq)


def _handed_back(results: list[CallResult | None]) -> tuple[bool, tuple[Message, ...]]:
    """Whether a tool asked to end the turn, and the context the tools handed back (model order, each
    id once: two tools may hand back one message)."""
    context: dict[str, Message] = {}
    end_turn = False
    for result in results:
        assert result is not None  # every call has its result by now (committed, or answered)
        if result.end_turn:
            end_turn = True
        for message in result.context:
            context.setdefault(message.id, message)
    return end_turn, tuple(context.values())


_UNKNOWN_OUTCOME = (
    "Tool call interrupted: the agent stopped while it was running; its outcome is unknown. "
    "Run it again only if it is safe to repeat."
)


def _answer_every_call(
    token: CancelToken,
    results: list[CallResult | None],
    running: Mapping[asyncio.Future[CallResult], tuple[int, int]],
    leave: set[int] | None = None,
) -> None:
    """Fill in an error result for every call that has none (cancelling bodies still running).

    With `leave` (a suspended turn), a call waiting for a person (its index in `leave`) and a call
    not started get none: the next process runs them.
    """
    cause = token.cause or "cancelled"
    for task, (index, seq) in running.items():
        if results[index] is None:
            task.cancel()
            if leave is not None and index in leave:
                continue
            results[index] = error_result(_UNKNOWN_OUTCOME, "Aborted", "aborted_while_running", seq)
    for index, result in enumerate(results):
        if result is None and leave is None:
            results[index] = error_result(
                f"Tool call not run: the turn was aborted ({cause}) before it started. Run it again if it is still needed.",
                "Aborted", "aborted_before_dispatch", None,
            )


class _BatchWait:
    """The driver's wait for the first finished body of a batch: `asyncio.wait(..., FIRST_COMPLETED)`
    without its set copies, woken one loop iteration sooner.

    A body calls `body_ended` as its last act (`_run_call`), in the very step that ends its task:
    the driver's wake-up is then scheduled at once, where a done callback of the task would only run
    in the next iteration and schedule it from there (the iteration saved). The tasks' done
    callbacks are the fallback for a body that never ran (a task cancelled before its first step);
    a body that ends withdraws its own, which would only be one more no-op call (or a spurious
    wake-up of a later wait). Cancelling the waiting task cancels the wait only, never the tasks.
    """

    __slots__ = ("_waiter",)

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None

    def wake(self, _: object = None) -> None:
        """End the current wait, if there is one (a body ended, or a task is done)."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def body_ended(self) -> None:
        """A body's last act, inside its task: wake the driver and withdraw the done-callback fallback."""
        task = asyncio.current_task()
        if task is not None:
            task.remove_done_callback(self.wake)
        self.wake()

    async def first_done(self, tasks: set[asyncio.Future[CallResult]]) -> None:
        """Wait until one of `tasks` is done."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        wake = self.wake
        for task in tasks:
            task.add_done_callback(wake)
        try:
            await waiter
        finally:
            self._waiter = None
            for task in tasks:
                task.remove_done_callback(wake)


def _task_result(task: asyncio.Future[CallResult], call_seq: int) -> CallResult:
    """The result of a finished tool-call task; a body that raised CancelledError is an error result."""
    if task.cancelled():
        return error_result("CancelledError: the tool body was cancelled", "CancelledError", "tool_error", call_seq)
    return task.result()


__all__ = ["ToolCallRunner"]

