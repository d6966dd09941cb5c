"""`create_app`: a Starlette app (mountable in FastAPI) serving agents, with DBOS underneath."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import dshkit.serve.routes as routes
from dshkit.serve.auth import Auth
from dshkit.serve.engine import Engine, engine_url
from dshkit.serve.errors import ApiError, api_error_handler, http_error_handler, unexpected_error_handler
from dshkit.serve.limits import Limits, StreamCounter
from dshkit.serve.places import SessionPlace
from dshkit.serve.stream import LogWatcher
from dshkit.serve.worker import AgentFactory, configure_runtime


def create_app(
    agents: Mapping[str, AgentFactory],
    *,
    store: str | os.PathLike[str],
    auth: Auth,
    engine: str | None = None,
    worker: bool = True,
    executor_id: str | None = None,
    limits: Limits | None = None,
    poll_interval: float = 0.05,
    static: str | os.PathLike[str] | None = None,
) -> Starlette:
    """The app serving `agents` (name -> `factory(session) -> Agent`) over HTTP and AG-UI.

    `store`: a directory (one SQLite log per session) or a `postgresql://` URL. `engine`: the DBOS
    system database URL (default: beside the store, see `engine_url`). `auth(request)` returns the
    caller's principal or None (401). `worker=False` only enqueues: turns then run in `dshkit
    worker` processes. `static`: a folder served at `/` (a chat page). DBOS starts with the app
    (its lifespan) and stops with it.
    """
    if not agents or not all(isinstance(name, str) and callable(factory) for name, factory in agents.items()):
        raise TypeError("create_app agents: expected a non-empty mapping of name -> factory(session) -> Agent")
    if not callable(auth):
        raise TypeError(f"create_app auth: expected a callable request -> principal, got {type(auth).__name__}")
    place = SessionPlace(store)
    limits = limits or Limits()
    served = routes.Served(
        agents=frozenset(agents), place=place,
        engine=Engine(engine_url(place.location, engine), work=worker, executor_id=executor_id),
        auth=auth, limits=limits, streams=StreamCounter(limits.max_streams_per_principal),
        watcher=LogWatcher(place, poll_interval),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        configure_runtime(agents, place)
        await asyncio.to_thread(served.engine.launch)  # DBOS's sync API refuses a running loop
        try:
            yield
        finally:
            served.watcher.close()
            await asyncio.to_thread(served.engine.destroy)
            place.close()

    pages: list[Any] = [] if static is None else [Mount("/", app=StaticFiles(directory=os.fspath(static), html=True))]
    app = Starlette(routes=_routes() + pages, lifespan=lifespan, exception_handlers=_handlers())
    app.state.dshkit_served = served
    return app


def _routes() -> list[Any]:
    s = "/sessions/{session_id}"
    return [
        Route("/sessions", routes.create_session, methods=["POST"]),
        Route(f"{s}/messages", routes.post_message, methods=["POST"]),
        Route(f"{s}/approvals", routes.list_approvals, methods=["GET"]),
        Route(f"{s}/approvals/{{call_id}}", routes.decide_approval, methods=["POST"]),
        Route(f"{s}/cancel", routes.cancel, methods=["POST"]),
        Route(f"{s}/log", routes.read_log, methods=["GET"]),
        Route(f"{s}/log.html", routes.log_page, methods=["GET"]),
        Route(f"{s}/events", routes.stream_events, methods=["GET"]),
    ]


def _handlers() -> dict[Any, Any]:
    return {ApiError: api_error_handler, HTTPException: http_error_handler, Exception: unexpected_error_handler}


def run_worker(agents: Mapping[str, AgentFactory], *, store: str, engine: str | None = None, executor_id: str | None = None) -> Engine:
    """Start a worker in this process (no HTTP): DBOS dequeues and recovers session work until
    `engine.destroy()`. `executor_id` (default: the host's name) lets a restarted worker recover
    the work it left unfinished: give each worker of a host its own, and keep it across restarts."""
    place = SessionPlace(store)
    configure_runtime(agents, place)
    worker = Engine(engine_url(place.location, engine), work=True, executor_id=executor_id or socket.gethostname())
    worker.launch()
    return worker
