"""The HTTP endpoints. None of them writes a session log: requests become engine workflows."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from dshkit import create_user_message, new_message_id
from dshkit.serve.agui import plain_json
from dshkit.serve.auth import Auth, principal_of
from dshkit.serve.engine import Engine
from dshkit.serve.errors import ApiError
from dshkit.serve.limits import Limits, StreamCounter, read_json_object
from dshkit.serve.places import SessionPlace
from dshkit.serve.stream import LogWatcher, resume_cursor, session_events
from dshkit.viewer import session_page

_REQUEST_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@dataclass
class Served:
    """What every endpoint needs: the agents' names, the sessions, the engine, the bounds."""

    agents: frozenset[str]
    place: SessionPlace
    engine: Engine
    auth: Auth
    limits: Limits
    streams: StreamCounter
    watcher: LogWatcher


def _served(request: Request) -> Served:
    served: Served = request.app.state.dshkit_served
    return served


async def _owned_session(request: Request, served: Served) -> tuple[str, str]:
    """(principal, session id) of a session the caller owns; 401, or 404 for anyone else's."""
    principal = await principal_of(request, served.auth)
    session_id = request.path_params["session_id"]
    owner = await asyncio.to_thread(served.place.owner, session_id)
    if owner is None or owner.get("principal") != principal:
        raise ApiError(404, "unknown_session", f"no session {session_id!r} (of yours)")
    return principal, session_id


def _request_id(body: dict[str, Any], field: str) -> str:
    value = body.get(field)
    if value is None:
        return new_message_id()
    if not isinstance(value, str) or _REQUEST_ID.fullmatch(value) is None:
        raise ApiError(400, "bad_id", f"{field!r} must be 1-128 characters of letters, digits, '_', '.', '-'")
    return value


async def create_session(request: Request) -> Response:
    """POST /sessions {"agent": name} -> 201 {"session_id", "agent"}."""
    served = _served(request)
    principal = await principal_of(request, served.auth)
    body = await read_json_object(request, served.limits)
    agent = body.get("agent")
    if len(served.agents) == 1 and agent is None:
        agent = next(iter(served.agents))
    if agent not in served.agents:
        raise ApiError(400, "unknown_agent", f"'agent' must name one of {sorted(served.agents)}, got {agent!r}")
    session_id = await asyncio.to_thread(served.place.create, principal, agent)
    return JSONResponse({"session_id": session_id, "agent": agent}, status_code=201)


async def post_message(request: Request) -> Response:
    """POST /sessions/{id}/messages {"text", "id"?} -> 202 {"session_id", "message_id", "workflow_id"}.

    A repeated post with the same `id` enqueues nothing new and gets the same answer."""
    served = _served(request)
    principal, session_id = await _owned_session(request, served)
    body = await read_json_object(request, served.limits)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ApiError(400, "bad_message", "'text' must be a non-empty string")
    if len(text) > served.limits.max_message_chars:
        raise ApiError(413, "message_too_large", f"'text' has {len(text)} characters; at most {served.limits.max_message_chars} are accepted")
    message_id = _request_id(body, "id")
    message = create_user_message(text, source={"kind": "user", "principal": principal}).to_dict()
    message["id"] = message_id
    action = {"kind": "message", "message": json.dumps(message)}
    workflow = await asyncio.to_thread(served.engine.enqueue, session_id, "message", message_id, action)
    return JSONResponse({"session_id": session_id, "message_id": message_id, "workflow_id": workflow}, status_code=202)


async def decide_approval(request: Request) -> Response:
    """POST /sessions/{id}/approvals/{call_id} {"decision": "approve"|"deny", "reason"?} -> 202."""
    served = _served(request)
    _, session_id = await _owned_session(request, served)
    call_id = request.path_params["call_id"]
    body = await read_json_object(request, served.limits)
    decision = body.get("decision")
    if decision not in ("approve", "deny"):
        raise ApiError(400, "bad_decision", f"'decision' must be 'approve' or 'deny', got {decision!r}")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ApiError(400, "bad_decision", "'reason' must be a string")
    pending = await asyncio.to_thread(_pending_approvals, served.place, session_id)
    if not any(item["call_id"] == call_id for item in pending):
        raise ApiError(409, "not_pending", f"no call {call_id!r} waits for a decision in this session")
    action = {"kind": "decide", "call_id": call_id, "outcome": decision, "reason": reason}
    workflow = await asyncio.to_thread(served.engine.enqueue, session_id, "decide", call_id, action)
    return JSONResponse({"session_id": session_id, "call_id": call_id, "decision": decision, "workflow_id": workflow}, status_code=202)


async def cancel(request: Request) -> Response:
    """POST /sessions/{id}/cancel {"id"?} -> 202 {"session_id", "workflow_id", "interrupted"}.

    Cancels the turn running now (on any worker: a DBOS message to each unfinished workflow of the
    session, listed in `interrupted`), and, through a cancel queued behind them, a turn left
    waiting for approval when no worker runs it."""
    served = _served(request)
    _, session_id = await _owned_session(request, served)
    body = await read_json_object(request, served.limits)
    request_id = _request_id(body, "id")
    interrupted = await asyncio.to_thread(served.engine.interrupt, session_id, request_id, "user")
    action = {"kind": "cancel", "cause": "user"}
    workflow = await asyncio.to_thread(served.engine.enqueue, session_id, "cancel", request_id, action)
    return JSONResponse({"session_id": session_id, "workflow_id": workflow, "interrupted": interrupted}, status_code=202)


async def list_approvals(request: Request) -> Response:
    """GET /sessions/{id}/approvals -> {"pending": [{"call_id", "tool", "arguments", "reason", ...}]}."""
    served = _served(request)
    _, session_id = await _owned_session(request, served)
    pending = await asyncio.to_thread(_pending_approvals, served.place, session_id)
    return JSONResponse({"session_id": session_id, "pending": pending})


async def read_log(request: Request) -> Response:
    """GET /sessions/{id}/log?after=SEQ -> {"events": [{"seq", "type", "time", "data"}]}."""
    served = _served(request)
    _, session_id = await _owned_session(request, served)
    after = request.query_params.get("after", "-1")
    if not re.fullmatch(r"-?\d{1,15}", after):
        raise ApiError(400, "bad_after", f"'after' must be a seq (an integer), got {after!r}")
    events = await asyncio.to_thread(_log_events, served.place, session_id, int(after))
    return JSONResponse({"session_id": session_id, "events": events})


async def log_page(request: Request) -> Response:
    """GET /sessions/{id}/log.html: the log's viewer page (as `dshkit log html` writes it)."""
    served = _served(request)
    _, session_id = await _owned_session(request, served)
    page = await asyncio.to_thread(_page_of, served.place, session_id)
    return HTMLResponse(page, headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})


def _page_of(place: SessionPlace, session_id: str) -> str:
    with place.read(session_id) as session:
        return session_page(session, where=f"served session {session_id}")  # never the server's paths


async def stream_events(request: Request) -> Response:
    """GET /sessions/{id}/events: the AG-UI stream (SSE), resumable with `Last-Event-ID`."""
    served = _served(request)
    principal, session_id = await _owned_session(request, served)
    cursor = resume_cursor(request.headers.get("last-event-id"))
    served.streams.acquire(principal)

    async def counted() -> Any:
        try:
            async for item in session_events(served.place, served.watcher, session_id, cursor):
                yield item
        finally:
            served.streams.release(principal)

    return EventSourceResponse(counted(), ping=10, headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _pending_approvals(place: SessionPlace, session_id: str) -> list[dict[str, Any]]:
    asked: dict[str, dict[str, Any]] = {}
    with place.read(session_id) as session:
        for event in session.events:
            if event.type == "approval/asked":
                data = plain_json(event.data)
                asked[data["call_id"]] = {**data, "seq": event.seq}
            elif event.type == "approval/decided":
                asked.pop(event.data["call_id"], None)
    return list(asked.values())


def _log_events(place: SessionPlace, session_id: str, after: int) -> list[dict[str, Any]]:
    with place.read(session_id) as session:
        events = session.events
        return [
            {"seq": e.seq, "type": e.type, "time": e.time, "data": _event_data(e)}
            for e in (events[i] for i in range(max(after + 1, 0), len(events)))
        ]


def _event_data(event: Any) -> Any:
    message = event.message
    if message is None:
        return plain_json(event.data)
    if event.data is message:
        return {"message": message.to_dict()}
    data = {key: value for key, value in event.data.items() if key != "message"}
    return {**plain_json(data), "message": message.to_dict()}
