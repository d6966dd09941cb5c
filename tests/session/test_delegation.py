"""Subagent logs at the session layer: where a child is created, its header, reading the links back."""

from __future__ import annotations

from pathlib import Path

import pytest

from dshkit.session import Session, children_of, create_child_session, delegation_depth, delegation_of, list_sessions
from dshkit.session.errors import SessionCorruptError
from dshkit.session._transcript import render


def test_a_child_goes_beside_its_parent_with_the_same_store_and_names_it(log_path: Path) -> None:
    with Session.create(log_path) as parent:
        child = create_child_session(parent, "call-1")
        child_path = log_path.with_name(f"{child.id}{log_path.suffix}")
        assert child.store is not None and Path(child.store.path) == child_path  # type: ignore[attr-defined]
        assert delegation_of(child) == (parent.id, "call-1", 1) and child.parent_id == parent.id and child.seed_length == 0
        grandchild = create_child_session(child, "call-2")
        assert delegation_depth(grandchild) == 2
        grandchild.close()
        child.close()
    with Session.open(child_path) as reopened:  # the header, not memory, carries the link and depth
        assert delegation_of(reopened) == (parent.id, "call-1", 1)
    infos = {info.id: info for info in list_sessions(log_path.parent)}
    assert infos[child.id].parent_id == parent.id and infos[child.id].origin == "subagent"
    assert infos[parent.id].parent_id is None and infos[parent.id].origin is None


def test_a_top_level_session_and_a_fork_are_no_subagents(tmp_path: Path) -> None:
    with Session.create(tmp_path / "top.jsonl") as top:
        assert delegation_of(top) is None and delegation_depth(top) == 0
        with top.fork(dest=tmp_path / "fork.jsonl") as fork:
            assert delegation_of(fork) is None and fork.parent_id == top.id
    assert delegation_of(Session()) is None


def test_a_parent_in_memory_has_its_child_in_memory(tmp_path: Path) -> None:
    parent = Session()
    child = create_child_session(parent, "c1")
    assert child.store is None and delegation_of(child) == (parent.id, "c1", 1)
    elsewhere = create_child_session(parent, "c2", location=tmp_path)
    assert (tmp_path / f"{elsewhere.id}.jsonl").exists()
    elsewhere.close()


def test_bad_arguments_are_refused_naming_them(tmp_path: Path) -> None:
    parent = Session()
    with pytest.raises(ValueError, match="call_id"):
        create_child_session(parent, "")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        create_child_session(parent, "c1", location=tmp_path / "missing")


def test_children_of_reads_the_started_events_and_the_transcript_shows_both_links(tmp_path: Path) -> None:
    with Session.create(tmp_path / "parent.jsonl") as parent:
        child = create_child_session(parent, "c7")
        parent.append("agent/subagent/started", {"call_id": "c7", "session_id": child.id, "depth": 1, "ignorable": True})
        assert children_of(parent) == {"c7": child.id}
        lines = list(render(parent.events, session_id=parent.id, created_at=parent.created_at, where="p", header=parent.stored_header))
        assert lines[-1] == f"#0 subagent session {child.id} started by call c7 (depth 1)"
        child_lines = list(render(child.events, session_id=child.id, created_at=child.created_at, where="c", header=child.stored_header))
        assert child_lines[1] == f"subagent of session {parent.id} (call c7, depth 1)"
        child.close()


def test_a_child_of_a_postgres_log_is_in_the_same_database(fresh_database: str) -> None:
    with Session.create(fresh_database) as parent:
        with create_child_session(parent, "c1") as child:
            assert delegation_of(child) == (parent.id, "c1", 1)
    with Session.open(fresh_database, session_id=child.id, read_only=True) as reopened:
        assert delegation_of(reopened) == (parent.id, "c1", 1)
    infos = {info.id: info for info in list_sessions(fresh_database)}
    assert infos[child.id].parent_id == parent.id


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"parent_call_id": "c1", "delegation_depth": -1000}, "'delegation_depth' must be an int >= 1, not -1000"),
        ({"parent_call_id": "c1"}, "'delegation_depth' must be an int >= 1, not None"),
        ({"parent_call_id": "c1", "delegation_depth": 0}, "'delegation_depth' must be an int >= 1, not 0"),
        ({"parent_call_id": "c1", "delegation_depth": True}, "'delegation_depth' must be an int >= 1, not True"),
        ({"parent_call_id": "c1", "delegation_depth": "2"}, "'delegation_depth' must be an int >= 1, not '2'"),
        ({"delegation_depth": 1}, "'parent_call_id' must be a non-empty str, not None"),
        ({"parent_call_id": "", "delegation_depth": 1}, "'parent_call_id' must be a non-empty str, not ''"),
    ],
)
def test_a_malformed_subagent_header_is_refused_naming_the_log_and_the_field(
    tmp_path: Path, fields: dict[str, object], problem: str
) -> None:
    path = tmp_path / "child.jsonl"
    Session.create(path, header_fields={"origin": "subagent", "parent_id": "01PARENT", "seed_length": 0, **fields}).close()
    with Session.open(path) as child:  # the log opens: only its delegation is unreadable
        for read in (delegation_of, delegation_depth):
            with pytest.raises(SessionCorruptError) as caught:
                read(child)
            assert str(caught.value) == f"{path}: line 1: a subagent log's header: {problem}"
