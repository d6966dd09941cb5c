"""A turn and its steps: the step boundary, `pre_step` admission, the model call and its stream.

A turn is a run of steps. Between two steps (and before the first) lies the step boundary
(`TurnRunner._step_boundary`), the one place where pending input enters the turn: steering and
injected messages, and context the last step's tools handed back, are claimed there together
(with one follow-up before a turn's first step), `pre_step` admits the batch, and the next step
logs it as user messages right after its `step/start`. Each step builds its request from the
log alone (`project_request`), streams the model's answer into the log chunk by chunk, and
hands the finished assistant message's tool calls to `ToolCallRunner`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from dshkit.agent._turn.admission import admit
from dshkit.agent._turn.assembly import StreamAssembler
from dshkit.agent._turn.calls import after_tools, answer_without_tools, refuse_calls
from dshkit.agent._user_code import call_sync_or_async, durability_point, request_durability_point
from dshkit.agent.cancel import CancelToken
from dshkit.agent.compaction import Compactor
from dshkit.agent._turn.stream_cut import read_until_cut
from dshkit.agent.notifications import NotificationHub
from dshkit.agent.hooks import (
    Hook,
    RequestContext,
    RequestErrorContext,
    TurnStoppingContext,
    request_hook_config,
)
from dshkit.agent._input.inbox import NEXT_STEP, Inbox
from dshkit.agent._run.state import attach_run
from dshkit.agent._tools.runner import ToolCallRunner
from dshkit.agent._turn.state import STEPPED, STOP_REASONS, Admitted, StepResult, Turn, TurnAborted, FinishStep, error_info, failed_response, last_turn_number
from dshkit.llm import Message, create_assistant_message, freeze
from dshkit.models.errors import MalformedResponseError
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, Model, ModelError
from dshkit.session import Session, project_request
from dshkit.session.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)


class TurnRunner:
    """Runs an agent's turns over its session, model, inbox, hooks and tools."""

    def __init__(
        self,
        model: Model,
        session: Session,
        hub: NotificationHub,
        inbox: Inbox,
        hooks: Mapping[str, Hook],
        tool_calls: ToolCallRunner,
        tool_specs: tuple[Mapping[str, Any], ...],
        system: str | None,
        config: Mapping[str, Any],
        *,
        compactor: Compactor | None = None,
        tool_refresh: Callable[[], Awaitable[tuple[Mapping[str, Any], ...] | None]] | None = None,
    ) -> None:
        self._model = model
        self._compactor = compactor
        self._session = session
        self._hub = hub
        self._inbox = inbox
        self._hooks = hooks
        self._tool_calls = tool_calls
        self._tool_specs = tool_specs
        self._tool_refresh = tool_refresh  # brings changed tool sources up to date before a request
        self._system = system
        self._config = config
        self._last_header: Any = None
        self._logged_config: Any = None
        self._turn_number = last_turn_number(session)
        self._loop_ran = False  # the event loop ran other tasks since the last stream was read
        self._logged_specs: Any = None
        self.runs: dict[str, Any] = {}  # prompt id -> the `RunState` of the `Agent.run` waiting for it
        self.last_end: tuple[int, int] | None = None  # (turn, turn/end seq) of the latest turn ended

    def _append(self, event_type: str, data: Any, source_event_seqs: tuple[int, ...] = ()) -> Any:
        if self._tool_calls.suspended:
            return None  # the agent's task was cancelled while calls wait for a person: the turn stays open in the log
        event = self._session.append(event_type, data, source_event_seqs=source_event_seqs)
        if self._inbox.deferred_clear is not None:
            self._inbox.run_deferred_clear()  # an observer of this append cancelled the turn
        return event

    # -- a turn -------------------------------------------------------------------------------

    async def run_turn(self, token: CancelToken, steer: Callable[[Message], None]) -> str:
        """Run one turn; returns its outcome kind (``"stepless"`` for a turn without a step).

        `steer` is what `turn_stopping` gets as ``ctx.steer`` (the agent's). It is passed per
        turn, not kept, so that an agent is no reference cycle and is freed as soon as it is
        dropped.
        """
        self._turn_number += 1
        turn = Turn(self._turn_number, token, steer)
        self._append(TURN_START, {"turn": turn.number})
        self._hub.emit("turn_start", turn=turn.number)
        return await self._close_turn(turn, None)

    async def resume_turn(self, token: CancelToken, steer: Callable[[Message], None], number: int, step: int, finish_step: FinishStep) -> str:
        """Continue turn `number`, left open at step `step` awaiting approval; `finish_step(turn)` ends that step."""
        return await self._close_turn(Turn(number, token, steer, step=step, stepped=True), finish_step)

    async def _close_turn(self, turn: Turn, finish_step: FinishStep | None) -> str:
        token = turn.token
        failure: BaseException | None = None
        try:
            await self._run_steps(turn, finish_step)
        except TurnAborted:
            pass
        except BaseException as exc:
            if not isinstance(exc, Exception):
                failure = exc  # the driver task itself is being cancelled: close the turn, re-raise
                token.cancel("task_cancelled")
            turn.reason = {"kind": "error", "error": error_info(exc)}
        finally:
            if token.cancelled:
                # The first cause wins, even over a hook that threw after the cancel.
                turn.reason = {"kind": "aborted", "cause": token.cause}
            ended = self._append(TURN_END, {"turn": turn.number, "reason": turn.reason})
            self.last_end = (turn.number, ended.seq) if ended is not None else self.last_end
        # Durability point: a turn is acknowledged (`turn_end`, `when_idle`, a run's result) once its
        # end is on disk; a run whose turn end could not be made durable raises the driver's failure.
        acknowledged = ended
        try:
            if failure is None and (synced := durability_point(self._session)) is not None:
                await synced
        except BaseException:
            acknowledged = None
            raise
        finally:
            if turn.run is not None:
                turn.run.ended(acknowledged, turn.reason, self._tool_calls)
        self._hub.emit("turn_end", turn=turn.number, reason=turn.reason)
        if failure is not None:
            raise failure
        kind = turn.reason["kind"]
        return "stepless" if kind == "completed" and not turn.stepped else kind

    async def _run_steps(self, turn: Turn, finish_step: FinishStep | None = None) -> None:
        ended: StepResult | None = None
        if finish_step is not None:
            try:
                ended = await finish_step(turn)
            except BaseException:
                self._end_step(turn)
                raise
        while True:
            batch = await self._step_boundary(turn, ended)
            if batch is None:
                return
            turn.step += 1
            turn.stepped = True
            self._start_step(turn)
            try:
                response = await self._run_step(turn, batch)
                if isinstance(response, StepResult):
                    ended = response
                else:
                    # Not in `_run_step`: one coroutine fewer held across the bodies' wait (issue 37).
                    end_turn, context, self._loop_ran = await self._tool_calls.run(
                        response.data["message"].tool_calls, response.seq, turn=turn.number, step=turn.step, token=turn.token
                    )
                    ended = after_tools(self._tool_calls, turn, end_turn, context)
            except BaseException:
                self._end_step(turn)
                raise

    async def _step_boundary(self, turn: Turn, ended: StepResult | None) -> Sequence[Admitted] | None:
        """The step boundary: where steering, injected input and tool context enter the turn.

        `ended` is the step just run (None before the first step). Its tool context is queued
        for the next step after every result, in model order, and dropped when the turn is
        being aborted; then the step ends (`step/end`). The turn goes on when the model must
        answer tool results or next-step input is pending (steer and inject wait here, they
        never pre-empt a running step); at a natural stop `turn_stopping` may steer one more
        step. Everything pending for the next step is then claimed at once, plus one follow-up
        before the first step, and the `pre_step` hook, if any, admits the batch (`_admit`).

        Returns the admitted batch for the next step, or None when the turn ends here.
        """
        token = turn.token
        first = ended is None
        stopping = False  # the last step ended the turn unless input continues it
        if ended is not None:
            try:
                if ended.context and not token.cancelled:
                    self._inbox.insert(NEXT_STEP, ended.context, cause="tool")
            finally:
                self._end_step(turn)
            if ended.kind == "aborted" or token.cancelled:
                raise TurnAborted
            if ended.kind == "error":
                turn.reason = {"kind": "error", "error": dict(ended.error or {})}
                return None
            if ended.kind == "max_tokens":
                turn.reason = {"kind": "max_tokens"}  # sticky: a later step's normal stop keeps it
            stopping = not (ended.kind == "tools" and not ended.concluded)
            if stopping and not self._inbox.has_step_input():
                hook = self._hooks.get("turn_stopping")
                if hook is None:
                    return None
                await call_sync_or_async(
                    hook,
                    TurnStoppingContext(turn.number, turn.step, token, self._session, turn.steer, STOP_REASONS[ended.kind]),
                )
                if token.cancelled:
                    raise TurnAborted
                if not self._inbox.has_step_input():
                    return None
        claimed = self._inbox.claim(first_step=first, turn=turn.number)
        if first and claimed and self.runs:
            turn.run = attach_run(self.runs, turn.number, claimed, self._tool_calls)
        if token.cancelled:
            raise TurnAborted  # cancelled by an observer of turn/start or of the claim itself
        if first and not claimed:
            return None  # an empty first claim: turn/start + turn/end {completed}, no step
        hook = self._hooks.get("pre_step")
        if hook is None:
            # A tuple, not a list: nothing the GC keeps tracking while the step runs; () if empty.
            batch: Sequence[Admitted] | None = tuple([(message, (seq,)) for message, seq in claimed]) if claimed else ()
        else:
            batch = await admit(turn, claimed, hook, self._session, self._inbox)
        if batch is None or (not batch and (first or stopping)):
            return None  # nothing admitted and nothing for the model to answer: no model call
        if token.cancelled:
            raise TurnAborted
        return batch

    # -- a step -------------------------------------------------------------------------------

    def _start_step(self, turn: Turn) -> None:
        self._append(STEP_START, {"turn": turn.number, "step": turn.step})
        if self._hub.maybe_listening:
            self._hub.emit("step_start", turn=turn.number, step=turn.step)

    async def _run_step(self, turn: Turn, batch: Sequence[Admitted]) -> StepResult | Event:
        """Log the admitted batch, call the model: the step's result, or the logged response whose
        calls `_run_steps` runs once this returned (the request and stream freed). A step is ended
        at the next step boundary, or by `_run_steps` if it raises (`step/end` before `turn/end`)."""
        number, step = turn.number, turn.step
        for message, seqs in batch:
            event = self._append(USER_MESSAGE, message, source_event_seqs=seqs)
            if self._hub.maybe_listening:
                self._hub.emit("message", turn=number, step=step, message=message, event_type=USER_MESSAGE, seq=event.seq)
        response = await self._call_model(turn)
        if isinstance(response, StepResult):
            return response
        ended = answer_without_tools(turn, response)
        if ended is None:
            return response
        return ended if isinstance(ended, StepResult) else await refuse_calls(self._tool_calls, turn, response, ended)

    def _end_step(self, turn: Turn) -> None:
        try:
            self._append(STEP_END, {"turn": turn.number, "step": turn.step})
        finally:
            if self._hub.maybe_listening:
                self._hub.emit("step_end", turn=turn.number, step=turn.step)

    def _log_header(self, config: Mapping[str, Any], specs: tuple[Mapping[str, Any], ...]) -> None:
        if config is self._logged_config and specs is self._logged_specs:
            return  # the very settings of the header this agent logged last: nothing changed
        header = freeze({"system": self._system, "tools": list(specs), "config": dict(config)})
        if self._last_header is None:
            reason = "resume" if self._session.request_header is not None else "initial"
        elif header != self._last_header:
            reason = "change"
        else:
            return
        self._append(REQUEST_HEADER, {"header": header, "reason": reason})
        self._last_header = header
        self._logged_config = config
        self._logged_specs = specs

    async def _call_model(self, turn: Turn) -> StepResult | Event:
        token = turn.token
        attempt = 0
        overflowed = False  # the provider said the request was too large, and it was compacted
        while True:
            attempt += 1
            request = await self._prepare_request(turn, attempt)
            if isinstance(request, StepResult):
                return request
            assembler = StreamAssembler()
            chunk_seqs: list[int] = []
            outcome = await self._stream(turn, request, assembler, chunk_seqs)
            if outcome is _INTERRUPTED:
                return self._keep_interrupted_prefix(turn, assembler, chunk_seqs)
            failed = failed_response(outcome, assembler)
            if failed is not None:
                error, info = failed
            else:
                try:
                    content = assembler.final_content()
                except MalformedResponseError as exc:  # refused: it could never be sent back
                    error, info = exc, error_info(exc)
                else:
                    return self._log_response(turn, assembler, content, chunk_seqs)
            # A failed response's output is discarded (its chunks stay in the log, uncited).
            if info.get("code") == CONTEXT_WINDOW_EXCEEDED and self._compactor is not None and not overflowed:
                overflowed = True  # compact once and retry; a second overflow ends the step in error
                if await self._compactor.on_overflow(turn.number, token):
                    continue
            hook = self._hooks.get("request_error")
            retry = hook is not None and bool(await call_sync_or_async(hook, RequestErrorContext(turn.number, turn.step, attempt, error, token)))
            if token.cancelled:
                return STEPPED["aborted"]  # never an interrupted prefix on the error path
            if not retry:
                return StepResult("error", error=info)

    async def _prepare_request(self, turn: Turn, attempt: int) -> Any:
        """The request of this attempt, built from the log after its header is logged; or the
        `StepResult` that ends the step before any request (a cancel, a run's refusal)."""
        token = turn.token
        if self._tool_refresh is not None and (specs := await self._tool_refresh()) is not None:
            self._tool_specs = specs
            self._logged_config = None  # the header changed: `_log_header` compares and logs it
        config: Mapping[str, Any] = self._config
        hook = self._hooks.get("request")
        if hook is not None:
            ctx = RequestContext(
                turn.number, turn.step, attempt, self._system, self._tool_specs,
                tuple(self._session.messages()), token, dict(self._config),
            )
            config = await request_hook_config(hook, ctx)
        if token.cancelled:
            return STEPPED["aborted"]
        specs, run = self._tool_specs, turn.run
        if run is not None and run.active:
            config, specs = run.config_for(config), run.tools_for(specs)
            refused = run.before_request(turn.step)
            if refused is not None:
                return StepResult("error", error=refused)
        self._log_header(config, specs)
        if self._compactor is not None:
            await self._compactor.before_request(turn.number, token)  # a cancel cuts the stream below
        # No durability point for a file store: a step's is before its tools run (issue 37).
        if (synced := request_durability_point(self._session)) is not None:
            await synced
        request = project_request(self._session)
        if self._hub.maybe_listening:
            self._hub.emit("request", turn=turn.number, step=turn.step, request=request)
        return request

    # -- the stream ---------------------------------------------------------------------------

    async def _stream(
        self, turn: Turn, request: Any, assembler: StreamAssembler, chunk_seqs: list[int]
    ) -> object:
        """Read one response into `assembler`, logging each chunk.

        Returns None when the response was read to its end, `_INTERRUPTED` when the cancel
        token cut it, or the exception the model raised.
        """
        token = turn.token
        if token.cancelled:
            return _INTERRUPTED
        try:
            stream = self._model.stream(request, token)
        except Exception as exc:
            return exc
        # The loop runs other tasks at least once a model call, as a model and tools may never wait:
        # unless it ran since the last read (a tool batch waits for its bodies), it runs now.
        if not self._loop_ran:
            await asyncio.sleep(0)
            if token.cancelled:
                return _INTERRUPTED  # cut before the read began: nothing was read
        self._loop_ran = False
        # The read is awaited in place, and the token cuts it at once (`read_until_cut`).
        try:
            if not await read_until_cut(self._read(turn, stream, assembler, chunk_seqs), token):
                return _INTERRUPTED
        except Exception as exc:
            return exc
        return None

    async def _read(self, turn: Turn, stream: Any, assembler: StreamAssembler, chunk_seqs: list[int]) -> None:
        number, step = turn.number, turn.step
        emit = self._hub.emit if self._hub.maybe_listening else None
        try:
            async for chunk in stream:
                used = assembler.add(chunk)
                try:
                    event = self._append(ASSISTANT_CHUNK, {"turn": number, "step": step, "chunk": chunk})
                except (TypeError, ValueError) as exc:
                    raise ModelError(f"model stream: chunk is not lossless JSON: {exc}", code="bad_chunk") from exc
                chunk_seqs.append(event.seq)
                if emit is not None and used:
                    emit("delta", turn=number, step=step, chunk=event.data["chunk"])
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def _keep_interrupted_prefix(self, turn: Turn, assembler: StreamAssembler, chunk_seqs: list[int]) -> StepResult:
        """A cut response: its visible prefix becomes an ``interrupted`` assistant message."""
        if assembler.has_visible_prefix:
            message = create_assistant_message(
                assembler.prefix_content(), provider=self._model.provider, model=self._model.model
            )
            data: dict[str, Any] = {"turn": turn.number, "step": turn.step, "message": message, "interrupted": True}
            if assembler.usage is not None:
                data["usage"] = assembler.usage
            event = self._append(ASSISTANT_MESSAGE, data, source_event_seqs=tuple(chunk_seqs))
            self._hub.emit(
                "message", turn=turn.number, step=turn.step, message=message,
                event_type=ASSISTANT_MESSAGE, seq=event.seq, interrupted=True,
            )
        return STEPPED["aborted"]

    def _log_response(
        self, turn: Turn, assembler: StreamAssembler, content: list[dict[str, Any]], chunk_seqs: list[int]
    ) -> Event:
        """A response read to its end: log the assistant message (citing its chunks); its event."""
        message = create_assistant_message(
            content,
            provider=self._model.provider,
            model=self._model.model,
            replay_state=assembler.replay_state,
        )
        data: dict[str, Any] = {
            "turn": turn.number, "step": turn.step, "message": message, "finish_reason": assembler.finish_reason,
        }
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        event: Event = self._append(ASSISTANT_MESSAGE, data, source_event_seqs=tuple(chunk_seqs))
        if self._hub.maybe_listening:
            self._hub.emit("message", turn=turn.number, step=turn.step, message=message, event_type=ASSISTANT_MESSAGE, seq=event.seq)
        return event  # holds all the tools need (untracked by the GC, unlike a tuple of them)


_INTERRUPTED = object()  # _stream's answer when the cancel token cut the response


__all__ = ["TurnRunner"]
