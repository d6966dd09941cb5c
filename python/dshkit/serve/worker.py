"""The worker's one workflow: open the session as its fenced writer, apply one request, run until settled.

`run_session_workflow(session_id, action)` is the DBOS workflow every request becomes. It has no
DBOS steps on purpose: the session log is the record of what happened, and every action is made
idempotent against it, so a workflow DBOS recovers after a crash simply runs again from the top:

- a message is delivered only if its id is in neither the log nor the inbox (exactly once);
- a decision is applied only while its call still waits; a cancel only while a turn is open;
- a turn the crash cut (repaired as ``interrupted`` when the session is opened) is continued once,
  by a continuation message whose id is derived from that turn's end, so the person's message is
  answered once, whichever worker (or how many recoveries) it takes.

The agent runs until it is idle or waits for a person's approval; then its loop is closed, which
leaves a waiting turn open in the log (suspended, as the agent documents), and the session closed.
While it runs, the workflow listens for DBOS messages on `CANCEL_TOPIC` (`DBOS.recv_async`): the
API sends one to every unfinished workflow of a session it is asked to cancel, so a cancel reaches
the turn running now, on whichever worker process or machine runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from dbos import DBOS

from dshkit import Message, create_user_message
from dshkit.agent import Agent
from dshkit.serve.places import SERVE_HEADER_FIELD, SessionPlace
from dshkit.session import Session, SessionError

AgentFactory = Callable[[Session], Any]
"""`factory(session) -> Agent` (or an awaitable of one): the agent that serves an opened session."""

logger = logging.getLogger("dshkit.serve")

_OPEN_PATIENCE_SEC = 60.0
_RETRY_DELAYS_SEC = (0.5, 1.0, 2.0, 4.0, 8.0)  # ~15 s in all: a database restart, a failover
CANCEL_TOPIC = "dshkit.cancel"
# How long one `recv` waits before it is renewed: each wait that ends empty records one DBOS step
# (a row), so a long wait keeps a long turn's record small; the listener is cancelled at the end.
_LISTEN_SEC = 3600.0
# A turn settled within this long never listens: listening costs DBOS a few queries and a row per
# workflow (on PostgreSQL it halved the turns per second of instant turns), and a cancel sent
# meanwhile is kept by DBOS until the listener starts (or answered by the queued cancel).
_LISTEN_AFTER_SEC = 0.25
_RUNTIME: dict[str, Any] = {}


def configure_runtime(agents: Mapping[str, AgentFactory], place: SessionPlace) -> None:
    """Tell this process's workflows which agents exist and where sessions live."""
    _RUNTIME["agents"] = dict(agents)
    _RUNTIME["place"] = place


WORKFLOW_NAME = "dshkit_serve_session"


@DBOS.workflow(name=WORKFLOW_NAME)
def run_session_workflow(session_id: str, action: dict[str, Any]) -> dict[str, Any]:
    """Apply `action` to the session and run its agent until it is idle or waits for approval.

    A transient failure (`is_transient`: the database unreachable, a lost connection) is retried
    from the top after a pause, `_RETRY_DELAYS_SEC`: DBOS does not retry a workflow that raised,
    and the request (a posted message the client was told is accepted) would otherwise wait for
    nothing. A retry is safe because every action is idempotent against the log."""
    pauses = iter(_RETRY_DELAYS_SEC)
    while True:
        try:
            return _serve_once(session_id, action)
        except Exception as error:
            pause = next(pauses, None)
            if pause is None or not is_transient(error):
                raise
            logger.warning("session %s: %s; retrying in %g s", session_id, error, pause)
            time.sleep(pause)


def is_transient(error: BaseException) -> bool:
    """Whether a failed attempt may succeed if made again: a connection or timeout error, or the
    store's own `SessionError` (not one of its kinds, such as a corrupt log or a conflict)."""
    return isinstance(error, (ConnectionError, TimeoutError)) or type(error) is SessionError


def _serve_once(session_id: str, action: dict[str, Any]) -> dict[str, Any]:
    place: SessionPlace = _RUNTIME["place"]
    session = _open_writer(place, session_id)
    try:
        served = session.stored_header.get(SERVE_HEADER_FIELD) or {}
        factory = _RUNTIME["agents"][served["agent"]]
        return asyncio.run(_run(session, factory, action))
    finally:
        session.close()


def _open_writer(place: SessionPlace, session_id: str) -> Session:
    """Open as the writer, waiting while a dying writer's lock is still held (its connection closing)."""
    deadline = time.monotonic() + _OPEN_PATIENCE_SEC
    while True:
        try:
            return place.open_writer(session_id)
        except SessionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def _run(session: Session, factory: AgentFactory, action: dict[str, Any]) -> dict[str, Any]:
    agent = factory(session)
    if inspect.isawaitable(agent):
        agent = await agent
    if not isinstance(agent, Agent):
        raise TypeError(f"agent factory: expected an Agent, got {type(agent).__name__}")
    outcome = _apply(agent, session, action)
    _continue_cut_turn(agent, session)
    agent.wake()
    settled = asyncio.ensure_future(_settled(agent))
    done, _ = await asyncio.wait([settled], timeout=_LISTEN_AFTER_SEC)
    if not done:  # a turn still running: from now on a cancel message reaches it
        listener = asyncio.create_task(_cancel_on_message(agent))
        try:
            await asyncio.wait([settled])
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
    await settled
    return {"outcome": outcome, "status": agent.status, "seq": len(session.events) - 1}


async def _settled(agent: Agent) -> None:
    await agent.when_waiting()  # idle, or every pending call waits in this process
    if not agent.pending_approvals():
        await agent.when_idle()  # raises a failure of the agent's loop (a log it could not write)


async def _cancel_on_message(agent: Agent) -> None:
    """Cancel the running turn for each cancel message sent to this workflow (`Engine.interrupt`).

    Started once the turn has run `_LISTEN_AFTER_SEC`, so a message waiting since before (since
    the workflow was queued, even) cancels the turn this workflow started; DBOS keeps messages
    until received, so none sent to a running or queued workflow is missed. One sent after this
    listener stopped is never received: the cancel workflow queued behind (the route enqueues
    both) then cancels whatever turn is left open.
    A listener that fails (its database unreachable) is logged and the turn runs on: the queued
    cancel still comes after it."""
    try:
        while True:
            note = await DBOS.recv_async(CANCEL_TOPIC, timeout_seconds=_LISTEN_SEC)
            if isinstance(note, dict):
                agent.cancel(str(note.get("cause") or "user"))
    except Exception:
        logger.warning("session %s: the cancel listener stopped; a cancel now waits for the turn's end",
                       agent.session.id, exc_info=True)


def _apply(agent: Agent, session: Session, action: dict[str, Any]) -> str:
    """Apply one request, unless the log shows it was applied already."""
    kind = action["kind"]
    if kind == "message":
        message = Message.from_json(action["message"])
        pending = {m.id for m in agent.inbox.next_turn + agent.inbox.next_step}
        if session.has_message(message.id) or message.id in pending:
            return "already_delivered"
        agent.followup(message)
        return "delivered"
    if kind == "decide":
        if not any(p.call_id == action["call_id"] for p in agent.pending_approvals()):
            return "not_pending"
        if action["outcome"] == "approve":
            agent.approve(action["call_id"])
        else:
            agent.deny(action["call_id"], action.get("reason"))
        return "decided"
    if kind == "cancel":
        agent.cancel(action.get("cause") or "user")
        return "cancelled"
    raise ValueError(f"unknown action kind {kind!r}")


def _continue_cut_turn(agent: Agent, session: Session) -> None:
    """After a crash repair: continue the cut turn once, with a continuation message of its own."""
    last_end = None
    events = session.events
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type == "turn/end":
            last_end = event
            break
        if event.type in ("user/message", "turn/start"):
            return  # something newer than the last turn's end: nothing was cut
    if last_end is None or last_end.data["reason"]["kind"] != "interrupted":
        return
    resume_id = f"serve-continue-{session.id}-{last_end.seq}"
    pending = {m.id for m in agent.inbox.next_turn + agent.inbox.next_step}
    if session.has_message(resume_id) or resume_id in pending:
        return
    text = "The previous turn was cut by a worker failure; carry on answering the last message."
    note = create_user_message(text, source={"kind": "plugin", "plugin": "serve", "continues_turn": last_end.data["turn"]})
    agent.followup(Message.from_json(_with_id(note, resume_id)))


def _with_id(message: Message, message_id: str) -> str:
    record = message.to_dict()
    record["id"] = message_id
    return json.dumps(record)
