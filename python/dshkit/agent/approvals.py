"""Approvals: which calls need a person, the asks waiting for one, and the decisions, all in the log.

A policy is ``"always"`` (runs without asking), ``"ask"`` (waits for `Agent.approve` or
`Agent.deny`), ``"never"`` (denied without asking), or a callable taking the `PreToolContext`
and returning one of those or `Allow()` / `Ask(reason)` / `Deny(reason)`. The policy of a call is
the first of: the tool's remembered policy (`approval/policy {tool, policy}` in the log), the
tool's own `approval`, the agent's `approval`. A session-wide remembered policy (no `tool`:
the original harness's `approval/policy`) then answers the asks: ``"never"`` denies them,
``"always"`` allows them. See docs/decisions/agent-tool-approvals.md for the whole order.

`ApprovalBook` writes ``approval/asked`` before a call waits, ``approval/decided`` when the person
(or a cancel) answers, ``approval/policy`` when an answer is remembered, and reads all three back
from the log when an agent starts on it, so an ask survives a restart of the process. The ask is
made durable before the call waits, and the decision before the call runs, in every store and
durability mode (a durability point, as before a model call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Union
from uuid import uuid4

from dshkit.agent._user_code import call_sync_or_async, durability_point
from dshkit.agent.notifications import NotificationHub
from dshkit.agent.tool_hooks import Allow, Ask, Decision, Deny, PreToolContext, as_decision, pre_tool_decision, strictest
from dshkit.session import Session
from dshkit.session._approval_state import AskRecord, open_turn_asks, remembered_policies
from dshkit.session.events import APPROVAL_ASKED, APPROVAL_DECIDED, APPROVAL_POLICY

PolicyName = Literal["always", "ask", "never"]
Policy = Union[PolicyName, Callable[[PreToolContext], Any]]
POLICY_NAMES = ("always", "ask", "never")


def check_policy(policy: object, where: str) -> Policy | None:
    """`policy` if it is a policy name, a callable or None, else `ValueError`/`TypeError` naming `where`."""
    if policy is None or callable(policy):
        return policy
    if isinstance(policy, str):
        if policy not in POLICY_NAMES:
            raise ValueError(f"{where}: expected one of {', '.join(POLICY_NAMES)} or a callable, got {policy!r}")
        return policy  # type: ignore[return-value]
    raise TypeError(f"{where}: expected 'always', 'ask', 'never' or a callable, got {type(policy).__name__}")


@dataclass(frozen=True)
class PendingApproval:
    """A call waiting for a person: what `Agent.pending_approvals()` lists."""

    call_id: str
    tool: str
    arguments: str  # exactly what the model wrote (the `tool/call`'s arguments)
    reason: str | None
    turn: int | None
    step: int | None
    id: str  # the `approval/asked` id its `approval/decided` names


def _decision_of(value: object, where: str) -> Decision:
    if value == "always":
        return Allow()
    if value == "ask":
        return Ask(None)
    if value == "never":
        return Deny(None)
    return as_decision(value, where)


class ApprovalBook:
    """One agent's approvals: the policy of each call, the asks its log holds, the waiting calls."""

    def __init__(self, session: Session, hub: NotificationHub, agent_policy: Policy | None, on_change: Callable[[], None]) -> None:
        self._session = session
        self._hub = hub
        self._agent_policy: Policy = agent_policy if agent_policy is not None else "always"
        self._on_change = on_change
        events = session.events
        self._asks: dict[str, AskRecord] = open_turn_asks(events)  # call id -> latest ask of the open turn
        self._per_tool, self._session_wide = remembered_policies(events)
        self._decided_here: dict[str, str | None] = {}  # ask id -> reason, for decisions this agent logged
        self._waiters: dict[str, asyncio.Future[tuple[str, str | None]]] = {}
        # Calls whose wait was stopped by their task's cancellation (a process shutting down), not
        # by the agent's cancel: their asks stay open in the log for the next process.
        self._abandoned: set[str] = set()
        self.version = 0  # counts remembered policies: what a cached view of the policies checks
        # Told when a call starts waiting for a person: the batch running it then logs the results
        # after it (a call that finished while this one was still on its way to the ask included).
        self.on_wait: Callable[[], None] | None = None

    # -- policy -----------------------------------------------------------------------------------

    def static_policy(self, tool_name: str, tool_policy: Policy | None) -> Policy:
        """The policy that applies to `tool_name` before any call (remembered, the tool's, the agent's)."""
        remembered = self._per_tool.get(tool_name)
        if remembered is not None:
            return remembered  # type: ignore[return-value]
        return tool_policy if tool_policy is not None else self._agent_policy

    def may_gate(self, tool_name: str, tool_policy: Policy | None) -> bool:
        """Whether a call of the tool can be anything but allowed by policy (else the check is skipped)."""
        return self.static_policy(tool_name, tool_policy) != "always"

    async def decide(self, tool_policy: Policy | None, ctx: PreToolContext) -> Decision:
        """The policy's decision for one call; a callable policy that raises denies (fails closed)."""
        policy = self.static_policy(ctx.name, tool_policy)
        if not callable(policy):
            return _decision_of(policy, "approval policy")
        try:
            return _decision_of(await call_sync_or_async(policy, ctx), f"approval policy of {ctx.name}")
        except Exception as exc:
            return Deny(f"the approval policy failed ({type(exc).__name__}: {exc}); the call is denied")

    async def settle(self, tool_policy: Policy | None, ctx: PreToolContext, hooks: Sequence[Any] = ()) -> tuple[str, str | None]:
        """Whether one call may run, with the reason: the strictest of its policy and the `pre_tool`
        `hooks`, then the session-wide policy, then (an ask) a person.

        The outcome is ``allowed``, ``denied`` (by policy or hook), or the person's ``allowed_once``,
        ``rejected`` or ``cancelled`` (`ask`).
        """
        decisions = [await self.decide(tool_policy, ctx)]
        if hooks:
            decisions.append(await pre_tool_decision(hooks, ctx))
        decision = self.session_override(strictest(decisions))
        if isinstance(decision, Allow):
            return "allowed", None
        if isinstance(decision, Deny):
            return "denied", decision.reason
        return await self.ask(ctx, decision.reason)

    def session_override(self, decision: Decision) -> Decision:
        """A session-wide remembered policy answers asks: ``never`` denies them, ``always`` allows them."""
        if isinstance(decision, Ask):
            if self._session_wide == "never":
                return Deny("the session's approval policy is 'never': calls that need approval are denied")
            if self._session_wide == "always":
                return Allow()
        return decision

    @property
    def has_session_policy(self) -> bool:
        """Whether a session-wide policy may change decisions (so every call is checked)."""
        return self._session_wide in ("always", "never")

    def remember(self, policy: str, tool: str | None = None) -> None:
        """Log `approval/policy` (for `tool`, or the whole session) and apply it from now on."""
        check_policy(policy, "approval policy")
        if not isinstance(policy, str):
            raise TypeError("a remembered approval policy is 'always', 'ask' or 'never', not a callable")
        data: dict[str, Any] = {"policy": policy}
        if tool is not None:
            if not isinstance(tool, str) or not tool:
                raise TypeError(f"approval policy tool: expected a non-empty str, got {tool!r}")
            data["tool"] = tool
        self._session.append(APPROVAL_POLICY, data)
        if tool is None:
            self._session_wide = policy
        else:
            self._per_tool[tool] = policy
        self.version += 1

    # -- asks ---------------------------------------------------------------------------------------

    def pending(self) -> list[PendingApproval]:
        """The asks still waiting for a decision, in the order they were asked."""
        return [
            PendingApproval(r.call_id, r.tool, r.arguments, r.reason, r.turn, r.step, r.id)
            for r in sorted(self._asks.values(), key=lambda record: record.seq)
            if r.outcome is None and not r.answered
        ]

    @property
    def waiting(self) -> bool:
        """Whether a call waits for a person (live, or left so in the log by an earlier process)."""
        return any(r.outcome is None and not r.answered for r in self._asks.values())

    @property
    def waiting_here(self) -> bool:
        """Whether calls wait for a person and each waits in this process: a turn resumed from a log
        an earlier process left waiting has reached every ask it has (until then, only the log
        says they wait)."""
        pending = [r.call_id for r in self._asks.values() if r.outcome is None and not r.answered]
        return bool(pending) and all(self.is_waiting(call_id) for call_id in pending)

    def prior_ask(self, call_id: str, turn: int, step: int) -> AskRecord | None:
        """The ask this very call already has in the log (a turn resumed after a restart)."""
        record = self._asks.get(call_id)
        if record is None or record.answered or record.turn != turn or record.step != step:
            return None
        return record

    def is_waiting(self, call_id: str) -> bool:
        """Whether call `call_id` waits for a person right now (in this process)."""
        return call_id in self._waiters or call_id in self._abandoned

    def decided_here(self, ask_id: str) -> bool:
        """Whether this agent logged the decision of ask `ask_id` (so the call has not run yet)."""
        return ask_id in self._decided_here

    def mark_answered(self, call_id: str) -> None:
        """The call's result is logged: its ask is settled."""
        record = self._asks.get(call_id)
        if record is not None:
            self._asks[call_id] = replace(record, answered=True)

    async def ask(self, ctx: PreToolContext, reason: str | None) -> tuple[str, str | None]:
        """Wait for the decision on one call (logging its ask first, unless the log has it); returns
        the outcome (``allowed_once``, ``rejected``, ``cancelled``) and the decision's reason."""
        if self.prior_ask(ctx.call_id, ctx.turn, ctx.step) is None:
            self._log_ask(ctx, reason)
            # Durability point: the ask is stored before the call waits (a store that holds
            # appends until `sync`, PostgreSQL's default, would lose it with the process).
            await self._durable(ctx.call_id)
        record = self._asks[ctx.call_id]  # a subscriber (or a person, during the sync) may have decided
        if record.outcome is not None:
            await self._durable(ctx.call_id)  # the decision is stored before the call runs
            return record.outcome, self._decided_here.get(record.id)
        future: asyncio.Future[tuple[str, str | None]] = asyncio.get_running_loop().create_future()
        self._waiters[record.call_id] = future

        def on_cancel() -> None:
            if not future.done():
                future.set_result(("cancelled", ctx.cancel.cause))

        unregister = ctx.cancel.on_cancel(on_cancel)
        self._on_change()
        if self.on_wait is not None:
            self.on_wait()
        try:
            outcome, why = await future
        except asyncio.CancelledError:
            self._abandoned.add(record.call_id)
            raise
        finally:
            unregister()
            self._waiters.pop(record.call_id, None)
        if outcome == "cancelled":
            self._log_decision(record.call_id, "cancelled", why)
        # Durability point: the decision is stored before the call runs (or is answered).
        await self._durable(record.call_id)
        self._on_change()
        return outcome, why

    async def _durable(self, call_id: str) -> None:
        """Make the log durable (`durability_point`); cancelled meanwhile, the ask stays open for the next process."""
        synced = durability_point(self._session)
        if synced is None:
            return
        try:
            await synced
        except asyncio.CancelledError:
            self._abandoned.add(call_id)
            raise

    def decide_pending(self, call_id: str, outcome: str, reason: str | None) -> None:
        """A person's decision on a pending ask: logged, then the waiting call (if any) resumes."""
        record = self._asks.get(call_id)
        if record is None or record.outcome is not None or record.answered:
            pending = ", ".join(approval.call_id for approval in self.pending()) or "none"
            raise ValueError(f"no approval is pending for call {call_id!r} (pending: {pending})")
        self._log_decision(call_id, outcome, reason)
        future = self._waiters.get(call_id)
        if future is not None and not future.done():
            future.set_result((outcome, reason))

    def _log_ask(self, ctx: PreToolContext, reason: str | None) -> AskRecord:
        ask_id = str(uuid4())
        data: dict[str, Any] = {
            "turn": ctx.turn, "step": ctx.step, "id": ask_id, "call_id": ctx.call_id, "tool": ctx.name,
            "arguments": ctx.raw_arguments,
        }
        if reason is not None:
            data["reason"] = reason
        event = self._session.append(APPROVAL_ASKED, data)
        record = AskRecord(ask_id, ctx.call_id, ctx.name, ctx.raw_arguments, reason, ctx.turn, ctx.step, int(event.seq))
        self._asks[ctx.call_id] = record
        if self._hub.maybe_listening:
            self._hub.emit(
                "approval_asked", turn=ctx.turn, step=ctx.step, call_id=ctx.call_id, tool=ctx.name,
                arguments=ctx.raw_arguments, reason=reason, id=ask_id,
            )
        return record

    def _log_decision(self, call_id: str, outcome: str, reason: str | None) -> None:
        record = self._asks[call_id]
        data: dict[str, Any] = {"id": record.id, "call_id": call_id, "outcome": outcome}
        if record.turn is not None:
            data["turn"] = record.turn
        if record.step is not None:
            data["step"] = record.step
        if reason is not None:
            data["reason"] = reason
        self._session.append(APPROVAL_DECIDED, data)
        self._asks[call_id] = replace(record, outcome=outcome)
        self._decided_here[record.id] = reason
        if self._hub.maybe_listening:
            self._hub.emit("approval_decided", turn=record.turn, step=record.step, call_id=call_id, outcome=outcome)
        self._on_change()


__all__ = ["POLICY_NAMES", "ApprovalBook", "PendingApproval", "Policy", "PolicyName", "check_policy"]
