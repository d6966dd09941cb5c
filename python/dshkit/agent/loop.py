"""`Agent`: the turn/step loop over a session log, a model and tools (asyncio).

The loop writes everything it does to the session *before* acting on it, and builds every model
request from the log alone (`project_request`), so any request can be rebuilt, equal, from the
log prefix that preceded it. Identity is the caller's: the loop never mints or changes an id of
input it receives; it creates (and so mints ids for) only the assistant messages and tool results.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from dshkit.agent.assembly import StreamAssembler
from dshkit.agent.cancel import CancelToken
from dshkit.agent.events import AgentEvent, EventHub, EventStream
from dshkit.agent.hooks import (
    Enter,
    Hook,
    PreStepContext,
    Reject,
    RequestContext,
    RequestErrorContext,
    TurnStoppingContext,
    call_hook,
    check_hooks,
)
from dshkit.agent.inbox import NEXT_STEP, NEXT_TURN, Inbox, check_user_message
from dshkit.agent.tools import Tool, ToolContext, ToolOutput, call_tool_body, check_tools, tool_content
from dshkit.llm import Message, create_assistant_message, create_tool_result_message, freeze
from dshkit.models.protocol import Model, ModelError
from dshkit.session import Session, project_request

_log = logging.getLogger("dshkit.agent")

IDLE = "idle"
RUNNING = "running"

# Turn outcomes after which the driver starts the next turn when input is pending (rule: after
# an aborted, failed, blocked or step-less turn pending work stays parked until the next wake).
_CONTINUING_OUTCOMES = ("completed", "max_tokens")


class _TurnAborted(Exception):
    """Internal: the turn's cancel token fired at a checkpoint."""


@dataclass
class _StepResult:
    kind: str  # "stop" | "tools" | "max_tokens" | "aborted" | "error"
    concluded: bool = False  # a tool asked to end the turn
    error: Mapping[str, Any] | None = None


@dataclass
class _CallResult:
    content: Any
    is_error: bool = False
    error: Mapping[str, str] | None = None
    meta: Mapping[str, Any] | None = None
    context: tuple[Message, ...] = ()
    end_turn: bool = False
    call_seq: int | None = None


@dataclass
class _Turn:
    number: int
    token: CancelToken
    step: int = 0
    stepped: bool = False
    reason: dict[str, Any] = field(default_factory=lambda: {"kind": "completed"})


def _error_info(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ModelError):
        info: dict[str, Any] = dict(exc.to_info())
        info["name"] = type(exc).__name__
        return info
    return {"code": "exception", "name": type(exc).__name__, "message": str(exc)}


class Agent:
    """An agent: a model, tools and hooks driving turns over a durable session log.

    `followup(message)` queues a message for its own turn and wakes the agent; `steer(message)`
    queues for the next step boundary and wakes; `inject(message)` queues for the next step
    boundary without waking. Each takes a complete user-role `Message` and keeps its id.
    """

    def __init__(
        self,
        model: Model,
        *,
        session: Session | None = None,
        tools: Iterable[Tool] = (),
        system: str | None = None,
        hooks: Mapping[str, Hook] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if not (
            callable(getattr(model, "stream", None))
            and isinstance(getattr(model, "provider", None), str)
            and isinstance(getattr(model, "model", None), str)
        ):
            raise TypeError(
                f"Agent model: expected a model with str 'provider' and 'model' and a stream(request, cancel) method, "
                f"got {type(model).__name__}"
            )
        if system is not None and not isinstance(system, str):
            raise TypeError(f"Agent system: expected a str or None, got {type(system).__name__}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"Agent config: expected a mapping of call settings, got {type(config).__name__}")
        if session is not None and not isinstance(session, Session):
            raise TypeError(f"Agent session: expected a dshkit.session.Session, got {type(session).__name__}")
        self._model = model
        self._session = session if session is not None else Session()
        self._tools = check_tools(tools)
        self._tool_specs = tuple(tool.spec for tool in self._tools.values())
        self._system = system
        self._hooks = check_hooks(hooks)
        self._config = dict(freeze(dict(config or {})))
        self._hub = EventHub()
        self._inbox = Inbox(self._session, self._hub)

        self._driver: asyncio.Task[None] | None = None
        # Futures of coroutines waiting for the driver or a maintenance run to end. Plain
        # futures, not an asyncio.Event or Lock: those bind to the first event loop that waits
        # on them, and an agent may outlive one `asyncio.run`.
        self._state_waiters: list[asyncio.Future[None]] = []
        self._token: CancelToken | None = None
        self._aborting = False
        self._latched = False
        self._maintenance = False
        self._wake_requested = False
        self._closed = False
        self._failure: BaseException | None = None
        self._last_header: Any = None
        self._logged_config: Any = None
        self._turn_number = max(
            (event.data["turn"] for event in self._session.events if event.type == "turn/start"), default=0
        )

    # -- public state -------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """``"idle"`` or ``"running"``."""
        return RUNNING if self._driver is not None else IDLE

    @property
    def session(self) -> Session:
        """The session log this agent writes to."""
        return self._session

    @property
    def inbox(self) -> Inbox:
        """Pending input (`next_turn`, `next_step`, `remove`, `replace`)."""
        return self._inbox

    @property
    def model(self) -> Model:
        """The model this agent calls."""
        return self._model

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agent's tools, in the order given."""
        return tuple(self._tools.values())

    # -- input --------------------------------------------------------------------------------

    def followup(self, message: Message) -> None:
        """Queue `message` for a turn of its own and wake the agent."""
        self._deliver(message, NEXT_TURN, wake=True, where="followup")

    def steer(self, message: Message) -> None:
        """Queue `message` for the next step boundary and wake the agent.

        Steering never pre-empts running tools: it enters after every result of the current step.
        While a turn is being aborted, a steer goes to the next turn instead.
        """
        self._deliver(message, NEXT_STEP, wake=True, where="steer")

    def inject(self, message: Message) -> None:
        """Queue context for the next step boundary without waking the agent."""
        self._deliver(message, NEXT_STEP, wake=False, where="inject")

    def _deliver(self, message: Message, target: str, *, wake: bool, where: str) -> None:
        self._check_open(where)
        checked = self._inbox.check_new(message, where)
        starts_driver = wake and self._driver is None and not self._maintenance
        loop = self._running_loop(where) if starts_driver else None
        # A waking send while the current turn is being aborted belongs to the next turn and
        # runs once the abort has settled (it is "latched").
        latch = wake and self._aborting
        self._inbox.insert(NEXT_TURN if latch else target, (checked,))
        if latch:
            self._latched = True
        if not wake:
            return
        if self._maintenance:
            self._wake_requested = True
        elif loop is not None:
            self._start_driver(loop)

    def wake(self) -> bool:
        """Start a turn for pending input if the agent is idle; True when a turn was started.

        Input left pending after a restart (or after a blocked, failed or aborted turn) stays
        parked until the next `followup`/`steer` or this call.
        """
        self._check_open("wake")
        if self._driver is not None or self._maintenance or not len(self._inbox):
            return False
        self._start_driver(self._running_loop("wake"))
        return True

    # -- control ------------------------------------------------------------------------------

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False) -> None:
        """Abort the running turn (the first cause wins); does nothing when idle.

        Everything already logged stays. Pending input is discarded durably unless `keep_inbox`;
        claimed input is never requeued either way.
        """
        if not isinstance(cause, str) or not cause:
            raise TypeError(f"cancel cause: expected a non-empty str, got {cause!r}")
        if self._driver is None or self._token is None:
            return
        self._aborting = True
        self._token.cancel(cause)
        if not keep_inbox:
            self._latched = False
            self._inbox.clear(self._token.cause or cause)

    async def when_idle(self) -> None:
        """Wait until the agent is idle (returns at once when it is).

        If the loop itself failed (the session could not be written, for instance) the error
        is raised here, once.
        """
        while self._driver is not None:
            await self._state_change()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    async def run_maintenance(self, fn: Callable[[], Any]) -> Any:
        """Run `fn()` (sync or async) while the agent is idle; returns its result.

        Waits for the running turn to finish first; input that would wake the agent meanwhile
        stays queued, with its ids, and runs after `fn` returns.
        """
        self._check_open("run_maintenance")
        if not callable(fn):
            raise TypeError(f"run_maintenance: expected a callable, got {type(fn).__name__}")
        while self._driver is not None or self._maintenance:
            await self._state_change()
        self._maintenance = True
        try:
            result = fn()
            if inspect.isawaitable(result):
                result = await result
            return result
        finally:
            self._maintenance = False
            wake, self._wake_requested = self._wake_requested, False
            if wake and len(self._inbox) and not self._closed:
                self._start_driver(asyncio.get_running_loop())
            self._notify_state_change()

    async def close(self, cause: str = "disposed") -> None:
        """Refuse further input and abort the running turn (as `cancel(cause)` does); waits for it."""
        if self._closed:
            return
        self._closed = True
        self._latched = False
        self.cancel(cause)
        self._latched = False  # a disposing cancel never latches
        while self._driver is not None:
            await self._state_change()

    # -- live events --------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[AgentEvent], object]) -> Callable[[], None]:
        """Call `callback(event)` for each live event; returns a function that unsubscribes."""
        return self._hub.subscribe(callback)

    def events(self) -> EventStream:
        """``async for event in agent.events()``: every live event from now on."""
        return self._hub.stream()

    # -- driver -------------------------------------------------------------------------------

    def _check_open(self, where: str) -> None:
        if self._closed:
            raise RuntimeError(f"{where}: the agent is closed")

    @staticmethod
    def _running_loop(where: str) -> asyncio.AbstractEventLoop:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                f"{where} wakes the agent and needs a running asyncio event loop "
                "(use inject() to queue without waking)"
            ) from None

    async def _state_change(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._state_waiters.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._state_waiters:
                self._state_waiters.remove(waiter)

    def _notify_state_change(self) -> None:
        waiters, self._state_waiters = self._state_waiters, []
        for waiter in waiters:
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_result(None)

    def _start_driver(self, loop: asyncio.AbstractEventLoop) -> None:
        token = CancelToken()
        self._token = token
        self._driver = loop.create_task(self._drive(token))

    async def _drive(self, token: CancelToken) -> None:
        try:
            while not token.cancelled and not self._closed and len(self._inbox):
                outcome = await self._run_turn(token)
                if outcome not in _CONTINUING_OUTCOMES:
                    break
        except Exception as exc:  # the loop itself failed (the log could not be written, ...)
            self._failure = exc
            _log.exception("agent loop failed")
        finally:
            relaunch = self._latched and len(self._inbox) > 0 and not self._closed
            self._latched = False
            self._aborting = False
            self._token = None
            self._driver = None
            if relaunch:
                self._start_driver(asyncio.get_running_loop())
            self._notify_state_change()

    # -- a turn -------------------------------------------------------------------------------

    def _append(self, event_type: str, data: Any, **kwargs: Any) -> Any:
        return self._session.append(event_type, data, **kwargs)

    async def _run_turn(self, token: CancelToken) -> str:
        """Run one turn; returns its outcome kind (``"stepless"`` for a turn without a step)."""
        self._turn_number += 1
        turn = _Turn(self._turn_number, token)
        self._append("turn/start", {"turn": turn.number})
        self._hub.emit("turn_start", turn=turn.number)
        failure: BaseException | None = None
        try:
            await self._turn_steps(turn)
        except _TurnAborted:
            pass
        except BaseException as exc:
            if not isinstance(exc, Exception):
                failure = exc  # the driver task itself is being cancelled: close the turn, re-raise
                token.cancel("task_cancelled")
            turn.reason = {"kind": "error", "error": _error_info(exc)}
        finally:
            if token.cancelled:
                # The first cause wins, even over a hook that threw after the cancel.
                turn.reason = {"kind": "aborted", "cause": token.cause}
            self._append("turn/end", {"turn": turn.number, "reason": turn.reason})
            self._hub.emit("turn_end", turn=turn.number, reason=turn.reason)
        if failure is not None:
            raise failure
        kind = turn.reason["kind"]
        return "stepless" if kind == "completed" and not turn.stepped else kind

    async def _turn_steps(self, turn: _Turn) -> None:
        token = turn.token
        while True:
            first = turn.step == 0
            claimed = self._inbox.claim(first_step=first, turn=turn.number)
            if first and not claimed:
                return  # an empty first claim: turn/start + turn/end {completed}, no step
            batch = await self._admit(turn, claimed)
            if batch is None:
                return
            if first and not batch:
                return
            if token.cancelled:
                raise _TurnAborted
            turn.step += 1
            turn.stepped = True
            result = await self._run_step(turn, batch)
            if result.kind == "aborted" or token.cancelled:
                raise _TurnAborted
            if result.kind == "error":
                turn.reason = {"kind": "error", "error": dict(result.error or {})}
                return
            if result.kind == "max_tokens":
                turn.reason = {"kind": "max_tokens"}
                return
            if (result.kind == "tools" and not result.concluded) or self._inbox.has_step_input():
                continue
            hook = self._hooks.get("turn_stopping")
            if hook is not None:
                await call_hook(
                    hook, TurnStoppingContext(turn.number, turn.step, token, self._session, self.steer)
                )
                if token.cancelled:
                    raise _TurnAborted
                if self._inbox.has_step_input():
                    continue
            return

    async def _admit(self, turn: _Turn, claimed: list[tuple[Message, int]]) -> list[tuple[Message, tuple[int, ...]]] | None:
        """Run `pre_step` over the claimed batch; the final batch with the seqs each cites.

        Returns None when the hook rejected (the turn then ends ``blocked``).
        """
        hook = self._hooks.get("pre_step")
        if hook is None:
            return [(message, (seq,)) for message, seq in claimed]
        messages = tuple(message for message, _ in claimed)
        ctx = PreStepContext(messages, turn.number, turn.step + 1, turn.token, self._session)
        result = await call_hook(hook, ctx)
        if turn.token.cancelled:
            raise _TurnAborted
        if isinstance(result, Reject):
            turn.reason = {"kind": "blocked"} if result.reason is None else {"kind": "blocked", "message": result.reason}
            return None
        if not isinstance(result, Enter):
            raise TypeError(f"pre_step hook: expected Enter(messages) or Reject(), got {type(result).__name__}")
        claims = {message.id: (message, seq) for message, seq in claimed}
        seen: set[str] = set()
        batch: list[tuple[Message, tuple[int, ...]]] = []
        for index, message in enumerate(result.messages):
            where = f"pre_step Enter messages[{index}]"
            check_user_message(message, where)
            if message.id in seen:
                raise ValueError(f"{where}: message id {message.id} appears twice in the batch")
            seen.add(message.id)
            claim = claims.get(message.id)
            if claim is not None:
                original, seq = claim
                if message.role != original.role or message.source != original.source:
                    raise ValueError(
                        f"{where}: a different message under claimed id {message.id}; a rewrite keeps the "
                        "id, role and source and changes only the content (message.with_content(...))"
                    )
                batch.append((message, (seq,)))
            else:
                if self._inbox.knows(message.id):
                    raise ValueError(
                        f"{where}: added context needs an id new to the session; {message.id} is already "
                        "pending or logged (create a new message for added context)"
                    )
                batch.append((message, ()))
        return batch

    # -- a step -------------------------------------------------------------------------------

    async def _run_step(self, turn: _Turn, batch: list[tuple[Message, tuple[int, ...]]]) -> _StepResult:
        number, step = turn.number, turn.step
        self._append("step/start", {"turn": number, "step": step})
        self._hub.emit("step_start", turn=number, step=step)
        try:
            for message, seqs in batch:
                event = self._append("user/message", message, source_event_seqs=seqs)
                self._hub.emit("message", turn=number, step=step, message=message, event_type="user/message", seq=event.seq)
            return await self._call_model(turn)
        finally:
            # Always attempted, before turn/end, whatever happened in the step.
            try:
                self._append("step/end", {"turn": number, "step": step})
            finally:
                self._hub.emit("step_end", turn=number, step=step)

    def _log_header(self, config: Mapping[str, Any]) -> None:
        if config is self._logged_config:
            return  # the very settings of the header this agent logged last: nothing changed
        header = freeze({"system": self._system, "tools": list(self._tool_specs), "config": dict(config)})
        if self._last_header is None:
            reason = "resume" if self._session.request_header is not None else "initial"
        elif header != self._last_header:
            reason = "change"
        else:
            return
        self._append("request/header", {"header": header, "reason": reason})
        self._last_header = header
        self._logged_config = config

    async def _call_model(self, turn: _Turn) -> _StepResult:
        token = turn.token
        attempt = 0
        while True:
            attempt += 1
            config: Mapping[str, Any] = self._config
            hook = self._hooks.get("request")
            if hook is not None:
                ctx = RequestContext(
                    turn.number, turn.step, attempt, self._system, self._tool_specs,
                    tuple(self._session.messages()), dict(self._config),
                )
                returned = await call_hook(hook, ctx)
                if returned is None:
                    config = ctx.config
                elif isinstance(returned, Mapping):
                    config = returned
                else:
                    raise TypeError(
                        f"request hook: expected None or a mapping of call settings, got {type(returned).__name__}"
                    )
            if token.cancelled:
                return _StepResult("aborted")
            self._log_header(config)
            # Durability point: the log is on disk before the model sees the request.
            self._session.sync()
            request = project_request(self._session)
            self._hub.emit("request", turn=turn.number, step=turn.step, request=request)
            assembler = StreamAssembler()
            chunk_seqs: list[int] = []
            outcome = await self._stream(turn, request, assembler, chunk_seqs)
            if outcome is _INTERRUPTED:
                return self._keep_interrupted_prefix(turn, assembler, chunk_seqs)
            if isinstance(outcome, BaseException):
                error: BaseException = outcome
                info = _error_info(outcome)
            elif assembler.finish_reason == "error":
                info = {"code": "model_error", "message": "model error", **(assembler.error or {})}
                error = ModelError(str(info["message"]), code=str(info["code"]))
            else:
                return await self._complete_response(turn, assembler, chunk_seqs)
            # A failed response's output is discarded (its chunks stay in the log, uncited).
            retry = await self._should_retry(turn, attempt, error)
            if token.cancelled:
                return _StepResult("aborted")  # never an interrupted prefix on the error path
            if not retry:
                return _StepResult("error", error=info)

    async def _should_retry(self, turn: _Turn, attempt: int, error: BaseException) -> bool:
        hook = self._hooks.get("request_error")
        if hook is None:
            return False
        return bool(await call_hook(hook, RequestErrorContext(turn.number, turn.step, attempt, error, turn.token)))

    async def _stream(
        self, turn: _Turn, request: Any, assembler: StreamAssembler, chunk_seqs: list[int]
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
        # The stream is read in a task of its own so that cancel() can cut it at once, even
        # when the model never looks at its cancel signal.
        reader = asyncio.ensure_future(self._read(turn, stream, assembler, chunk_seqs))
        unregister = token.on_cancel(reader.cancel)
        try:
            await reader
        except asyncio.CancelledError:
            # Either the token cut the reader (carry on: keep the prefix) or this driver task
            # itself is being cancelled (propagate).
            if not token.cancelled or _being_cancelled():
                raise
            return _INTERRUPTED
        except Exception as exc:
            return exc
        finally:
            unregister()
        if token.cancelled and not assembler.finished:
            return _INTERRUPTED  # the model stopped early on its own when it saw the cancel
        return None

    async def _read(self, turn: _Turn, stream: Any, assembler: StreamAssembler, chunk_seqs: list[int]) -> None:
        number, step = turn.number, turn.step
        emit = self._hub.emit if self._hub.active else None
        try:
            async for chunk in stream:
                used = assembler.add(chunk)
                try:
                    event = self._append("assistant/chunk", {"turn": number, "step": step, "chunk": chunk})
                except (TypeError, ValueError) as exc:
                    raise ModelError(f"model stream: chunk is not lossless JSON: {exc}", code="bad_chunk") from exc
                chunk_seqs.append(event.seq)
                if emit is not None and used:
                    emit("delta", turn=number, step=step, chunk=event.data["chunk"])
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    def _keep_interrupted_prefix(self, turn: _Turn, assembler: StreamAssembler, chunk_seqs: list[int]) -> _StepResult:
        if assembler.has_visible_prefix:
            message = create_assistant_message(
                assembler.prefix_content(), provider=self._model.provider, model=self._model.model
            )
            data: dict[str, Any] = {"turn": turn.number, "step": turn.step, "message": message, "interrupted": True}
            if assembler.usage is not None:
                data["usage"] = assembler.usage
            event = self._append("assistant/message", data, source_event_seqs=tuple(chunk_seqs))
            self._hub.emit(
                "message", turn=turn.number, step=turn.step, message=message,
                event_type="assistant/message", seq=event.seq, interrupted=True,
            )
        return _StepResult("aborted")

    async def _complete_response(self, turn: _Turn, assembler: StreamAssembler, chunk_seqs: list[int]) -> _StepResult:
        message = create_assistant_message(
            assembler.final_content(),
            provider=self._model.provider,
            model=self._model.model,
            replay_state=assembler.replay_state,
        )
        data: dict[str, Any] = {
            "turn": turn.number, "step": turn.step, "message": message, "finish_reason": assembler.finish_reason,
        }
        if assembler.usage is not None:
            data["usage"] = assembler.usage
        event = self._append("assistant/message", data, source_event_seqs=tuple(chunk_seqs))
        self._hub.emit("message", turn=turn.number, step=turn.step, message=message, event_type="assistant/message", seq=event.seq)
        if assembler.finish_reason == "max_tokens":
            return _StepResult("max_tokens")
        calls = message.tool_calls
        if not calls:
            return _StepResult("stop")
        return await self._run_tools(turn, calls, event.seq)

    # -- tools --------------------------------------------------------------------------------

    async def _run_tools(self, turn: _Turn, calls: tuple[Any, ...], assistant_seq: int) -> _StepResult:
        """Run a response's tool calls; results are committed in model order as they are ready.

        Every call ends with a result in the log, whatever stops the batch: a call never started
        gets "aborted before dispatch", and a call whose body could not finish (this task was
        cancelled, or the log failed) gets "aborted while running".
        """
        token = turn.token
        results: list[_CallResult | None] = [None] * len(calls)
        committed = 0
        running: dict[asyncio.Future[_CallResult], tuple[int, int]] = {}  # task -> (index, call seq)

        def commit_ready() -> None:
            nonlocal committed
            while committed < len(calls) and results[committed] is not None:
                self._commit_result(turn, calls[committed], results[committed], assistant_seq)  # type: ignore[arg-type]
                committed += 1

        try:
            for segment in self._segments(calls):
                if token.cancelled:
                    break  # no new call starts after a cancel
                call_seqs = [self._log_call(turn, calls[index]) for index in segment]
                # Durability point: every started call is on disk before its body runs.
                self._session.sync()
                running = {
                    asyncio.ensure_future(self._run_call(turn, calls[index], seq)): (index, seq)
                    for index, seq in zip(segment, call_seqs)
                }
                pending = set(running)
                while pending:
                    # asyncio.wait, unlike awaiting the task, tells a body that raised
                    # CancelledError itself (the task is done) from this driver being cancelled
                    # (wait raises), on Python 3.10 too.
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        index, seq = running[task]
                        results[index] = _task_result(task, seq)
                    commit_ready()
        except BaseException:
            try:
                self._answer_every_call(token, results, running)
                commit_ready()
            except Exception:
                _log.exception("agent loop: could not log results for the unanswered tool calls")
            raise
        self._answer_every_call(token, results, running)
        commit_ready()
        # Context produced during the batch enters at the next step boundary, after every
        # result, in model order (dropped if the turn is being aborted: there is no next step).
        context: dict[str, Message] = {}
        for result in results:
            for message in result.context if result is not None else ():
                context.setdefault(message.id, message)  # two tools may hand back one message: it enters once
        if context and not token.cancelled:
            self._inbox.insert(NEXT_STEP, tuple(context.values()), cause="tool")
        concluded = any(result is not None and result.end_turn for result in results)
        return _StepResult("tools", concluded=concluded)

    @staticmethod
    def _answer_every_call(
        token: CancelToken,
        results: list[_CallResult | None],
        running: Mapping[asyncio.Future[_CallResult], tuple[int, int]],
    ) -> None:
        """Fill in an error result for every call that has none (cancelling bodies still running)."""
        cause = token.cause or "cancelled"
        for task, (index, seq) in running.items():
            if results[index] is None:
                task.cancel()
                results[index] = _CallResult(
                    "Tool call interrupted: the agent stopped while it was running; its outcome is unknown. "
                    "Run it again only if it is safe to repeat.",
                    is_error=True,
                    error={"name": "Aborted", "code": "aborted_while_running"},
                    call_seq=seq,
                )
        for index, result in enumerate(results):
            if result is None:
                results[index] = _CallResult(
                    f"Tool call not run: the turn was aborted ({cause}) before it started. "
                    "Run it again if it is still needed.",
                    is_error=True,
                    error={"name": "Aborted", "code": "aborted_before_dispatch"},
                )

    def _segments(self, calls: tuple[Any, ...]) -> list[list[int]]:
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

    def _log_call(self, turn: _Turn, call: Any) -> int:
        event = self._append(
            "tool/call",
            {"turn": turn.number, "step": turn.step, "call_id": call["id"], "name": call["name"], "arguments": call["arguments"]},
        )
        self._hub.emit("tool_call", turn=turn.number, step=turn.step, call_id=call["id"], name=call["name"], seq=event.seq)
        return int(event.seq)

    async def _run_call(self, turn: _Turn, call: Any, call_seq: int) -> _CallResult:
        name = call["name"]
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return _CallResult(
                f"Unknown tool {name!r} (available: {known}).", is_error=True,
                error={"name": "UnknownTool", "code": "unknown_tool"}, call_seq=call_seq,
            )
        raw = call["arguments"]
        try:
            arguments = json.loads(raw) if raw.strip() else {}
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
        ctx = ToolContext(call["id"], name, turn.number, turn.step, turn.token, self._session)
        try:
            output = await call_tool_body(tool, arguments, ctx)
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
                    tool_content(output.content), output.is_error, None, meta, output.context,
                    output.end_turn, call_seq,
                )
            return _CallResult(tool_content(output), call_seq=call_seq)
        except Exception as exc:
            return _CallResult(
                f"{type(exc).__name__}: {exc}", is_error=True,
                error={"name": type(exc).__name__, "code": "tool_error"}, call_seq=call_seq,
            )

    def _commit_result(self, turn: _Turn, call: Any, result: _CallResult, assistant_seq: int) -> None:
        try:
            message = create_tool_result_message(call["id"], result.content, is_error=result.is_error)
        except (TypeError, ValueError) as exc:
            # The tool returned blocks that are not valid content: the model gets the reason.
            result = _CallResult(
                f"{type(exc).__name__}: tool returned invalid content: {exc}", is_error=True,
                error={"name": type(exc).__name__, "code": "invalid_content"}, call_seq=result.call_seq,
            )
            message = create_tool_result_message(call["id"], result.content, is_error=True)
        data: dict[str, Any] = {"turn": turn.number, "step": turn.step, "message": message}
        if result.error is not None:
            data["error"] = result.error
        if result.meta is not None:
            data["meta"] = result.meta
        seqs = (result.call_seq,) if result.call_seq is not None else (assistant_seq,)
        event = self._append("tool/result", data, source_event_seqs=seqs)
        self._hub.emit("message", turn=turn.number, step=turn.step, message=message, event_type="tool/result", seq=event.seq)


_INTERRUPTED = object()  # _stream's answer when the cancel token cut the response


def _task_result(task: asyncio.Future[_CallResult], call_seq: int) -> _CallResult:
    """The result of a finished tool-call task; a body that raised CancelledError is an error result."""
    if task.cancelled():
        return _CallResult(
            "CancelledError: the tool body was cancelled", is_error=True,
            error={"name": "CancelledError", "code": "tool_error"}, call_seq=call_seq,
        )
    return task.result()


def _being_cancelled() -> bool:
    """Whether the current task has a cancellation request of its own pending (Python 3.11+).

    On 3.10 this cannot be told apart from the token's cancel of the reader; the turn is then
    treated as cancelled by the token, and still closed properly.
    """
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling()) if cancelling is not None else False


__all__ = ["IDLE", "RUNNING", "Agent"]
