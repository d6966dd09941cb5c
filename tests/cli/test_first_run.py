"""What a new user meets first: `dshkit demo` on an install without the optional SDKs, and the
bad paths and options of every command answered in one line, before anything runs."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support import child_env_without

import dshkit
from dshkit.session import Session


def dshkit_run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if env is None:
        env = child_env_without(cwd / ".site")  # blocks nothing; no DSHKIT_* model settings
    return subprocess.run(
        [sys.executable, "-m", "dshkit", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=240, stdin=subprocess.DEVNULL
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The command's whole error output, checked to be one line and no traceback."""
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_the_demo_without_the_mcp_sdk_runs_its_other_parts_and_says_how_to_get_it(tmp_path: Path) -> None:
    done = dshkit_run("demo", cwd=tmp_path, env=child_env_without(tmp_path / "site", "mcp"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "the MCP part needs the mcp package: pip install 'dshkit[mcp]'" in done.stdout
    assert "parent's answer: That is 37 °C: no fever." in done.stdout  # the delegation still ran
    assert "dshkit log verify " in done.stdout  # and the demo reached its end


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("nodir/x.jsonl", "dshkit demo: --log nodir/x.jsonl: nodir: no such folder\n"),
        ("x.txt", "dshkit demo: --log x.txt: a new session log is a file ending in .jsonl, .sqlite, .db (the store is chosen by the name)\n"),
        (".", "dshkit demo: --log .: is a directory; give a file name inside it\n"),
        ("postgresql://user:pw@db/agents", "dshkit demo: --log postgresql://user:***@db/agents: expected a log file name here, not a database URL\n"),
    ],
)
def test_a_demo_log_path_that_cannot_be_written_fails_before_the_demo_starts(tmp_path: Path, log: str, expected: str) -> None:
    done = dshkit_run("demo", "--log", log, cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (2, expected)
    assert done.stdout == ""  # nothing of the demo ran
    assert sorted(path.name for path in tmp_path.iterdir()) == [".site"]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    with Session.create(path) as session:
        session.append("user/message", dshkit.create_user_message("hello", source={"kind": "user"}))
    return path


def torn(log: Path) -> Path:
    """A copy of `log` whose last line lost its end (an append cut off by a crash)."""
    copy = log.with_name("torn.jsonl")
    copy.write_bytes(log.read_bytes()[:-10])
    return copy


def test_chat_with_a_directory_as_its_log_says_so_in_one_line(tmp_path: Path) -> None:
    env = child_env_without(tmp_path / ".site")
    env.update(DSHKIT_BASE_URL="http://127.0.0.1:9", DSHKIT_MODEL="m")
    done = dshkit_run("chat", "--log", str(tmp_path), cwd=tmp_path, env=env)
    assert (done.returncode, one_line(done)) == (1, f"dshkit chat: --log {tmp_path}: is a directory; give the log file inside it\n")


def test_chat_with_a_database_url_as_its_log_says_it_takes_a_file(tmp_path: Path) -> None:
    env = child_env_without(tmp_path / ".site")
    env.update(DSHKIT_BASE_URL="http://127.0.0.1:9", DSHKIT_MODEL="m")
    done = dshkit_run("chat", "--log", "postgresql://me:pw@db/agents", cwd=tmp_path, env=env)
    assert (done.returncode, one_line(done)) == (
        1, "dshkit chat: --log postgresql://me:***@db/agents: expected a log file name here, not a database URL\n"
    )


def test_chat_on_a_torn_log_prints_the_repair_as_one_plain_line(tmp_path: Path, log: Path) -> None:
    env = child_env_without(tmp_path / ".site")
    env.update(DSHKIT_BASE_URL="http://127.0.0.1:9", DSHKIT_MODEL="m")
    done = dshkit_run("chat", "--log", str(torn(log)), cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith(f"dshkit chat: warning: {tmp_path / 'torn.jsonl'}: line 2: torn last line"), done.stderr
    assert "Warning:" not in done.stderr and ".py:" not in done.stderr  # no Python warning display


def test_convert_of_a_torn_log_prints_the_warning_as_one_plain_line(tmp_path: Path, log: Path) -> None:
    done = dshkit_run("log", "convert", str(torn(log)), str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert done.returncode == 0
    assert one_line(done).startswith(f"dshkit log convert: warning: {tmp_path / 'torn.jsonl'}: line 2: torn last line")
    assert ".py:" not in done.stderr


@pytest.mark.parametrize(
    ("dest", "expected"),
    [
        ("nodir/out.sqlite", "nodir/out.sqlite: nodir: no such folder"),
        ("nodir/out.jsonl", "nodir/out.jsonl: nodir: no such folder"),
        ("out.txt", "out.txt: a new session log is a file ending in .jsonl, .sqlite, .db (the store is chosen by the name)"),
        ("run.jsonl", "run.jsonl: already exists (nothing is overwritten); choose a new name"),
    ],
)
def test_convert_to_a_path_that_cannot_be_written_names_it_not_a_temporary_file(tmp_path: Path, log: Path, dest: str, expected: str) -> None:
    done = dshkit_run("log", "convert", "run.jsonl", dest, cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (1, f"dshkit log convert: {expected}\n")
    assert "convert_log" not in done.stderr and ".creating" not in done.stderr and ".tmp" not in done.stderr


def test_html_into_a_missing_folder_names_the_folder_not_a_temporary_file(tmp_path: Path, log: Path) -> None:
    done = dshkit_run("log", "html", "run.jsonl", "-o", "missing/dir/p.html", cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (1, "dshkit log html: missing/dir/p.html: missing/dir: no such folder\n")


def test_serve_on_a_port_out_of_range_is_a_usage_error_not_a_traceback(tmp_path: Path, log: Path) -> None:
    done = dshkit_run("log", "serve", "run.jsonl", "--port", "99999", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "dshkit log serve: error: argument --port: expected a port from 0 to 65535 (0 picks a free one), got 99999"
    )


def test_messages_name_the_commands_options_never_python_arguments(tmp_path: Path, log: Path) -> None:
    done = dshkit_run("log", "show", "postgresql://user:secret@db/agents", cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (
        1,
        "dshkit log show: postgresql://user:***@db/agents holds many sessions: choose one with --session ID "
        "(`dshkit log list postgresql://user:***@db/agents` lists them)\n",
    )
    (tmp_path / "notes.txt").write_text("hello\n")
    for args in (("log", "verify", "notes.txt"), ("log", "list", "run.jsonl"), ("log", "convert", "run.jsonl", "out.db", "--format", "dsh")):
        done = dshkit_run(*args, cwd=tmp_path)
        text = one_line(done)
        assert done.returncode == 1
        for api_name in ("store=", "session_id=", "list_sessions", "convert_log"):
            assert api_name not in text


def test_session_is_spelled_one_way_and_the_other_spelling_still_works(tmp_path: Path, log: Path) -> None:
    for command in ("show", "verify", "messages", "html", "serve"):
        done = dshkit_run("log", command, "--help", cwd=tmp_path)
        assert "--session ID" in done.stdout and "--session-id" not in done.stdout
    done = dshkit_run("log", "convert", "--help", cwd=tmp_path)
    assert "--session ID" in done.stdout and "--session-id" not in done.stdout
    for spelling in ("--session", "--session-id"):
        done = dshkit_run("log", "convert", "run.jsonl", f"out{spelling}.jsonl", spelling, "other", cwd=tmp_path)
        assert done.returncode == 1 and "holds session" in done.stderr and "not other" in done.stderr
        done = dshkit_run("log", "show", "run.jsonl", spelling, "other", cwd=tmp_path)
        assert done.returncode == 1 and "not other" in done.stderr


def test_serve_on_a_port_in_use_says_so_in_one_line(tmp_path: Path, log: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = dshkit_run("log", "serve", "run.jsonl", "--port", str(port), cwd=tmp_path)
    assert (done.returncode, one_line(done)) == (1, f"dshkit log serve: cannot listen on 127.0.0.1:{port}: Address already in use\n")
