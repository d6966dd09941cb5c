"""Running one response's tool calls: ordering, the call bodies, results committed in model order.

Every call of a response ends with a `tool/result` in the log, whatever stops the batch: a call
never started gets "aborted before dispatch", and a call whose body could not finish (the driver
task was cancelled, or the log failed) gets "aborted while running". Context a tool hands back
(`ToolOutput.context`) is returned to the turn, which queues it at the step boundary.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from itertools import repeat
from operator import methodcaller
from typing import Any

from dshkit import freeze
from dshkit.agent._user_code import durability_point
from dshkit.agent.cancel import CancelToken
from dshkit.agent._turn.eager import eager_start_on, start_eagerly
from dshkit.agent.notifications import NotificationHub
from dshkit.agent._input.inbox import Inbox
from dshkit.agent._tools.gate import CallResult, ResultRow, ToolGate, error_result, result_row
from dshkit.agent._tools.waits import BatchWait, OneYield
from dshkit.agent.tools import Tool, ToolContext
from dshkit.llm import Message, create_tool_result_message
from dshkit.session import Session
from dshkit.session.events import TOOL_CALL, TOOL_RESULT

_log = logging.getLogger("dshkit.agent")
_is_done = methodcaller("done")  # a task's done(), called from C (no generator frame per batch wait)


class _Batch:
    """One response's calls on their way: each call's result once it has one, and how far the
    results are logged (in model order; some past a call that waits for a person).

    Alive while the bodies run. An agent's runner reuses one (`ToolCallRunner.run`), with
    its list and dict, rather than building them every step: at scale, what a step keeps in
    flight is what the cyclic GC promotes and scans (issue 37)."""

    __slots__ = ("calls", "assistant_seq", "turn", "step", "results", "committed", "logged_early", "running", "loop_ran")

    def __init__(self) -> None:
        self.calls: tuple[Any, ...] = ()
        self.assistant_seq = self.turn = self.step = self.committed = 0
        self.results: list[ResultRow | None] = []
        self.logged_early: frozenset[int] | set[int] = _NONE_EARLY  # results logged past a call that waits for a person
        # task -> (index, call seq) of the running segment's bodies whose results are not taken yet
        self.running: dict[asyncio.Future[CallResult], tuple[int, int]] = {}
        self.loop_ran = False

    def start(self, calls: tuple[Any, ...], assistant_seq: int, turn: int, step: int) -> None:
        """Set out for the calls of one response (`assistant_seq`), none answered yet."""
        # The calls (frozen mappings) in a tuple the native core makes untracked: a plain tuple of
        # native objects stays tracked, and this one is in flight while the bodies run (issue 37).
        self.calls = freeze(list(calls))
        self.assistant_seq, self.turn, self.step = assistant_seq, turn, step
        self.results.extend(repeat(None, len(calls)))
        self.committed = 0  # results logged so far, in model order
        self.loop_ran = False

    def clear(self) -> None:
        """Done with the response: hold on to none of its calls, results and tasks."""
        self.calls = ()
        self.results.clear()
        self.running.clear()
        self.logged_early = _NONE_EARLY


_NONE_EARLY: frozenset[int] = frozenset()
_ONE_SEGMENT = ((0,),)  # the segments of a response with one call (most responses with calls)


class ToolCallRunner:
    """Runs the tool calls of assistant messages for one agent (its tools, log and live events);
    each call passes through the agent's `ToolGate` (`dshkit.agent._tools.gate`) once."""

    def __init__(self, session: Session, hub: NotificationHub, inbox: Inbox, tools: Mapping[str, Tool], gate: ToolGate) -> None:
        self._session = session
        self._hub = hub
        self._inbox = inbox
        self._tools = tools
        self._gate = gate  # the pass of one call: validation, hooks, approvals, the timed body
        # One wait and one yield for every batch of this agent (one batch runs at a time), not
        # objects made per step: at scale, what a step holds in flight is what the GC scans.
        self._batch_wait = BatchWait()
        self._one_yield = OneYield()
        self._idle_batch: _Batch | None = _Batch()
        self.suspended = False  # set when the agent's task stops while calls wait for a person

    @property
    def turn_tools(self) -> Mapping[str, Tool]:
        """Tools of the running turn only (a run's final-answer tool), which the gate finds by name."""
        return self._gate.turn_tools

    @turn_tools.setter
    def turn_tools(self, tools: Mapping[str, Tool]) -> None:
        self._gate.turn_tools = tools

    def run(
        self, calls: tuple[Any, ...], assistant_seq: int, *, turn: int, step: int, token: CancelToken,
        logged: Mapping[str, int] | None = None,
    ) -> Coroutine[Any, Any, tuple[bool, tuple[Message, ...], bool]]:
        """Run a response's tool calls (awaitable); results are committed in model order as they are
        ready (a call waiting for approval holds back no result after it).

        Consecutive parallel calls run together, an exclusive one alone (`segments`); no call
        starts after `token` fired. Returns whether a tool asked to end the turn, the context
        the tools handed back (model order, each id once) for the step boundary, and whether
        the event loop ran other tasks meanwhile (it does once any call started: the batch
        waits for its bodies, or yields once for bodies that finished at once). `logged` maps
        the ids of calls whose `tool/call` an earlier process logged (a resumed turn) to its seq.

        One coroutine (`_run_batch`) waits for the bodies itself, with objects made once per
        agent (`_Batch`, `BatchWait`, `OneYield`): at scale, what a step holds in flight is
        what the cyclic GC promotes and scans (issue 37).
        """
        batch, self._idle_batch = self._idle_batch, None
        if batch is None:
            batch = _Batch()  # a batch run while the agent's one is in use gets one of its own
        batch.start(calls, assistant_seq, turn, step)
        return self._run_batch(batch, token, logged)

    async def _run_batch(
        self, batch: _Batch, token: CancelToken, logged: Mapping[str, int] | None
    ) -> tuple[bool, tuple[Message, ...], bool]:
        try:
            segments = self.segments(batch.calls)
            try:
                # Indexed, not the tuple's iterator: no iterator the GC tracks stays in flight.
                for number in range(len(segments)):
                    if token.cancelled:
                        break  # no new call starts after a cancel
                    segment = segments[number]
                    call_seqs = self._log_calls(batch, segment, logged)
                    # Durability point: every started call is on disk before its body runs.
                    if (synced := durability_point(self._session)) is not None:
                        await synced
                    running = self._start_bodies(batch, segment, call_seqs, token)
                    # A body that ended in its first step is taken now, so its task does not outlive
                    # the yield below (issue 37); its result is logged after the yield, as before.
                    # On a loop that cannot start a task eagerly no body has run yet: one yield lets
                    # them all take their first step.
                    yield_first = self._take_done(batch) or not eager_start_on(asyncio.get_running_loop())
                    self._gate.listen_for_waits(self._batch_wait)  # a call starting to wait may free results after it
                    try:
                        while running or yield_first:  # the bodies whose results are not taken yet
                            if yield_first or any(map(_is_done, running)):
                                yield_first = False
                                # What asyncio.wait would do for a finished body, without its callbacks:
                                # the loop runs what is ready first, then the finished results are taken.
                                await self._one_yield
                            else:
                                # Waiting for a done callback, unlike awaiting the task, tells a body that
                                # raised CancelledError itself (the task is done) from this driver being
                                # cancelled (the wait raises), on Python 3.10 too.
                                try:
                                    await self._batch_wait.arm(running)
                                finally:
                                    self._batch_wait.disarm(running)
                            batch.loop_ran = True
                            self._take_ended(batch)
                    finally:
                        self._gate.listen_for_waits(None)
            except BaseException as exc:
                self._answer_on_the_way_out(batch, token, exc)
                raise
            return self._batch_end(batch, token)
        finally:
            batch.clear()
            self._idle_batch = batch

    def _batch_end(self, batch: _Batch, token: CancelToken) -> tuple[bool, tuple[Message, ...], bool]:
        """What `run` returns, once every call has its result (a cancel stopped the batch: the calls
        without one get theirs now)."""
        if batch.committed < len(batch.calls):
            _answer_every_call(token, batch.results, batch.running)
            self._commit_ready(batch)
        end_turn, context = _handed_back(batch.results)
        return end_turn, context, batch.loop_ran

    def _start_bodies(
        self, batch: _Batch, segment: tuple[int, ...], call_seqs: tuple[int, ...], token: CancelToken
    ) -> dict[asyncio.Future[CallResult], tuple[int, int]]:
        """Start the segment's calls together; `batch.running`, each body's task -> (index, call seq)."""
        # Each body starts at once and is a task only if it has to wait (`start_eagerly`).
        batch_wait = self._batch_wait
        running = batch.running  # empty: the segment before took all its results
        calls = batch.calls
        # Indexed, not zipped: a body's first step runs inside this loop, and no iterator or
        # unpacked pair of the loop's own should be alive (and tracked) while it does.
        for number in range(len(segment)):
            index, seq = segment[number], call_seqs[number]
            running[start_eagerly(self._run_call(batch.turn, batch.step, token, calls[index], seq, batch_wait))] = (index, seq)
        return running

    def _log_calls(self, batch: _Batch, segment: tuple[int, ...], logged: Mapping[str, int] | None) -> tuple[int, ...]:
        """The `tool/call` seq of each call of the segment, logged now unless an earlier process did."""
        calls = batch.calls
        if len(segment) == 1 and not logged:
            return (self._log_call(batch.turn, batch.step, calls[segment[0]]),)
        seqs: list[int] = []
        for index in segment:
            call_id = calls[index]["id"]
            seqs.append(logged[call_id] if logged and call_id in logged else self._log_call(batch.turn, batch.step, calls[index]))
        return tuple(seqs)

    def _take_ended(self, batch: _Batch) -> None:
        """Take the results of the bodies that ended (`_take_done`), and log those next in model
        order (`_commit_ready`)."""
        if batch.running:
            self._take_done(batch)
        self._commit_ready(batch)

    def _take_done(self, batch: _Batch) -> bool:
        """Move the results of the bodies that ended out of `batch.running` into `batch.results`;
        whether there was one."""
        running = batch.running
        ended = [task for task in running if task.done()]
        if not ended:
            return False
        for task in ended:
            index, seq = running[task]
            if task.cancelled() and self._gate.is_waiting(batch.calls[index]["id"]):
                # Its wait for a person was stopped from outside (the process shutting
                # down cancels every task, in no set order): the same as this driver
                # being cancelled first, never an error result for that call.
                raise asyncio.CancelledError
            batch.results[index] = result_row(_task_result(task, seq))
            del running[task]
        return True

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
                if not isinstance(batch.logged_early, set):
                    batch.logged_early = set()  # made when first needed: most batches never wait for a person
                batch.logged_early.add(index)

    def segments(self, calls: tuple[Any, ...]) -> tuple[tuple[int, ...], ...]:
        """Consecutive parallel calls run together; an exclusive (parallel=False) call runs alone.

        Tuples of ints, which the cyclic GC stops tracking at its first look (lists stay tracked
        while the batch runs)."""
        if len(calls) == 1:
            return _ONE_SEGMENT
        segments: list[list[int]] = []
        for index, call in enumerate(calls):
            if segments and not self._is_exclusive(call) and not self._is_exclusive(calls[segments[-1][-1]]):
                segments[-1].append(index)
            else:
                segments.append([index])
        return tuple(map(tuple, segments))

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
        self, turn: int, step: int, token: CancelToken, call: Any, call_seq: int, batch_wait: BatchWait
    ) -> CallResult:
        """One call's pass through the gate; `batch_wait.body_ended()` runs as its last act, in the step
        that ends the body's task (the driver then wakes in the next loop iteration, not two later)."""
        try:
            ctx = ToolContext(call["id"], call["name"], turn, step, token, self._session)
            return await self._gate.run_call(call, ctx, call_seq)
        finally:
            batch_wait.body_ended()

    def answer_unknown(self, turn: int, step: int, call: Any, call_seq: int, assistant_seq: int) -> None:
        """Log the result of a call an earlier process started and never answered (outcome unknown)."""
        result = error_result(_UNKNOWN_OUTCOME, "Aborted", "aborted_while_running", call_seq)
        self._commit_result(turn, step, call, result_row(result), assistant_seq)

    def take_failure(self) -> dict[str, Any] | None:
        """An error the tools' gate says ends the turn (a retry budget spent), once; else None."""
        return self._gate.take_failure()

    def _commit_result(self, turn: int, step: int, call: Any, result: ResultRow, assistant_seq: int) -> None:
        content, is_error, error, meta, _, _, call_seq = result
        try:
            message = create_tool_result_message(call["id"], content, is_error=is_error)
        except (TypeError, ValueError) as exc:
            # The tool returned blocks that are not valid content: the model gets the reason.
            invalid = error_result(
                f"{type(exc).__name__}: tool returned invalid content: {exc}", type(exc).__name__, "invalid_content", call_seq
            )
            message = create_tool_result_message(call["id"], invalid.content, is_error=True)
            error, meta = invalid.error, invalid.meta
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if error is not None:
            data["error"] = error
        if meta is not None:
            data["meta"] = meta
        seqs = (call_seq,) if call_seq is not None else (assistant_seq,)
        event = self._session.append(TOOL_RESULT, data, source_event_seqs=seqs)
        self._gate.mark_answered(call["id"])
        if self._inbox.deferred_clear is not None:
            self._inbox.run_deferred_clear()
        if self._hub.maybe_listening:
            self._hub.emit("message", turn=turn, step=step, message=message, event_type=TOOL_RESULT, seq=event.seq)


def _handed_back(results: list[ResultRow | None]) -> tuple[bool, tuple[Message, ...]]:
    """Whether a tool asked to end the turn, and the context the tools handed back (model order, each
    id once: two tools may hand back one message)."""
    context: dict[str, Message] = {}
    end_turn = False
    for result in results:
        assert result is not None  # every call has its result by now (committed, or answered)
        handed, ends = result[4], result[5]  # a `ResultRow`'s context and end_turn
        if ends:
            end_turn = True
        for message in handed:
            context.setdefault(message.id, message)
    return end_turn, tuple(context.values())


_UNKNOWN_OUTCOME = (
    "Tool call interrupted: the agent stopped while it was running; its outcome is unknown. "
    "Run it again only if it is safe to repeat."
)


def _answer_every_call(
    token: CancelToken,
    results: list[ResultRow | None],
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
            results[index] = result_row(error_result(_UNKNOWN_OUTCOME, "Aborted", "aborted_while_running", seq))
    for index, result in enumerate(results):
        if result is None and leave is None:
            results[index] = result_row(error_result(
                f"Tool call not run: the turn was aborted ({cause}) before it started. Run it again if it is still needed.",
                "Aborted", "aborted_before_dispatch", None,
            ))


def _task_result(task: asyncio.Future[CallResult], call_seq: int) -> CallResult:
    """The result of a finished tool-call task; a body that raised CancelledError is an error result."""
    if task.cancelled():
        return error_result("CancelledError: the tool body was cancelled", "CancelledError", "tool_error", call_seq)
    return task.result()


__all__ = ["ToolCallRunner"]

