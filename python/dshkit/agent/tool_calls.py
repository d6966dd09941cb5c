"""Running one response's tool calls: ordering, the call bodies, results committed in model order.

Every call of a response ends with a `tool/result` in the log, whatever stops the batch: a call
never started gets "aborted before dispatch", and a call whose body could not finish (the driver
task was cancelled, or the log failed) gets "aborted while running". Context a tool hands back
(`ToolOutput.context`) is returned to the turn, which queues it at the step boundary.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import methodcaller
from typing import Any

from dshkit.agent.calls import durability_point, is_awaitable
from dshkit.agent.cancel import CancelToken
from dshkit.agent.eager import start_eagerly
from dshkit.agent.notifications import NotificationHub
from dshkit.agent.inbox import Inbox
from dshkit.agent.tool_gate import TimedOut, ToolGate
from dshkit.agent.tools import Tool, ToolContext, ToolOutput, tool_content
from dshkit.llm import Message, create_tool_result_message, freeze
from dshkit.session import Session
from dshkit.session.events import TOOL_CALL, TOOL_RESULT

_log = logging.getLogger("dshkit.agent")
_is_done = methodcaller("done")  # a task's done(), called from C (no generator frame per batch wait)


@dataclass
class _CallResult:
    content: Any
    is_error: bool = False
    error: Mapping[str, str] | None = None
    meta: Mapping[str, Any] | None = None
    context: tuple[Message, ...] = ()
    end_turn: bool = False
    call_seq: int | None = None


class ToolCallRunner:
    """Runs the tool calls of assistant messages for one agent (its tools, log and live events)."""

    def __init__(
        self, session: Session, hub: NotificationHub, inbox: Inbox, tools: Mapping[str, Tool], gate: ToolGate | None = None
    ) -> None:
        self._session = session
        self._hub = hub
        self._inbox = inbox
        self._tools = tools
        self._gate = gate  # validation, hooks, approvals, timeouts (None: bodies run plainly)
        self.suspended = False  # set when the agent's task stops while calls wait for a person
        self.turn_tools: Mapping[str, Tool] = {}  # tools of the running turn only (a run's final-answer tool)

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
        results: list[Any] = [None] * len(calls)  # a _CallResult per call once it has one
        committed = 0  # results logged so far, in model order
        loop_ran = False
        running: dict[asyncio.Future[_CallResult], tuple[int, int]] = {}  # task -> (index, call seq)

        logged_early: set[int] = set()  # results logged past a call that waits for a person

        def commit_ready() -> None:
            # Counted one result at a time: a log failure half way leaves `committed` exact.
            nonlocal committed
            while committed < len(calls):
                result = results[committed]
                if result is None:
                    if self._gate is not None and self._gate.book.is_waiting(calls[committed]["id"]):
                        commit_past_waiting()
                    return
                if committed not in logged_early:
                    self._commit_result(turn, step, calls[committed], result, assistant_seq)
                committed += 1

        def commit_past_waiting() -> None:
            # A call waiting for a person (maybe for days, across a restart) does not hold back the
            # results after it: those are logged now, in model order among themselves.
            for index in range(committed + 1, len(calls)):
                result = results[index]
                if result is None:
                    if self._gate is not None and self._gate.book.is_waiting(calls[index]["id"]):
                        continue
                    return
                if index not in logged_early:
                    self._commit_result(turn, step, calls[index], result, assistant_seq)
                    logged_early.add(index)

        try:
            for segment in self.segments(calls):
                if token.cancelled:
                    break  # no new call starts after a cancel
                call_seqs = [
                    logged[calls[index]["id"]] if logged and calls[index]["id"] in logged else self._log_call(turn, step, calls[index])
                    for index in segment
                ]
                # Durability point: every started call is on disk before its body runs.
                if (synced := durability_point(self._session)) is not None:
                    await synced
                # Each body starts at once and is a task only if it has to wait (`start_eagerly`).
                batch_wait = _BatchWait()
                running = {}
                for index, seq in zip(segment, call_seqs):
                    running[start_eagerly(self._run_call(turn, step, token, calls[index], seq, batch_wait.body_ended))] = (index, seq)
                pending = set(running)
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
                    loop_ran = True
                    done = set(filter(_is_done, pending))
                    pending -= done
                    for task in done:
                        index, seq = running[task]
                        if task.cancelled() and self._is_waiting(calls[index]):
                            # Its wait for a person was stopped from outside (the process shutting
                            # down cancels every task, in no set order): the same as this driver
                            # being cancelled first, never an error result for that call.
                            raise asyncio.CancelledError
                        results[index] = _task_result(task, seq)
                    commit_ready()
        except BaseException as exc:
            try:
                # The agent's own task cancelled (a process shutting down) while calls wait for a
                # person: those calls, and the calls not started, are left for the next process,
                # and the turn stays open (`suspended`), as if the process had died.
                if not isinstance(exc, Exception) and any(self._is_waiting(calls[index]) for index, _ in running.values()):
                    self.suspended = True
                _answer_every_call(token, results, running, leave=(lambda index: self._is_waiting(calls[index])) if self.suspended else None)
                commit_ready()
            except Exception:
                _log.exception("agent loop: could not log results for the unanswered tool calls")
            raise
        if committed < len(calls):  # a cancel stopped the batch: every call still gets its result
            _answer_every_call(token, results, running)
            commit_ready()
        # Every call has its result by now (committed, or answered above).
        context: dict[str, Message] = {}
        end_turn = False
        for result in results:
            if result.end_turn:
                end_turn = True
            for message in result.context:
                context.setdefault(message.id, message)  # two tools may hand back one message: it enters once
        return end_turn, tuple(context.values()), loop_ran

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
    ) -> _CallResult:
        """Run one call's body; `ended()` runs as its last act, in the step that ends the body's task
        (`_BatchWait`: the driver then wakes in the next loop iteration, not two later)."""
        try:
            name = call["name"]
            tool = self._tools.get(name)
            if tool is None:
                tool = self.turn_tools.get(name)
            if tool is None:
                known = ", ".join(self._tools) or "none"
                return _CallResult(
                    f"Unknown tool {name!r} (available: {known}).", is_error=True,
                    error={"name": "UnknownTool", "code": "unknown_tool"}, call_seq=call_seq,
                )
            raw = call["arguments"]
            try:
                # "{}" (a call without arguments, the most common) needs no parser
                arguments = {} if raw == "{}" else json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                return _CallResult(
                    f"Invalid arguments for {name}: not JSON ({exc}).", is_error=True,
                    error={"name": "InvalidArguments", "code": "invalid_arguments"}, call_seq=call_seq,
                )
            if not isinstance(arguments, dict):
                return _CallResult(
                    f"Invalid arguments for {name}: expected a JSON object, got {type(arguments).__name__}.",
                    is_error=True, error={"name": "InvalidArguments", "code": "invalid_arguments"}, call_seq=call_seq,
                )
            ctx = ToolContext(call["id"], name, turn, step, token, self._session)
            gate = self._gate
            if gate is not None and gate.engaged(tool):
                return await self._run_gated(gate, tool, raw, arguments, ctx, call_seq)
            try:
                output = tool.run(arguments, ctx)
                if is_awaitable(output):  # `call_sync_or_async` inline: one coroutine less per call
                    output = await output
                return self._result_of(output, call_seq)
            except Exception as exc:
                return _CallResult(
                    f"{type(exc).__name__}: {exc}", is_error=True,
                    error={"name": type(exc).__name__, "code": "tool_error"}, call_seq=call_seq,
                )
        finally:
            ended()

    def _result_of(self, output: Any, call_seq: int) -> _CallResult:
        """A body's returned value as the call's result (a `ToolOutput`, or plain content)."""
        if isinstance(output, ToolOutput):
            for index, message in enumerate(output.context):
                if self._inbox.knows(message.id):
                    raise ValueError(f"ToolOutput context[{index}]: message id {message.id} is not new to the session")
            meta = output.meta
            if meta is not None:
                try:
                    meta = freeze(meta)
                except (TypeError, ValueError) as exc:
                    return _CallResult(
                        f"{type(exc).__name__}: tool returned invalid meta: {exc}", is_error=True,
                        error={"name": type(exc).__name__, "code": "invalid_meta"}, call_seq=call_seq,
                    )
            return _CallResult(
                tool_content(output.content), output.is_error, None, meta, output.context, output.end_turn, call_seq,
            )
        return _CallResult(tool_content(output), call_seq=call_seq)

    async def _run_gated(
        self, gate: ToolGate, tool: Tool, raw: str, arguments: dict[str, Any], ctx: ToolContext, call_seq: int
    ) -> _CallResult:
        """A call through the gate (`dshkit.agent.tool_gate`): checks, the timed body, `post_tool`."""
        refusal = await gate.admit(tool, raw, arguments, ctx)
        if refusal is not None:
            return _CallResult(refusal.content, is_error=True, error=refusal.error, call_seq=call_seq)
        try:
            result = self._result_of(await gate.run_body(tool, arguments, ctx), call_seq)
        except TimedOut as exc:
            result = _CallResult(
                exc.text(gate.timeout_of(tool) or 0.0), is_error=True, error={"name": "TimedOut", "code": "timeout"},
                call_seq=call_seq,
            )
        except Exception as exc:
            result = _CallResult(
                f"{type(exc).__name__}: {exc}", is_error=True,
                error={"name": type(exc).__name__, "code": "tool_error"}, call_seq=call_seq,
            )
        if not gate.amends:
            return result
        amended = await gate.amend(tool, arguments, ctx, result.content, result.is_error, result.error)
        return _CallResult(
            amended.content, amended.is_error, amended.error, result.meta, result.context + amended.context,
            result.end_turn, call_seq,
        )

    def answer_unknown(self, turn: int, step: int, call: Any, call_seq: int, assistant_seq: int) -> None:
        """Log the result of a call an earlier process started and never answered (outcome unknown)."""
        result = _CallResult(_UNKNOWN_OUTCOME, is_error=True, error={"name": "Aborted", "code": "aborted_while_running"}, call_seq=call_seq)
        self._commit_result(turn, step, call, result, assistant_seq)

    def _is_waiting(self, call: Any) -> bool:
        return self._gate is not None and self._gate.book.is_waiting(call["id"])

    def take_failure(self) -> dict[str, Any] | None:
        """An error the tools' gate says ends the turn (a retry budget spent), once; else None."""
        return self._gate.take_failure() if self._gate is not None else None

    def _commit_result(self, turn: int, step: int, call: Any, result: _CallResult, assistant_seq: int) -> None:
        try:
            message = create_tool_result_message(call["id"], result.content, is_error=result.is_error)
        except (TypeError, ValueError) as exc:
            # The tool returned blocks that are not valid content: the model gets the reason.
            result = _CallResult(
                f"{type(exc).__name__}: tool returned invalid content: {exc}", is_error=True,
                error={"name": type(exc).__name__, "code": "invalid_content"}, call_seq=result.call_seq,
            )
            message = create_tool_result_message(call["id"], result.content, is_error=True)
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if result.error is not None:
            data["error"] = result.error
        if result.meta is not None:
            data["meta"] = result.meta
        seqs = (result.call_seq,) if result.call_seq is not None else (assistant_seq,)
        event = self._session.append(TOOL_RESULT, data, source_event_seqs=seqs)
        if self._gate is not None:
            self._gate.book.mark_answered(call["id"])
        if self._inbox.deferred_clear is not None:
            self._inbox.run_deferred_clear()
        if self._hub.maybe_listening:
            self._hub.emit("message", turn=turn, step=step, message=message, event_type=TOOL_RESULT, seq=event.seq)


_UNKNOWN_OUTCOME = (
    "Tool call interrupted: the agent stopped while it was running; its outcome is unknown. "
    "Run it again only if it is safe to repeat."
)


def _answer_every_call(
    token: CancelToken,
    results: list[_CallResult | None],
    running: Mapping[asyncio.Future[_CallResult], tuple[int, int]],
    leave: Callable[[Any], bool] | None = None,
) -> None:
    """Fill in an error result for every call that has none (cancelling bodies still running).

    With `leave` (a suspended turn), a call waiting for a person (`leave(call)`) and a call not
    started get none: the next process runs them.
    """
    cause = token.cause or "cancelled"
    for task, (index, seq) in running.items():
        if results[index] is None:
            task.cancel()
            if leave is not None and leave(index):
                continue
            results[index] = _CallResult(
                _UNKNOWN_OUTCOME,
                is_error=True,
                error={"name": "Aborted", "code": "aborted_while_running"},
                call_seq=seq,
            )
    for index, result in enumerate(results):
        if result is None and leave is None:
            results[index] = _CallResult(
                f"Tool call not run: the turn was aborted ({cause}) before it started. "
                "Run it again if it is still needed.",
                is_error=True,
                error={"name": "Aborted", "code": "aborted_before_dispatch"},
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

    async def first_done(self, tasks: set[asyncio.Future[_CallResult]]) -> None:
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


def _task_result(task: asyncio.Future[_CallResult], call_seq: int) -> _CallResult:
    """The result of a finished tool-call task; a body that raised CancelledError is an error result."""
    if task.cancelled():
        return _CallResult(
            "CancelledError: the tool body was cancelled", is_error=True,
            error={"name": "CancelledError", "code": "tool_error"}, call_seq=call_seq,
        )
    return task.result()


__all__ = ["ToolCallRunner"]

