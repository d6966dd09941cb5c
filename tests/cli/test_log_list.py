"""`dshkit log list DIR`: every readable log is listed under its file's name; an unreadable one is
marked, not allowed to hide the others."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from support import child_env_without

import dshkit
from dshkit.session import Session


def dshkit_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = child_env_without(cwd / ".site")
    return subprocess.run([sys.executable, "-m", "dshkit", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def test_a_bad_file_is_marked_and_the_rest_are_listed_by_file_name(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with Session.create(logs / "a.jsonl") as session:
        session.append("user/message", dshkit.create_user_message("hello", source={"kind": "user"}))
        session_id = session.id
    shutil.copy(logs / "a.jsonl", logs / "a-copy.jsonl")  # one session, two files
    (logs / "broken.jsonl").write_text("not a log\n")
    (logs / "notes.txt").write_text("not a log either, and not named like one\n")
    done = dshkit_run("log", "list", "logs", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert sorted(line.split()[0] for line in lines[:2]) == ["a-copy.jsonl", "a.jsonl"]
    assert all(line.split()[1] == session_id and "1 events" in line for line in lines[:2])
    assert lines[2].split()[0] == "broken.jsonl"
    assert lines[2].split(None, 1)[1] == "unreadable: line 1: not a dshkit session log (no session header)"
    assert done.stderr == "dshkit log list: 1 of 3 log files could not be read\n"


def test_a_directory_of_good_logs_lists_them_and_succeeds(tmp_path: Path) -> None:
    for name in ("one.jsonl", "two.sqlite"):
        Session.create(tmp_path / name).close()
    done = dshkit_run("log", "list", ".", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(line.split()[0] for line in done.stdout.splitlines()) == ["one.jsonl", "two.sqlite"]


def test_a_single_log_file_is_not_a_location_to_list(tmp_path: Path) -> None:
    Session.create(tmp_path / "one.jsonl").close()
    done = dshkit_run("log", "list", "one.jsonl", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (
        1, "dshkit log list: one.jsonl: expected a directory of logs, a postgresql:// URL or an original-harness .db file\n"
    )
    done = dshkit_run("log", "list", "nowhere", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "dshkit log list: nowhere: no such directory\n")
