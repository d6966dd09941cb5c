"""Original-harness logs through main's catalog, location selection, session ids, CLI and checksums."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dshkit.cli.log import run as run_log_command
from dshkit.session import JsonlStore, Session, SessionCorruptError, convert_log, list_sessions, open_store
from dshkit.session.stores import known_suffixes
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.sqlite_store import DshSqliteStore
from tests.session.dsh.scenarios import SCENARIOS
from tests.session.dsh.test_original_logs import _two_sessions_db, _write

pytest.importorskip("zstandard")


def test_an_original_database_is_listed_and_selected_by_session_id(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    first, second = _two_sessions_db(db)
    infos = list_sessions(db)
    assert {info.id for info in infos} == {first.header["id"], second.header["id"]}
    by_id = {info.id: info for info in infos}
    for log in (first, second):
        info = by_id[log.header["id"]]
        assert info.event_count == len(log.records) and info.parent_id is None
        assert info.updated_at == max(record.get("time", record.get("time0")) for record in log.records)
    assert [info.id for info in infos] == sorted(by_id, key=lambda i: (-by_id[i].updated_at, -by_id[i].created_at, i))
    store = open_store(db, session_id=first.header["id"])
    assert type(store) is DshSqliteStore and store.session_id == first.header["id"]
    with pytest.raises(ValueError, match="pass session_id="):
        open_store(db)
    out, err = io.StringIO(), io.StringIO()
    assert run_log_command("list", str(db), out, err) == 0, err.getvalue()
    assert first.header["id"] in out.getvalue() and second.header["id"] in out.getvalue()
    out = io.StringIO()
    assert run_log_command("show", str(db), out, err, second.header["id"]) == 0, err.getvalue()
    assert second.header["id"] in out.getvalue()


def test_a_directory_lists_original_logs_by_their_events(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    packed = _write(log, tmp_path, "a.jsonl.zstd")
    with Session.create(tmp_path / "b.jsonl") as own:
        own_id = own.id
    infos = {info.id: info for info in list_sessions(tmp_path)}
    assert set(infos) == {log.header["id"], own_id}
    with Session.open(packed, read_only=True) as session:
        assert infos[log.header["id"]].event_count == len(session.events) == len(log.expanded())
        assert infos[log.header["id"]].updated_at == session.events[-1].time


def test_open_checks_the_session_id_of_an_original_file(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    path = _write(log, tmp_path, "a.jsonl")
    assert type(open_store(path, session_id=log.header["id"])) is DshJsonlStore
    with Session.open(path, read_only=True, session_id=log.header["id"]) as session:
        assert session.format == "dsh"
    with pytest.raises(ValueError, match="holds session"):
        Session.open(path, read_only=True, session_id="someone-else")


def test_the_cli_reads_a_compressed_original_log(tmp_path: Path) -> None:
    assert ".zstd" in known_suffixes()
    log = SCENARIOS["text_and_reasoning"]()
    path = _write(log, tmp_path, "session.jsonl.zstd")
    for command in ("show", "messages", "verify"):
        out, err = io.StringIO(), io.StringIO()
        assert run_log_command(command, str(path), out, err) == 0, (command, err.getvalue())
        assert out.getvalue()


def test_create_in_the_original_format_takes_a_session_id(tmp_path: Path) -> None:
    with Session.create(tmp_path / "named.jsonl", format="dsh", session_id="0b0c0d0e-1111-4222-8333-444455556666") as session:
        assert session.id == "0b0c0d0e-1111-4222-8333-444455556666"
    with Session.open(tmp_path / "named.jsonl", read_only=True) as reopened:
        assert reopened.format == "dsh" and reopened.id == "0b0c0d0e-1111-4222-8333-444455556666"
    with pytest.raises(ValueError, match="a store= holds one session"):
        Session.open(store=JsonlStore(tmp_path / "named.jsonl"), session_id="x")


def test_converting_to_dshkit_writes_checksummed_records(tmp_path: Path) -> None:
    log = SCENARIOS["text_and_reasoning"]()
    src = _write(log, tmp_path, "a.jsonl")
    convert_log(src, tmp_path / "b.jsonl", format="dshkit")
    lines = (tmp_path / "b.jsonl").read_bytes().splitlines()
    assert all(b',"crc":"' in line for line in lines)
    with Session.open(tmp_path / "b.jsonl") as session:
        assert session.format == "dshkit" and len(session.events) == len(log.expanded())
    damaged = tmp_path / "c.jsonl"
    damaged.write_bytes(b"\n".join([*lines[:2], lines[2].replace(b'"time":', b'"time": '), *lines[3:]]) + b"\n")
    with pytest.raises(SessionCorruptError, match="line 3"):
        Session.open(damaged)
