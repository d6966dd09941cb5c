"""Real MCP servers for the tests: the SDK's own `MCPServer` over stdio (a subprocess) and over streamable HTTP (uvicorn on loopback)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

SERVER_SCRIPT = Path(__file__).with_name("stdio_server.py")


def stdio_args() -> tuple[str, list[str]]:
    """The command and arguments that run the test server over stdio."""
    return sys.executable, [str(SERVER_SCRIPT)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HTTPTestServer:
    """The test server's app served by uvicorn in a thread on 127.0.0.1 (`stop` and `start` again on the same port)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        import uvicorn

        sys.path.insert(0, str(SERVER_SCRIPT.parent))
        try:
            from stdio_server import build
        finally:
            sys.path.remove(str(SERVER_SCRIPT.parent))
        config = uvicorn.Config(
            build().streamable_http_app(), host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test MCP HTTP server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(20)
            self._server = self._thread = None


@pytest.fixture
def http_server() -> Iterator[HTTPTestServer]:
    """A running `HTTPTestServer`, stopped afterwards."""
    server = HTTPTestServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def http_url(http_server: HTTPTestServer) -> str:
    """The test server's streamable HTTP endpoint."""
    return http_server.url
