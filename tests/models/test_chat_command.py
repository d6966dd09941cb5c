"""`dshkit chat` as a user runs it: a real process, stdin, a loopback model server, SIGINT."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dshkit.models import Provider
from dshkit.cli.chat import default_log_path, main
from dshkit.session import Session

WAIT = 20.0  # generous bound for a process to react (behaviour, not speed)


def chat_env(loopback: Any, tmp_path: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSHKIT_")}
    env.update(
        DSHKIT_BASE_URL=loopback.base_url,
        DSHKIT_MODEL="test-model",
        DSHKIT_API_KEY="sk-test",
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONUNBUFFERED="1",
    )
    return env


class Output:
    """Collects a pipe on a thread so the test can wait for text without blocking."""

    def __init__(self, pipe: Any) -> None:
        self.data = b""
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: Any) -> None:
        for piece in iter(lambda: pipe.read1(4096), b""):
            with self._changed:
                self.data += piece
                self._changed.notify_all()

    def wait_for(self, text: str) -> bool:
        deadline = time.monotonic() + WAIT
        with self._changed:
            while text.encode() not in self.data:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
        return True

    @property
    def text(self) -> str:
        self._thread.join(WAIT)
        return self.data.decode()


@pytest.fixture
def processes() -> Any:
    """Every chat process a test starts; killed if still running, and its pipes closed, at teardown."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(WAIT)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def start_chat(
    processes: list[subprocess.Popen[bytes]], loopback: Any, tmp_path: Path, *args: str
) -> tuple[subprocess.Popen[bytes], Output, Output]:
    process = subprocess.Popen(
        [sys.executable, "-m", "dshkit", "chat", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=chat_env(loopback, tmp_path),
    )
    processes.append(process)
    return process, Output(process.stdout), Output(process.stderr)


def test_two_turns_stream_to_stdout_and_are_logged(processes: Any, loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(
        wire.sse_reply([wire.chunk(reasoning="Greeting."), *wire.answer("Hello! How can I help?")]),
        wire.sse_reply(wire.answer("It is 4.", response_id="chatcmpl-2")),
    )
    log = tmp_path / "chat.jsonl"
    process, out, err = start_chat(processes, loopback, tmp_path, "--log", str(log), "--system", "Be brief.")
    assert process.stdin is not None
    process.stdin.write("Hi\n\nWhat is 2+2?\n".encode())
    process.stdin.close()
    assert process.wait(WAIT) == 0, err.text
    assert out.text == "Hello! How can I help?\nIt is 4.\n"
    assert "Greeting." in err.text and f"log written to {log}" in err.text
    first, second = loopback.received
    assert first.json["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert [m["role"] for m in second.json["messages"]] == ["system", "user", "assistant", "user"]
    with Session.open(log, read_only=True) as session:
        assert [m.text for m in session.messages()] == ["Hi", "Hello! How can I help?", "What is 2+2?", "It is 4."]


def test_an_existing_log_is_continued(processes: Any, loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.sse_reply(wire.answer("First.")), wire.sse_reply(wire.answer("Second.")))
    log = tmp_path / "chat.jsonl"
    for line in ("one", "two"):
        process, out, err = start_chat(processes, loopback, tmp_path, "--log", str(log))
        assert process.stdin is not None
        process.stdin.write(f"{line}\n/exit\n".encode())
        process.stdin.close()
        assert process.wait(WAIT) == 0, err.text
    assert "continuing, 2 messages" in err.text
    assert [m["content"] for m in loopback.received[1].json["messages"]] == ["one", "First.", "two"]


def test_ctrl_c_cancels_the_turn_and_keeps_the_prefix(processes: Any, loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(
        wire.sse_reply([wire.chunk(content="The answer is"), wire.Stall()]),
        wire.sse_reply(wire.answer("Go ahead.")),
    )
    log = tmp_path / "chat.jsonl"
    process, out, err = start_chat(processes, loopback, tmp_path, "--log", str(log))
    assert process.stdin is not None
    process.stdin.write(b"Question?\n")
    process.stdin.flush()
    assert out.wait_for("The answer is"), err.text
    process.send_signal(signal.SIGINT)
    assert loopback.disconnected.wait(WAIT)
    assert err.wait_for("[interrupted")
    process.stdin.write(b"Continue\n")
    process.stdin.close()
    assert process.wait(WAIT) == 0, err.text
    assert out.text == "The answer is\nGo ahead.\n"
    assert loopback.received[1].json["messages"] == [
        {"role": "user", "content": "Question?"},
        {"role": "assistant", "content": "The answer is"},
        {"role": "user", "content": "Continue"},
    ]
    with Session.open(log, read_only=True) as session:
        interrupted = [e for e in session.events if e.type == "assistant/message" and e.data.get("interrupted")]
        assert [e.data["message"].text for e in interrupted] == ["The answer is"]
        assert [e.data["reason"]["kind"] for e in session.events if e.type == "turn/end"] == ["aborted", "completed"]


def test_ctrl_c_at_the_prompt_ends_the_session(processes: Any, loopback: Any, tmp_path: Path) -> None:
    process, out, err = start_chat(processes, loopback, tmp_path, "--log", str(tmp_path / "chat.jsonl"))
    assert err.wait_for("dshkit chat: test-model")
    process.send_signal(signal.SIGINT)
    assert process.wait(WAIT) == 0, err.text
    assert process.stdin is not None
    process.stdin.close()
    assert loopback.received == []


def test_model_errors_are_reported_and_the_chat_goes_on(processes: Any, loopback: Any, wire: Any, tmp_path: Path) -> None:
    loopback.reply(wire.error_reply(401, "Authentication Fails", kind="authentication_error"))
    process, out, err = start_chat(processes, loopback, tmp_path)
    assert process.stdin is not None
    process.stdin.write(b"Hi\n")
    process.stdin.close()
    assert process.wait(WAIT) == 2  # a refused key is a configuration error (test_chat_exit_status.py)
    assert "[error: Authentication Fails]" in err.text
    assert out.text == ""
    # Without --log a new file is made under $XDG_STATE_HOME/dshkit/chats.
    [log] = (tmp_path / "state" / "dshkit" / "chats").glob("chat-*.jsonl")
    assert f"log written to {log}" in err.text


def test_missing_configuration_exits_2(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.delenv("DSHKIT_BASE_URL", raising=False)
    monkeypatch.delenv("DSHKIT_MODEL", raising=False)
    assert main(argparse.Namespace(log=str(tmp_path / "x.jsonl"), system=None)) == 2
    assert "DSHKIT_BASE_URL and DSHKIT_MODEL not set" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_unreadable_log_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("DSHKIT_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("DSHKIT_MODEL", "m")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not a session log\n")
    assert main(argparse.Namespace(log=str(bad), system=None)) == 1
    assert f"cannot open the log {bad}" in capsys.readouterr().err


def test_default_log_paths_are_new_files(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path)}
    first = default_log_path(env)
    first.write_text("")
    second = default_log_path(env)
    assert first.parent == second.parent == tmp_path / "dshkit" / "chats"
    assert first != second and not second.exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_usage_line_on_a_terminal(tmp_path: Path) -> None:
    from dshkit import create_assistant_message, create_user_message
    from dshkit.agent import AgentEvent
    from dshkit.cli.chat import _Chat
    from dshkit.models.chat.model import OpenAICompatibleModel

    session = Session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", create_user_message("hi", source={"kind": "user"}))
    answer = create_assistant_message("hello", provider="p", model="m")
    usage = {"prompt_tokens": 1200, "completion_tokens": 30, "prompt_cache_hit_tokens": 1024,
             "completion_tokens_details": {"reasoning_tokens": 12}}
    event = session.append("assistant/message", {"turn": 1, "step": 1, "message": answer, "usage": usage})
    out, err = _Terminal(), _Terminal()
    chat = _Chat(OpenAICompatibleModel("m", Provider("http://x")), session, tmp_path / "l.jsonl", None, io.StringIO(), out, err)
    chat._on_event(AgentEvent("delta", 1, 1, data={"chunk": {"type": "text_delta", "text": "hello"}}))
    chat._on_event(AgentEvent("message", 1, 1, answer, {"event_type": "assistant/message", "seq": event.seq}))
    assert out.getvalue() == "hello\n"
    assert "[tokens: 1200 in (1024 cached), 30 out (12 reasoning)]" in err.getvalue()
    assert err.getvalue().startswith("\x1b[2m")  # dimmed on a terminal


def test_api_anthropic_speaks_the_messages_api(
    processes: Any, loopback: Any, anthropic_wire: Any, tmp_path: Path
) -> None:
    loopback.reply(anthropic_wire.sse_reply(anthropic_wire.answer("Bonjour.")))
    log = tmp_path / "chat.jsonl"
    process, out, err = start_chat(processes, loopback, tmp_path, "--api", "anthropic", "--log", str(log))
    assert process.stdin is not None
    process.stdin.write(b"Hi\n")
    process.stdin.close()
    assert process.wait(WAIT) == 0, err.text
    assert out.text == "Bonjour.\n"
    (request,) = loopback.received
    assert request.path.endswith("/v1/messages")
    assert request.json["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]


def test_an_unknown_api_is_a_usage_error(processes: Any, loopback: Any, tmp_path: Path) -> None:
    process, _, err = start_chat(processes, loopback, tmp_path, "--api", "soap")
    assert process.wait(WAIT) == 2
    assert "invalid choice: 'soap'" in err.text
