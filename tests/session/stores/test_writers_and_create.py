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


REOPENER = WRITER.replace("Session.create(sys.argv[1],", "Session.open(sys.argv[1],")


def start_writer(path: Path, script: str = WRITER) -> subprocess.Popen[str]:
    """A process that created (or opened) `path`, appended `turn/start`, and waits for a line on stdin."""
    child = subprocess.Popen([sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def finish_writer(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()
    assert child.returncode == 0


@pytest.mark.parametrize("writer_uses", ["the file", "the symlink"])
def test_a_second_writer_through_a_symbolic_link_is_refused(log_path: Path, writer_uses: str):
    alias = log_path.with_name(f"alias{log_path.suffix}")
    alias.symlink_to(log_path.name)
    first, second = (log_path, alias) if writer_uses == "the file" else (alias, log_path)
    Session.create(log_path).close()
    child = start_writer(first, REOPENER)
    try:
        before = snapshot(log_path)
        with pytest.raises(SessionError, match="already open for writing"):
            Session.open(second)
        assert snapshot(log_path) == before  # no repair closed the live writer's turn
    finally:
        finish_writer(child)
    with Session.open(second) as session:
        assert [event.type for event in session.events] == ["turn/start", "user/message", "turn/end"]


def test_a_writer_through_a_hard_link_never_writes_beside_the_live_one(log_path: Path):
    child = start_writer(log_path)
    other = log_path.with_name(f"other{log_path.suffix}")
    os.link(log_path, other)
    try:
        before = log_path.read_bytes()
        with pytest.raises(SessionError, match="already open for writing|hard links"):
            Session.open(other)
        assert log_path.read_bytes() == before
    finally:
        finish_writer(child)
    if log_path.suffix == ".sqlite":
        # SQLite keeps a write-ahead log per name: no writer through either name while both exist.
        for name in (log_path, other):
            with pytest.raises(SessionError, match=f"{name} has 2 hard links"):
                Session.open(name)
        with Session.open(other, read_only=True) as reader:
            assert [event.type for event in reader.events] == ["turn/start", "user/message", "turn/end"]
        other.unlink()
        other = log_path
    with Session.open(other) as session:
        assert [event.type for event in session.events] == ["turn/start", "user/message", "turn/end"]


def test_a_writer_in_another_thread_through_a_symlink_is_refused(log_path: Path, build):
    import threading

    alias = log_path.with_name(f"alias{log_path.suffix}")
    alias.symlink_to(log_path)
    first = Session.create(log_path)
    first.append("turn/start", {"turn": 1})
    outcome: list[BaseException | None] = []

    def open_alias() -> None:
        try:
            Session.open(alias).close()
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=open_alias)
    thread.start()
    thread.join()
    assert isinstance(outcome[0], SessionError) and "already open for writing" in str(outcome[0])
    first.append("user/message", build.user("still mine"))
    first.close()
    with Session.open(alias) as session:
        assert [event.type for event in session.events][:2] == ["turn/start", "user/message"]  # then repair closes the turn


CREATOR = textwrap.dedent(
    """
    import sys
    from dshkit.session import Session
    path, start = sys.argv[1], float(sys.argv[2])
    import time
    while time.time() < start:
        pass
    try:
        Session.create(path).close()
        print("created")
    except FileExistsError:
        print("exists")
    except Exception as error:
        print(f"{type(error).__name__}: {error}")
    """
)


def test_threads_racing_to_create_one_log_get_one_log_and_file_exists_errors(log_path: Path):
    import threading

    for round_ in range(40):
        path = log_path.with_name(f"race{round_}{log_path.suffix}")
        barrier = threading.Barrier(6)
        outcomes: list[str] = []

        def create() -> None:
            barrier.wait()
            try:
                Session.create(path).close()
                outcomes.append("created")
            except FileExistsError:
                outcomes.append("exists")
            except Exception as error:
                outcomes.append(f"{type(error).__name__}: {error}")

        threads = [threading.Thread(target=create) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["created"] + ["exists"] * 5, outcomes
        with Session.open(path) as session:
            assert len(session.events) == 0


def test_processes_racing_to_create_one_log_get_one_log_and_file_exists_errors(log_path: Path):
    import time

    for round_ in range(4):
        path = log_path.with_name(f"race{round_}{log_path.suffix}")
        start = time.time() + 1.0  # every process spins until then: they start creating together
        children = [
            subprocess.Popen([sys.executable, "-c", CREATOR, str(path), repr(start)], stdout=subprocess.PIPE, text=True)
            for _ in range(4)
        ]
        outcomes = sorted(child.communicate(timeout=60)[0].strip() for child in children)
        assert outcomes == ["created"] + ["exists"] * 3, outcomes
