"""`list_sessions`, `Session.fork` and the CLI's `log list` / `--session`, on files and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from dshkit.cli import main
from dshkit.session import Session, SessionInfo, list_sessions


def test_a_directory_lists_its_logs_newest_first(tmp_path: Path, build):
    for name in ("old.jsonl", "mid.sqlite", "new.jsonl"):
        with Session.create(tmp_path / name) as session:
            build.tool_turn(session)
    (tmp_path / "notes.txt").write_text("not a log")
    infos = list_sessions(tmp_path)
    assert all(isinstance(info, SessionInfo) for info in infos)
    ids = {name: Session.open(tmp_path / name, read_only=True) for name in ("old.jsonl", "mid.sqlite", "new.jsonl")}
    for session in ids.values():
        session.close()
    assert [info.id for info in infos] == [ids[n].id for n in ("new.jsonl", "mid.sqlite", "old.jsonl")]
    assert infos[0].event_count == len(ids["new.jsonl"].events) and infos[0].parent_id is None
    assert infos[0].updated_at == ids["new.jsonl"].events[-1].time >= infos[0].created_at
    with pytest.raises(NotADirectoryError, match="postgresql:// URL or a directory"):
        list_sessions(tmp_path / "old.jsonl")


def test_fork_now_copies_the_log_and_names_its_parent(tmp_path: Path, build):
    with Session.create(tmp_path / "parent.jsonl") as parent:
        build.tool_turn(parent, 1)
        build.tool_turn(parent, 2)
        child = parent.fork()
        assert child.parent_id == parent.id and child.seed_length == len(parent.events)
        assert child.store is None and list(child.events) == list(parent.events)
        assert [m.id for m in child.messages()] == [m.id for m in parent.messages()]
        child.append("user/message", build.user("only in the child"))
        assert len(parent.messages()) + 1 == len(child.messages())


def test_fork_at_a_turn_end_message_or_seq(tmp_path: Path, build):
    with Session.create(tmp_path / "parent.sqlite") as parent:
        first = build.tool_turn(parent, 1)
        build.tool_turn(parent, 2)
        final_answer = first[-3].message
        by_message = parent.fork(final_answer.id, dest=tmp_path / "child.jsonl", session_id="child-1")
        by_seq = parent.fork(first[-1].seq)
        for child in (by_message, by_seq):
            assert list(child.events) == first and child.seed_length == len(first)
        by_message.close()
        with pytest.raises(ValueError, match="does not end its turn"):
            parent.fork(first[2].message.id)
        with pytest.raises(ValueError, match="inside a turn"):
            parent.fork(first[3].seq)
        with pytest.raises(ValueError, match="no message with that id"):
            parent.fork("nope")
        parent.append("turn/start", {"turn": 3})
        with pytest.raises(ValueError, match="a turn is open"):
            parent.fork()
    with Session.open(tmp_path / "child.jsonl") as reopened:
        assert reopened.id == "child-1" and reopened.parent_id == parent.id and list(reopened.events) == first
    assert {info.id: info.parent_id for info in list_sessions(tmp_path)} == {parent.id: None, "child-1": parent.id}


def test_a_jsonl_session_forks_into_postgres(tmp_path: Path, postgres_url, build):
    with Session.create(tmp_path / "local.jsonl") as parent:
        build.tool_turn(parent, 1, ["a", "b"])
        with parent.fork(dest=postgres_url) as child:
            child_id = child.id
    with Session.open(postgres_url, session_id=child_id) as child:
        assert list(child.events) == list(parent.events) and child.parent_id == parent.id
        build.tool_turn(child, 2)
    listed = {info.id: info for info in list_sessions(postgres_url)}
    assert listed[child_id].parent_id == parent.id
    assert listed[child_id].event_count == 2 * len(parent.events) - 2  # turn 2 has one call, turn 1 two


def test_cli_lists_and_reads_a_postgres_session(postgres_url, build, capsys):
    with Session.create(postgres_url, session_id="cli-session") as session:
        build.tool_turn(session)
        count = len(session.events)
    assert main(["log", "list", postgres_url]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("cli-session ") and f"{count} events" in line for line in out.splitlines())
    assert main(["log", "verify", postgres_url, "--session", "cli-session"]) == 0
    assert f"ok ({count} events" in capsys.readouterr().out
    assert main(["log", "messages", postgres_url, "--session", "cli-session"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    assert main(["log", "show", postgres_url]) == 1
    error = capsys.readouterr().err
    assert "choose one with --session ID" in error and "session_id=" not in error
    assert main(["log", "show", postgres_url, "--session", "missing"]) == 1
    assert "no session missing" in capsys.readouterr().err


def test_cli_lists_a_directory_and_checks_session_ids(tmp_path: Path, build, capsys):
    with Session.create(tmp_path / "a.jsonl", session_id="file-session") as session:
        build.tool_turn(session)
    assert main(["log", "list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("a.jsonl  file-session ")  # the file's name, then the session
    assert main(["log", "verify", str(tmp_path / "a.jsonl"), "--session", "other"]) == 1
    assert "holds session file-session, not other" in capsys.readouterr().err
    assert main(["log", "list", str(tmp_path / "missing")]) == 1


def test_a_fork_goes_through_open_store_and_never_overwrites(tmp_path: Path, build):
    taken = tmp_path / "taken.jsonl"
    taken.write_text("not mine\n")
    with Session.create(tmp_path / "parent.jsonl") as parent:
        build.tool_turn(parent, 1)
        with pytest.raises(FileExistsError):
            parent.fork(dest=taken)
        with pytest.raises(ValueError, match="cannot tell the store from .*notes.txt"):
            parent.fork(dest=tmp_path / "notes.txt")
        assert taken.read_text() == "not mine\n" and not (tmp_path / "notes.txt").exists()
        seeded = len(parent.events)
        with parent.fork(dest=tmp_path / "child.sqlite") as child:  # the parent keeps going, and so does the child
            build.tool_turn(parent, 2)
            build.tool_turn(child, 2)
            assert child.seed_length == seeded and len(child.events) == len(parent.events)
    with Session.open(tmp_path / "child.sqlite", read_only=True) as reopened:
        assert reopened.seed_length == seeded and len(reopened.events) == len(parent.events)
