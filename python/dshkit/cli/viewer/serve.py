"""`dshkit log serve LOG`: the viewer page over HTTP on loopback, following the log while an agent writes it.

The server re-reads the log (read-only, never locking or repairing it) when the page asks for
more: ``GET /`` is the page, ``GET /data?since=N`` the page's data when the log holds other than
`N` events (204 when it does not). For a log file the re-read is skipped while its size and
modification time stay the same; a database log is re-read at each ask. Nothing else is served
(404), and a request whose ``Host`` header does not name the server's own address is refused
(403), so a web page that rebinds its DNS name to this machine cannot read the log.
"""

from __future__ import annotations

import ipaddress
import os
import threading
import warnings
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dshkit.session.errors import SessionIntegrityWarning, SessionRecoveryWarning
from dshkit.session.session import Session
from dshkit.session.stores import is_url
from dshkit.viewer.page import embed_json, render_page
from dshkit.viewer.page_data import page_data

POLL_MS = 1000


class LogSource:
    """The page data of one log, re-read when the log changed (one reader at a time)."""

    def __init__(self, path: str, session_id: str | None) -> None:
        self.path = path
        self.session_id = session_id
        self._lock = threading.Lock()
        self._stamp: Any = None
        self._data: dict[str, Any] | None = None

    def _file_stamp(self) -> Any:
        if is_url(self.path):
            return None  # a database: no cheap way to know, read it again
        status = os.stat(self.path)
        return (status.st_size, status.st_mtime_ns)

    def data(self, poll_ms: int) -> dict[str, Any]:
        """The page data of the log as it is now (raises what `Session.open` raises)."""
        with self._lock:
            stamp = self._file_stamp()
            if self._data is None or stamp is None or stamp != self._stamp:
                with warnings.catch_warnings():
                    # A writer's half-written last line reads as a torn tail: the next ask sees it whole.
                    warnings.simplefilter("ignore", SessionRecoveryWarning)
                    warnings.simplefilter("ignore", SessionIntegrityWarning)
                    with Session.open(self.path, read_only=True, session_id=self.session_id) as session:
                        data = page_data(session.events, session_id=session.id, created_at=session.created_at, where=self.path)
                data["live"] = {"poll_ms": poll_ms}
                self._data, self._stamp = data, stamp
            return self._data


class ListenError(OSError):
    """The server could not listen on the address asked for (in use, not this machine's, ...)."""


def allowed_hosts(addresses: Iterable[str], port: int) -> Callable[[str | None], bool]:
    """Which ``Host`` headers name this server: the bound address (and ``localhost`` on loopback) with its port.

    A page on another site that rebinds its own DNS name to 127.0.0.1 sends that name, not
    these, so it gets 403 and never the log. Bound to every interface, any address literal
    with the port is accepted (an address is not a name a page can rebind).
    """
    names = {address.lower() for address in addresses}
    wildcard = bool(names & {"", "0.0.0.0", "::"})
    if names & {"127.0.0.1", "::1", "localhost"}:
        names |= {"localhost", "127.0.0.1", "::1"}

    def allowed(header: str | None) -> bool:
        if header is None:
            return False
        name, _, given_port = header.strip().lower().rpartition(":")
        if not name or given_port != str(port):
            return False
        name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
        if name in names:
            return True
        if not wildcard:
            return False
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True

    return allowed


def _handler(
    source: LogSource, poll_ms: int, report: Callable[[str], None], host_allowed: Callable[[str | None], bool]
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if not host_allowed(self.headers.get("Host")):
                self._send(403, "text/plain; charset=utf-8", b"forbidden: this server answers only to its own address\n")
                return
            url = urlsplit(self.path)
            if url.path not in ("/", "/data"):
                self._send(404, "text/plain; charset=utf-8", b"not found: the page is at /\n")
                return
            try:
                data = source.data(poll_ms)
            except Exception as error:  # the log went bad: say so, keep serving
                self._send(500, "text/plain; charset=utf-8", f"{error}\n".encode())
                report(f"dshkit log serve: {error}")
                return
            if url.path == "/":
                page = render_page(data, title=f"dshkit session {data['session']['id']} (live)", live=True)
                self._send(200, "text/html; charset=utf-8", page.encode())
                return
            since = parse_qs(url.query).get("since", [""])[0]
            if since == str(data["session"]["event_count"]):
                self._send(204, "text/plain; charset=utf-8", b"")
                return
            self._send(200, "application/json", embed_json(data).encode())

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if body:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            pass  # one line per poll would drown the terminal

    return Handler


def make_server(
    path: str, session_id: str | None, *, host: str = "127.0.0.1", port: int = 0, poll_ms: int = POLL_MS,
    report: Callable[[str], None] = lambda line: None,
) -> ThreadingHTTPServer:
    """A server for the log at `path` (read once here, so a bad log fails before anything listens)."""
    source = LogSource(path, session_id)
    source.data(poll_ms)
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port}: expected 0 to 65535 (0 picks a free one)")
    try:
        server = ThreadingHTTPServer((host, port), _handler(source, poll_ms, report, lambda header: False))
    except OSError as error:
        raise ListenError(error.errno, f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    bound_host, bound_port = server.server_address[:2]
    shown = bound_host if isinstance(bound_host, str) else bytes(bound_host).decode()
    # the port is known only once bound (port 0 picks one): the check is set after binding
    server.RequestHandlerClass = _handler(source, poll_ms, report, allowed_hosts((host, shown), bound_port))
    server.daemon_threads = True
    return server


def serve_command(path: str, session_id: str | None, host: str, port: int, out: Any, err: Any) -> int:
    """`dshkit log serve`: print the page's address and serve until interrupted."""
    server = make_server(path, session_id, host=host, port=port, report=lambda line: print(line, file=err, flush=True))
    bound_host, bound_port = server.server_address[:2]
    shown_host = bound_host.decode() if isinstance(bound_host, bytes) else bound_host
    print(f"serving {path} at http://{shown_host}:{bound_port}/ (Ctrl-C stops)", file=out, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


__all__ = ["ListenError", "LogSource", "allowed_hosts", "make_server", "serve_command"]
