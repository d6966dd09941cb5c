"""One writer per log in every store, and a `create` that a SIGKILL cannot leave half-done."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dshkit.session import Session, SessionError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork and SIGKILL")

WRITER = textwrap.dedent(
    """
    import sys, dshkit
    from dshkit.session import Session
    session = Session.create(sys.argv[1], durability="always")
    session.append("turn/start", {"turn": 1})  # a turn in progress: what a second writer's repair would close
    print("ready", flush=True)
    sys.stdin.readline()
    session.append("user/message", dshkit.create_user_message("still mine", source={"kind": "user"}))
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()
    print("done", flush=True)
    """
)


def snapshot(path: Path) -> dict[str, bytes]:
    return {side.name: side.read_bytes() for side in sorted(path.parent.iterdir()) if side.name.startswith(path.name)}


def test_a_second_writer_in_another_process_is_refused_before_writing(log_path: Path):
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(log_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline().strip() == "ready"
        before = snapshot(log_path)
        with pytest.raises(SessionError, match="already open for writing"):
            Session.open(log_path)
        assert snapshot(log_path) == before  # no repair of the live writer's turn, nothing at all
        with Session.open(log_path, read_only=True) as reader:
            assert [event.type for event in reader.events] == ["turn/start"]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()
    assert child.returncode == 0
    with Session.open(log_path) as session:
        assert [event.type for event in session.events] == ["turn/start", "user/message", "turn/end"]


def test_a_second_writer_in_this_process_is_refused_and_the_first_goes_on(log_path: Path, build):
    first = Session.create(log_path)
    first.append("turn/start", {"turn": 1})
    first.sync()
    with pytest.raises(SessionError, match="already open for writing"):
        Session.open(log_path)
    first.append("user/message", build.user("still mine"))
    first.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    first.close()
    with Session.open(log_path) as session:
        assert [event.type for event in session.events] == ["turn/start", "user/message", "turn/end"]


# Forks once per effectful call of `Session.create` (a write, fsync, link, SQL statement...) and
# SIGKILLs the child just before that call: every point where a crash can interrupt creation.
KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from dshkit.session import Session
    folder, suffix = sys.argv[1], sys.argv[2]
    EFFECTS = {"open", "write", "fsync", "link", "unlink", "close", "ftruncate", "flock", "execute", "connect", "commit"}

    def create(name, kill_at):
        count = 0
        def profile(frame, event, arg):
            nonlocal count
            if event == "c_call" and getattr(arg, "__name__", "") in EFFECTS:
                if count == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                count += 1
        sys.setprofile(profile)
        try:
            Session.create(os.path.join(folder, name + suffix), durability="always").close()
        finally:
            sys.setprofile(None)
        return count

    total = create("dry-run", -1)
    print(total, flush=True)
    for kill_at in range(total):
        pid = os.fork()
        if pid == 0:
            create(f"log{kill_at}", kill_at)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print(kill_at, int(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL), flush=True)
    """
)


@pytest.mark.parametrize("suffix", [".jsonl", ".sqlite"])
def test_a_create_killed_at_any_point_leaves_no_log_or_a_whole_one(tmp_path: Path, build, suffix: str):
    result = subprocess.run([sys.executable, "-c", KILLER, str(tmp_path), suffix], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    total, *kills = result.stdout.split("\n")[:-1]
    assert int(total) >= 5 and len(kills) == int(total)
    assert all(line.endswith(" 1") for line in kills)  # every child died by SIGKILL inside create
    outcomes = {"no log": 0, "whole log": 0}
    for kill_at in range(int(total)):
        path = tmp_path / f"log{kill_at}{suffix}"
        if path.exists():
            with pytest.raises(FileExistsError):
                Session.create(path)
            with Session.open(path) as session:  # a complete, empty log
                assert len(session.events) == 0
                session.append("user/message", build.user())
            outcomes["whole log"] += 1
        else:
            with Session.create(path) as session:
                session.append("user/message", build.user())
            outcomes["no log"] += 1
        with Session.open(path) as session:
            assert len(session.messages()) == 1
    assert outcomes["no log"] > 0
