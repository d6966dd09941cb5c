"""`Agent`: the public face of the agent loop: input, the driver task, waiters, status (asyncio).

The loop writes everything it does to the session *before* acting on it, and builds every model
request from the log alone (`project_request`), so any request can be rebuilt, equal, from the
log prefix that preceded it. Identity is the caller's: the loop never mints or changes an id of
input it receives; it creates (and so mints ids for) only the assistant messages and tool results.

Input is queued here (`followup` for a turn of its own, `steer`/`inject` for the next step
boundary); turns and steps run in `dshkit.agent._turn.turn`, tool calls in `dshkit.agent._tools.runner`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Callable, Final, Literal

from dshkit.agent._arguments import checked_arguments, listed_hooks
from dshkit.agent.approvals import ApprovalBook, PendingApproval, Policy, check_policy
from dshkit.agent._user_code import call_sync_or_async
from dshkit.agent.cancel import CancelToken
from dshkit.agent.compaction import Compaction, Compactor
from dshkit.agent.hooks import HookEntry, check_hooks
from dshkit.agent.notifications import AgentEvent, EventStream, NotificationHub
from dshkit.agent._input.inbox import NEXT_STEP, NEXT_TURN, Inbox
from dshkit.agent.result import RunResult
from dshkit.agent._turn.resume import finish_suspended_step, suspended_turn
from dshkit.agent.run import Runs
from dshkit.agent._run.state import RunState, wake_unclaimed
from dshkit.agent._tools.runner import ToolCallRunner
from dshkit.agent._tools.gate import ToolGate
from dshkit.agent._weak_call import WeakCall
from dshkit.agent.tools import Tool, check_timeout
from dshkit.agent.toolsets import Toolbox, ToolSource
from dshkit.agent._tracing import trace_agent
from dshkit.agent._turn.turn import TurnRunner
from dshkit.agent._turn.state import StepResult, Turn
from dshkit.llm import Message, freeze
from dshkit.models.protocol import Model
from dshkit.session import Session

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

_log = logging.getLogger("dshkit.agent")

AgentStatus = Literal["idle", "running", "awaiting_approval"]
IDLE: Final = "idle"
RUNNING: Final = "running"
AWAITING_APPROVAL: Final = "awaiting_approval"

# Turn outcomes after which the driver starts the next turn when input is pending (rule: after
# an aborted, failed, blocked or step-less turn pending work stays parked until the next wake).
_CONTINUING_OUTCOMES = ("completed", "max_tokens")


class Agent(Runs):
    """An agent: a model, tools and hooks driving turns over a durable session log.

    `run(prompt)` / `run_sync` / `run_stream` (`dshkit.agent.run.Runs`) run one prompt and
    return its `RunResult` (or raise its `RunError`).

    `followup(message)` queues a message for its own turn and wakes the agent; `steer(message)`
    queues for the next step boundary and wakes; `inject(message)` queues for the next step
    boundary without waking. Each takes a complete user-role `Message` and keeps its id.
    `tools` are `Tool`s and `ToolSource`s (an MCP server, say), whose lists are refreshed before
    each request. `model` may be a name, ``"openai:gpt-4.1-mini"`` (`dshkit.models.infer_model`).
    `tracer` (an OpenTelemetry `Tracer`) gets spans of turns, steps, model and tool calls; by
    default the global tracer provider's when one is installed, else none (`dshkit.agent._tracing`).
    """

    def __init__(
        self,
        model: Model | str,
        *,
        session: Session | None = None,
        tools: Iterable[Tool | ToolSource] = (),
        system: str | None = None,
        hooks: Mapping[str, HookEntry] | None = None,
        config: Mapping[str, Any] | None = None,
        compaction: Compaction | None = None,
        tracer: Tracer | None = None,
        approval: Policy | None = None,
        tool_timeout: float | None = None,
    ) -> None:
        model = checked_arguments(model, system, config, session, compaction)
        self._model = model
        self._session = session if session is not None else Session()
        toolbox = Toolbox(tools)  # Tools and ToolSources (e.g. an MCP server) whose lists may change
        self._tools = toolbox.by_name
        checked_hooks = check_hooks(hooks)
        frozen_config = dict(freeze(dict(config or {})))
        self._hub = NotificationHub()
        self._inbox = Inbox(self._session, self._hub)
        self._compactor = Compactor(compaction, model, self._session)
        # Approvals, tool hooks, validation and timeouts (dshkit.agent._tools.gate); the book reads the log's asks.
        self._approvals = ApprovalBook(
            self._session, self._hub, check_policy(approval, "Agent approval"), WeakCall(self._notify_state_change)
        )
        gate = ToolGate(
            self._approvals, listed_hooks(checked_hooks.get("pre_tool")), listed_hooks(checked_hooks.get("post_tool")),
            check_timeout(tool_timeout, "Agent tool_timeout"), tools=self._tools, knows=self._inbox.knows,
        )
        self._tool_calls = ToolCallRunner(self._session, self._hub, self._inbox, self._tools, gate)
        self._turns = TurnRunner(
            model,
            self._session,
            self._hub,
            self._inbox,
            checked_hooks,
            self._tool_calls,
            toolbox.specs(),
            system,
            frozen_config,
            compactor=self._compactor if compaction is not None else None,
            tool_refresh=toolbox.refresh if toolbox.has_sources else None,
        )
        trace_agent(self._hub, self._session, model, tracer)  # OpenTelemetry spans, only with a tracer

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

    # -- public state -------------------------------------------------------------------------

    @property
    def status(self) -> AgentStatus:
        """``"idle"``, ``"running"``, or ``"awaiting_approval"`` while a call waits for a person."""
        if self._approvals.waiting:
            return AWAITING_APPROVAL
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
    def runs(self) -> dict[str, RunState]:
        """The runs (`run`, `run_stream`) whose prompts wait for their turns, by prompt id."""
        return self._turns.runs

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The agent's tools, in the order given."""
        return tuple(self._tools.values())

    @property
    def tokens(self) -> int:
        """The size of the next request in tokens, by the token meter (`dshkit.agent._compaction.tokens`)."""
        return self._compactor.meter.reading()

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, if known (from `Compaction` or the model)."""
        return self._compactor.window

    @property
    def last_turn(self) -> RunResult[Any] | None:
        """The latest turn this agent ended, as a `RunResult` read from the log (None before any).

        For `followup` + `when_idle` users: its `status`, and `error` (the typed `RunError` a
        `run` would have raised) tell a failed turn from a finished one.
        """
        ended = self._turns.last_end
        return None if ended is None else RunResult(self._session, ended[0], ended[1])

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
        if self._resume_suspended():
            return True
        if self._driver is not None or self._maintenance or not len(self._inbox):
            return False
        self._start_driver(self._running_loop("wake"))
        return True

    # -- approvals ----------------------------------------------------------------------------

    def pending_approvals(self) -> list[PendingApproval]:
        """The calls waiting for a person's decision (also those an earlier process asked)."""
        return self._approvals.pending()

    def approve(self, call_id: str, *, remember: bool = False) -> None:
        """Let the waiting call `call_id` run (logs `approval/decided`); `remember` also allows its
        tool from now on, in this session (logs `approval/policy`). Continues a turn left waiting."""
        self._decide(call_id, "allowed_once", None, "always" if remember else None)

    def deny(self, call_id: str, reason: str | None = None, *, remember: bool = False) -> None:
        """Refuse the waiting call `call_id`: the model gets an error result with `reason`;
        `remember` also denies its tool from now on, in this session."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"deny reason: expected a str or None, got {type(reason).__name__}")
        self._decide(call_id, "rejected", reason, "never" if remember else None)

    def _decide(self, call_id: str, outcome: str, reason: str | None, remembered: str | None) -> None:
        tool = next((ask.tool for ask in self._approvals.pending() if ask.call_id == call_id), None)
        self._approvals.decide_pending(call_id, outcome, reason)
        if remembered is not None and tool is not None:
            self._approvals.remember(remembered, tool)
        self._resume_suspended()

    def _resume_suspended(self, cancelled: str | None = None) -> bool:
        """Continue a turn an earlier process left waiting for approval, when idle in a running loop."""
        if self._driver is not None or self._maintenance or self._closed or suspended_turn(self._session) is None:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False  # decided outside a loop: the turn continues at the next wake()
        self._start_driver(loop)
        if cancelled is not None and self._token is not None:
            self._token.cancel(cancelled)
        return True

    # -- control ------------------------------------------------------------------------------

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False) -> None:
        """Abort the running turn (the first cause wins); does nothing when idle.

        Everything already logged stays. Pending input is discarded durably unless `keep_inbox`;
        claimed input is never requeued either way.
        """
        if not isinstance(cause, str) or not cause:
            raise TypeError(f"cancel cause: expected a non-empty str, got {cause!r}")
        if self._driver is None and self._approvals.waiting and self._resume_suspended(cancelled=cause):
            return  # a turn an earlier process left waiting: its asked calls get their error results
        if self._driver is None or self._token is None:
            return
        self._aborting = True
        self._token.cancel(cause)
        if not keep_inbox:
            self._latched = False
            self._inbox.clear_soon(self._token.cause or cause)

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

    async def when_waiting(self) -> None:
        """Wait until the agent is idle or its turn waits for approval (`pending_approvals()`); a
        turn resumed from a log left waiting first reaches every call it asked about."""
        while self._driver is not None and not self._approvals.waiting_here:
            await self._state_change()

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
            return await call_sync_or_async(fn)
        finally:
            self._maintenance = False
            wake, self._wake_requested = self._wake_requested, False
            if wake and len(self._inbox) and not self._closed:
                self._start_driver(asyncio.get_running_loop())
            self._notify_state_change()

    async def compact(self, instructions: str | None = None) -> Message | None:
        """Summarize the oldest history now, as idle maintenance; the summary, or None if nothing to cut.

        Waits for the running turn like `run_maintenance`. `instructions` are added to the summary
        prompt. Raises `CompactionFailed` when no summary could be made (logged in `compaction/end`).
        """
        return await self.run_maintenance(  # type: ignore[no-any-return]
            lambda: self._compactor.summarize(None, CancelToken(), reason="manual", instructions=instructions)
        )

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
        self._tool_calls.suspended = False  # an earlier driver may have stopped while calls waited
        try:
            # A turn left waiting for approval is finished first: a follow-up never opens a turn inside it.
            suspended = suspended_turn(self._session)
            if suspended is not None:

                def finish(turn: Turn) -> Awaitable[StepResult]:
                    return finish_suspended_step(suspended, turn, self._tool_calls, self._approvals)

                outcome = await self._turns.resume_turn(token, self.steer, suspended.turn, suspended.step, finish)
                if outcome not in _CONTINUING_OUTCOMES:
                    return
            while not token.cancelled and not self._closed and len(self._inbox):
                outcome = await self._turns.run_turn(token, self.steer)
                if outcome not in _CONTINUING_OUTCOMES:
                    break
        except Exception as exc:  # the loop itself failed (the log could not be written, ...)
            self._failure = exc
            _log.exception("agent loop failed")
        finally:
            self._inbox.run_deferred_clear()
            relaunch = self._latched and len(self._inbox) > 0 and not self._closed
            self._latched = False
            self._aborting = False
            self._token = None
            self._driver = None
            wake_unclaimed(self._turns.runs)
            if relaunch:
                self._start_driver(asyncio.get_running_loop())
            self._notify_state_change()


__all__ = ["AWAITING_APPROVAL", "IDLE", "RUNNING", "Agent"]
