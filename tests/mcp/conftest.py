"""Real MCP servers for the tests: the SDK's own `MCPServer` over stdio (a subprocess) and over streamable HTTP (uvicorn on loopback)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def http_url() -> Iterator[str]:
    """The test server's streamable HTTP endpoint, served by uvicorn in a thread on 127.0.0.1."""
    import uvicorn

    sys.path.insert(0, str(SERVER_SCRIPT.parent))
    try:
        from stdio_server import build
    finally:
        sys.path.remove(str(SERVER_SCRIPT.parent))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(build().streamable_http_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test MCP HTTP server did not start")
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)
