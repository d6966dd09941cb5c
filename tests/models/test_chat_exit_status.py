"""`dshkit chat` tells a shell how it went: exit 1 after a failed turn, 2 when misconfigured.

Real processes against the loopback server (401, 500) or a closed port (unreachable), and a
pseudo-terminal for line editing, history and colour.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

WAIT = 30.0  # bound for a process to react (behaviour, not speed): retries back off ~1.5 s


def chat_env(base_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSHKIT_") and key != "NO_COLOR"}
    env.update(
        DSHKIT_BASE_URL=base_url,
        DSHKIT_MODEL="test-model",
        DSHKIT_API_KEY="sk-test",
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def run_chat(env: dict[str, str], text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dshkit", "chat", *args], input=text, capture_output=True, text=True, env=env, timeout=WAIT
    )


def test_a_completed_chat_exits_0(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.sse_reply(wire.answer("Hello.")))
    done = run_chat(chat_env(loopback.base_url, tmp_path), "Hi\n")
    assert (done.returncode, done.stdout) == (0, "Hello.\n"), done.stderr


def test_a_refused_key_exits_2_and_names_the_variable(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.error_reply(401, "Invalid API key", kind="authentication_error"))
    done = run_chat(chat_env(loopback.base_url, tmp_path), "Hi\n")
    assert done.returncode == 2, done.stderr
    assert "[error: Invalid API key]" in done.stderr
    assert "HTTP 401" in done.stderr and "check DSHKIT_API_KEY" in done.stderr


def test_a_401_without_a_key_says_the_key_is_not_set(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.error_reply(401, "Missing bearer token", kind="authentication_error"))
    env = chat_env(loopback.base_url, tmp_path)
    del env["DSHKIT_API_KEY"]
    done = run_chat(env, "Hi\n")
    assert done.returncode == 2, done.stderr
    assert "DSHKIT_API_KEY is not set" in done.stderr
    assert "Authorization" not in loopback.received[0].headers


def test_a_server_error_exits_1_after_the_retries(loopback: Any, tmp_path: Path) -> None:
    # Nothing scripted: the loopback answers every request with HTTP 500.
    done = run_chat(chat_env(loopback.base_url, tmp_path), "Hi\n")
    assert done.returncode == 1, done.stderr
    assert len(loopback.received) == 3  # the first try and two retries
    assert "[error:" in done.stderr and "DSHKIT_API_KEY" not in done.stderr


def test_an_unreachable_server_exits_1(closed_port: int, tmp_path: Path) -> None:
    done = run_chat(chat_env(f"http://127.0.0.1:{closed_port}/v1", tmp_path), "Hi\n")
    assert done.returncode == 1, done.stderr
    assert "[error:" in done.stderr


def test_a_failed_turn_still_fails_the_session_after_a_good_one(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.error_reply(400, "context too long", kind="invalid_request_error"), wire.sse_reply(wire.answer("Fine.")))
    done = run_chat(chat_env(loopback.base_url, tmp_path), "Long\nShort\n")
    assert done.returncode == 1, done.stderr
    assert done.stdout == "Fine.\n"


def test_missing_configuration_exits_2_from_a_shell(tmp_path: Path) -> None:
    env = chat_env("http://127.0.0.1:9/v1", tmp_path)
    del env["DSHKIT_MODEL"]
    done = run_chat(env, "Hi\n")
    assert done.returncode == 2
    assert "DSHKIT_MODEL" in done.stderr and "Traceback" not in done.stderr


class Terminal:
    """A chat process whose standard input, output and error are one pseudo-terminal."""

    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dshkit", "chat"], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
        )
        os.close(slave)
        self.seen = b""

    def wait_for(self, text: bytes, after: int = 0) -> bool:
        deadline = time.monotonic() + WAIT
        while text not in self.seen[after:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._read(remaining):
                return False
        return True

    def _read(self, timeout: float) -> bool:
        readable, _, _ = select.select([self.master], [], [], timeout)
        if not readable:
            return False
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the child closed the terminal
            return False
        self.seen += chunk
        return bool(chunk)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def finish(self) -> int:
        code = self.process.wait(WAIT)
        while self._read(0.2):
            pass
        os.close(self.master)
        return code


@pytest.fixture
def terminals() -> Any:
    started: list[Terminal] = []
    yield started
    for terminal in started:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.process.wait(WAIT)


def test_the_prompt_edits_lines_and_keeps_history(terminals: Any, loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(*(wire.sse_reply(wire.answer(f"Answer {n}.")) for n in (1, 2, 3)))
    env = chat_env(loopback.base_url, tmp_path)
    terminal = Terminal(env)
    terminals.append(terminal)
    assert terminal.wait_for(b"> "), terminal.seen
    terminal.type(b"Hello wrld\x1b[D\x1b[D\x1b[Do\r")  # three times left arrow, insert the missing "o"
    assert terminal.wait_for(b"Answer 1."), terminal.seen
    assert terminal.wait_for(b"> ", terminal.seen.index(b"Answer 1.")), terminal.seen
    terminal.type(b"\x1b[A\r")  # up arrow: the previous line again
    assert terminal.wait_for(b"Answer 2."), terminal.seen
    assert terminal.wait_for(b"> ", terminal.seen.index(b"Answer 2.")), terminal.seen
    terminal.type(b"\x04")  # Ctrl-D at the prompt ends the session
    assert terminal.finish() == 0, terminal.seen
    assert [request.json["messages"][-1]["content"] for request in loopback.received] == ["Hello world", "Hello world"]
    history = tmp_path / "state" / "dshkit" / "chat_history"
    assert "Hello world" in history.read_text()

    # The next session starts with that history: up arrow recalls the last line.
    second = Terminal(env)
    terminals.append(second)
    assert second.wait_for(b"> "), second.seen
    second.type(b"\x1b[A\r")
    assert second.wait_for(b"Answer 3."), second.seen
    assert second.wait_for(b"> ", second.seen.index(b"Answer 3.")), second.seen
    second.type(b"\x04")
    assert second.finish() == 0
    assert loopback.received[-1].json["messages"][-1]["content"] == "Hello world"


@pytest.mark.parametrize("no_color", ["", "1"])
def test_colour_only_without_no_color(terminals: Any, loopback: Any, wire: Any, tmp_path: Path, no_color: str) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(reasoning="Thinking."), *wire.answer("Hi.")]))
    env = chat_env(loopback.base_url, tmp_path, NO_COLOR=no_color)
    terminal = Terminal(env)
    terminals.append(terminal)
    assert terminal.wait_for(b"> "), terminal.seen
    terminal.type(b"Hi\r")
    assert terminal.wait_for(b"Hi."), terminal.seen
    assert terminal.wait_for(b"[tokens:"), terminal.seen  # the usage line shows on a terminal either way
    assert terminal.wait_for(b"> ", terminal.seen.index(b"[tokens:")), terminal.seen
    terminal.type(b"\x04")
    assert terminal.finish() == 0
    coloured = b"\x1b[2m" in terminal.seen
    assert coloured is (no_color == ""), terminal.seen


def test_no_colour_when_stderr_is_not_a_terminal(loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.sse_reply([wire.chunk(reasoning="Thinking."), *wire.answer("Hi.")]))
    done = run_chat(chat_env(loopback.base_url, tmp_path), "Hi\n")
    assert done.returncode == 0
    assert "Thinking." in done.stderr and "\x1b[" not in done.stderr
