"""`dshkit serve APP` (the API, with an in-process worker unless `--no-worker`) and `dshkit worker APP`.

APP is `module:attribute` naming a dict of agents (name -> `factory(session) -> Agent`). The
`dshkit.serve` package (extra `dshkit[serve]`) is imported only here, only when these run.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import sys
import threading
from typing import Any

DEFAULT_STORE = "dshkit-sessions"


def add_serve_commands(commands: Any) -> None:
    """The `serve` and `worker` sub-commands."""
    serve = commands.add_parser("serve", help="serve agents over HTTP and AG-UI (with a worker unless --no-worker)")
    worker = commands.add_parser("worker", help="run session turns for `dshkit serve --no-worker` processes")
    for parser in (serve, worker):
        parser.add_argument("app", metavar="APP", help="module:attribute naming a dict of agents (name -> factory(session))")
        parser.add_argument("--store", default=DEFAULT_STORE, help=f"a directory of session logs or a postgresql:// URL (default ./{DEFAULT_STORE})")
        parser.add_argument("--engine", default=None, help="the DBOS system database URL (default: PostgreSQL beside a PostgreSQL store, else <store>/.dbos.sqlite)")
        parser.add_argument("--executor-id", default=None, help="this worker's DBOS executor id: restarted with the same id, it recovers its unfinished work")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0 picks a free one)")
    serve.add_argument("--no-worker", action="store_true", help="only serve the API: turns run in `dshkit worker` processes")
    serve.add_argument("--static", metavar="DIR", default=None, help="a folder served at / (a chat page)")
    serve.add_argument("--auth", metavar="MODULE:ATTR", default=None, help="a callable request -> principal (default: bearer tokens from DSHKIT_SERVE_TOKENS=token=principal,...)")


def _load(spec: str, what: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"{what} {spec!r}: expected module:attribute")
    sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{what} {spec!r}: {exc}") from None


def _auth(spec: str | None) -> Any:
    if spec is not None:
        return _load(spec, "--auth")
    from dshkit.serve import bearer_tokens

    tokens = {}
    for pair in filter(None, os.environ.get("DSHKIT_SERVE_TOKENS", "").split(",")):
        token, _, principal = pair.partition("=")
        if not token or not principal:
            raise ValueError("DSHKIT_SERVE_TOKENS: expected token=principal pairs separated by commas")
        tokens[token] = principal
    if not tokens:
        raise ValueError("no auth: pass --auth MODULE:ATTR or set DSHKIT_SERVE_TOKENS=token=principal,...")
    return bearer_tokens(tokens)


def main(args: argparse.Namespace) -> int:
    """Run `dshkit serve` or `dshkit worker` until SIGINT/SIGTERM."""
    try:
        import dshkit.serve as serve
    except ImportError as exc:
        print(f"dshkit {args.command}: needs the serve extra (pip install 'dshkit[serve]'): {exc}", file=sys.stderr)
        return 2
    try:
        agents = _load(args.app, "APP")
        if args.command == "worker":
            return _run_worker(serve, agents, args)
        app = serve.create_app(agents, store=args.store, engine=args.engine, auth=_auth(args.auth),
                               worker=not args.no_worker, executor_id=args.executor_id, static=args.static)
    except (ValueError, TypeError) as exc:
        print(f"dshkit {args.command}: {exc}", file=sys.stderr)
        return 2
    return _run_http(app, args.host, args.port)


def _run_http(app: Any, host: str, port: int) -> int:
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, timeout_keep_alive=30))
    original = server.startup

    async def announce(sockets: Any = None) -> None:
        await original(sockets=sockets)
        print(f"dshkit serve: listening on http://{host}:{bound}", flush=True)

    server.startup = announce  # type: ignore[method-assign]
    server.run(sockets=[sock])
    return 0


def _run_worker(serve: Any, agents: Any, args: argparse.Namespace) -> int:
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    engine = serve.run_worker(agents, store=args.store, engine=args.engine, executor_id=args.executor_id)
    print(f"dshkit worker: running (executor {args.executor_id or 'generated'})", flush=True)
    stop.wait()
    engine.destroy()
    return 0
