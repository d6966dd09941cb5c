"""The `dshkit` command behaves as shell users expect: --version, closed pipes, plain errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dshkit
from dshkit.session import Session

DSHKIT = [sys.executable, "-m", "dshkit"]


def dshkit_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DSHKIT, *args], capture_output=True, text=True, timeout=60)


def test_version() -> None:
    done = dshkit_run("--version")
    assert done.returncode == 0
    assert done.stdout == f"dshkit {dshkit.__version__}\n"


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    with Session.create(path) as session:
        for number in range(4000):  # far more output than a pipe buffer holds
            session.append("user/message", dshkit.create_user_message(f"line {number} " * 8, source={"kind": "user"}))
    return path


@pytest.mark.parametrize("command", ["show", "messages"])
def test_a_closed_pipe_ends_quietly_with_141(big_log: Path, command: str) -> None:
    reader = subprocess.Popen(["head", "-2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = subprocess.run(
        [*DSHKIT, "log", command, str(big_log)], stdout=reader.stdin, stderr=subprocess.PIPE, timeout=60
    )
    assert reader.stdin is not None and reader.stdout is not None
    reader.stdin.close()
    head = reader.stdout.read()
    reader.stdout.close()
    reader.wait(60)
    assert len(head.splitlines()) == 2
    assert writer.returncode == 141  # what a shell reports for a process ended by SIGPIPE
    assert writer.stderr == b""  # no BrokenPipeError traceback, no "Exception ignored"


def test_a_file_that_is_not_a_log_name_says_what_was_expected(tmp_path: Path) -> None:
    notes = tmp_path / "bad.txt"
    notes.write_text("hello\n")
    done = dshkit_run("log", "verify", str(notes))
    assert done.returncode == 1
    assert done.stderr.startswith(f"dshkit log verify: {notes}: expected a session log file ending in .jsonl")
    assert "rename" in done.stderr and "store=" not in done.stderr and "Traceback" not in done.stderr


def test_missing_files_and_folders_are_named_plainly(tmp_path: Path) -> None:
    done = dshkit_run("log", "show", str(tmp_path / "nowhere.jsonl"))
    assert (done.returncode, done.stderr) == (1, f"dshkit log show: {tmp_path / 'nowhere.jsonl'}: no such file\n")
    done = dshkit_run("log", "verify", str(tmp_path))
    assert (done.returncode, done.stderr) == (1, f"dshkit log verify: {tmp_path}: is a directory; give the log file inside it\n")
