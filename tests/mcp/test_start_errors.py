"""A server that cannot start gives one clear exception naming it (never the SDK's ExceptionGroup),
and a missing `mcp` SDK is an ImportError naming the extra at once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from support import child_env_without

from dshkit.mcp import StdioServer


async def enter(server: StdioServer) -> None:
    async with server:
        pass


def test_a_server_that_exits_at_start_is_one_connection_error_naming_it() -> None:
    server = StdioServer("dies", sys.executable, ["-c", "import sys; sys.exit(3)"], errlog=subprocess.DEVNULL)
    with pytest.raises(ConnectionError) as caught:
        asyncio.run(enter(server))
    assert type(caught.value) is ConnectionError  # not an ExceptionGroup of the SDK's task groups
    assert str(caught.value).startswith("MCP server 'dies' could not be started: ")
    assert caught.value.__cause__ is not None  # the SDK's own error stays reachable


def test_a_command_that_does_not_exist_names_the_server_and_the_command(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    with pytest.raises(ConnectionError, match=r"MCP server 'gone' could not be started: FileNotFoundError: .*no-such-server"):
        asyncio.run(enter(StdioServer("gone", missing, errlog=subprocess.DEVNULL)))


def test_a_server_that_never_answers_times_out_with_its_name_and_the_wait() -> None:
    silent = StdioServer("mute", sys.executable, ["-c", "import time; time.sleep(60)"], start_timeout=0.5, errlog=subprocess.DEVNULL)
    with pytest.raises(asyncio.TimeoutError, match=r"MCP server 'mute' could not be started: no answer .* within 0.5 s"):
        asyncio.run(enter(silent))


def test_without_the_sdk_a_start_is_an_import_error_naming_the_extra(tmp_path: Path) -> None:
    script = (
        "import asyncio, sys\n"
        "from dshkit.mcp import StdioServer\n"
        "async def main():\n"
        "    async with StdioServer('units', sys.executable, ['-c', 'import time; time.sleep(60)']):\n"
        "        pass\n"
        "try:\n"
        "    asyncio.run(main())\n"
        "except ImportError as error:\n"
        "    print(f'ImportError: {error}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=child_env_without(tmp_path / "site", "mcp"), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "ImportError: dshkit.mcp needs the mcp package (the MCP SDK): pip install 'dshkit[mcp]'\n"
