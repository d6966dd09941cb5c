"""SQLite packs: sealed ranges of events as one row of `dshkit_packs`, read back as the same log."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dshkit.session import Session, SessionCorruptError
from dshkit.session._log.checksums import checksum
from dshkit.session.stores.sqlite import SqliteStore

PACK = 4


def facts(session: Session) -> list[tuple[Any, ...]]:
    """What two copies of one log share (each copy stamps its own append times)."""
    return [(event.seq, event.type, event.data, event.surface_op, event.source_event_seqs) for event in session.events]


def packed_store(path: Path, size: int = PACK) -> SqliteStore:
    store = SqliteStore(path)
    store.pack_events = size
    return store


def copy_into(source: Session, target: Session, start: int = 0) -> None:
    for event in source.events[start:]:
        target.append(event.type, event.data, surface_op=event.surface_op, source_event_seqs=event.source_event_seqs)


def query(path: Path, sql: str, *parameters: object) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as db, db:
        return db.execute(sql, parameters).fetchall()


@pytest.fixture
def jsonl_log(tmp_path: Path, build) -> Path:
    """Three tool turns (36 events) in JSON Lines: nine ranges of four."""
    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        for turn in (1, 2, 3):
            build.tool_turn(session, turn, [f"c{turn}"])
    return path


@pytest.fixture
def packed_log(tmp_path: Path, jsonl_log: Path) -> Path:
    """The same log in SQLite, written at packs of four: packs 0-7, events 32-35 as rows."""
    path = tmp_path / "log.sqlite"
    with Session.open(jsonl_log, read_only=True) as source, Session.create(store=packed_store(path), durability="none") as copy:
        copy_into(source, copy)
    return path


def test_a_writer_packs_every_range_once_the_next_is_written(packed_log: Path):
    assert query(packed_log, "SELECT first_seq, last_seq FROM dshkit_packs") == [(k * PACK, k * PACK + 3) for k in range(8)]
    assert query(packed_log, "SELECT seq FROM dshkit_events") == [(32,), (33,), (34,), (35,)]
    assert query(packed_log, "PRAGMA user_version") == [(1,)]
    # A pack is exactly the rows it replaced: the bodies joined by newlines, the checksums by commas.
    bodies, crcs = query(packed_log, "SELECT bodies, crcs FROM dshkit_packs WHERE first_seq = 8")[0]
    assert crcs == ",".join(str(checksum(body)) for body in bodies.split(b"\n")) and len(bodies.split(b"\n")) == PACK


@pytest.mark.parametrize("read_only", [True, False])
def test_a_packed_log_reopens_to_the_same_log_as_json_lines(jsonl_log: Path, packed_log: Path, read_only: bool):
    with Session.open(jsonl_log, read_only=True) as expected, Session.open(packed_log, read_only=read_only) as reopened:
        assert facts(reopened) == facts(expected) and len(expected.events) == 36
        assert reopened.messages() == expected.messages()


def test_appends_after_a_reopen_go_on_packing_at_the_logs_pack_size(tmp_path: Path, jsonl_log: Path, packed_log: Path, build):
    with Session.open(jsonl_log) as source:
        build.tool_turn(source, 4, ["c4", "c5"])
    with Session.open(jsonl_log, read_only=True) as source, Session.open(packed_log) as copy:  # a default store
        copy_into(source, copy, start=36)
        assert copy.store.pack_events == PACK
    # 50 events: packs 8-10 are due (range 11, events 44-47, is written whole; 48-49 are not).
    assert query(packed_log, "SELECT max(last_seq), count(*) FROM dshkit_packs") == [(43, 11)]
    for read_only in (True, False):
        with Session.open(packed_log, read_only=read_only) as reopened:
            assert facts(reopened) == facts_of(jsonl_log)


def facts_of(path: Path) -> list[tuple[Any, ...]]:
    with Session.open(path, read_only=True) as session:
        return facts(session)


def replace_in_pack(path: Path, first_seq: int, position: int, edit) -> None:
    """Apply `edit(bodies, crcs)` to record `position` of the pack starting at `first_seq`."""
    bodies, crcs = query(path, "SELECT bodies, crcs FROM dshkit_packs WHERE first_seq = ?", first_seq)[0]
    texts, stored = bodies.split(b"\n"), crcs.split(",")
    texts[position], stored[position] = edit(texts[position], stored[position])
    query(path, "UPDATE dshkit_packs SET bodies = ?, crcs = ? WHERE first_seq = ?", b"\n".join(texts), ",".join(stored), first_seq)


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("damage", ["body", "checksum"])
def test_a_record_corrupted_inside_a_pack_is_refused_naming_the_pack_and_event(packed_log: Path, read_only: bool, damage: str):
    if damage == "body":
        replace_in_pack(packed_log, 12, 2, lambda body, crc: (body[:-1] + b" }", crc))
    else:
        replace_in_pack(packed_log, 12, 2, lambda body, crc: (body, str(int(crc) ^ 1)))
    with pytest.raises(SessionCorruptError, match=r"log\.sqlite: dshkit_packs row 3 \(events 12-15\), event 14: checksum mismatch"):
        Session.open(packed_log, read_only=read_only)


def test_a_record_moved_inside_a_pack_is_refused_naming_its_place(packed_log: Path):
    # Every checksum matches its record, but event 17's record sits where event 16 belongs.
    bodies, crcs = query(packed_log, "SELECT bodies, crcs FROM dshkit_packs WHERE first_seq = 16")[0]
    texts, stored = bodies.split(b"\n"), crcs.split(",")
    texts[0:2], stored[0:2] = texts[1::-1], stored[1::-1]
    query(packed_log, "UPDATE dshkit_packs SET bodies = ?, crcs = ? WHERE first_seq = 16", b"\n".join(texts), ",".join(stored))
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 4 \(events 16-19\), event 16: .*seq 17 where 16"):
        Session.open(packed_log, read_only=True)


@pytest.mark.parametrize("read_only", [True, False])
def test_a_pack_holding_a_record_too_few_is_refused(packed_log: Path, read_only: bool):
    bodies, crcs = query(packed_log, "SELECT bodies, crcs FROM dshkit_packs WHERE first_seq = 20")[0]
    query(
        packed_log, "UPDATE dshkit_packs SET bodies = ?, crcs = ? WHERE first_seq = 20",
        b"\n".join(bodies.split(b"\n")[:-1]), ",".join(crcs.split(",")[:-1]),
    )
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 5 \(events 20-23\): holds 3 records and 3 checksums for 4 events"):
        Session.open(packed_log, read_only=read_only)


def test_a_pack_out_of_its_range_is_refused(packed_log: Path):
    query(packed_log, "UPDATE dshkit_packs SET last_seq = 10 WHERE first_seq = 8")
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 2 \(events 8-10\): not a pack of events 8-11"):
        Session.open(packed_log, read_only=True)
    query(packed_log, "UPDATE dshkit_packs SET last_seq = 11 WHERE first_seq = 8")
    query(packed_log, "DELETE FROM dshkit_packs WHERE first_seq = 8")
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 2 \(events 12-15\): not a pack of events 8-11"):
        Session.open(packed_log, read_only=True)


def test_a_database_of_a_newer_dshkit_is_refused_by_name(packed_log: Path):
    query(packed_log, "PRAGMA user_version=2")
    with pytest.raises(SessionCorruptError, match="database version 2 was written by a newer dshkit"):
        Session.open(packed_log, read_only=True)


def test_packs_are_read_by_their_table_even_when_the_version_was_lost(jsonl_log: Path, packed_log: Path):
    query(packed_log, "PRAGMA user_version=0")  # as a copy through SQL text (`.dump`) may leave it
    with Session.open(packed_log, read_only=True) as reopened:
        assert facts(reopened) == facts_of(jsonl_log)


def test_a_failure_inside_the_packing_transaction_leaves_the_rows(tmp_path: Path, jsonl_log: Path):
    # A real failure of the move (a trigger refusing the rows' delete): the pack made before it
    # is rolled back with it, every event stays a row, once, and the writer goes on appending.
    path = tmp_path / "log.sqlite"
    with Session.open(jsonl_log, read_only=True) as source, Session.create(store=packed_store(path), durability="none") as copy:
        copy_into(source, copy)  # packs 0-7
        query(path, "CREATE TRIGGER refuse BEFORE DELETE ON dshkit_events BEGIN SELECT RAISE(ABORT, 'no delete'); END")
        for _ in range(12):
            copy.append("plugin/note", {"ignorable": True})
    assert query(path, "SELECT count(*), min(seq), max(seq) FROM dshkit_events") == [(16, 32, 47)]
    assert query(path, "SELECT count(*) FROM dshkit_packs") == [(8,)]
    with Session.open(path, read_only=True) as reopened:
        assert [event.seq for event in reopened.events] == list(range(48))
    query(path, "DROP TRIGGER refuse")
    with Session.open(path) as writer:  # the next writer packs what is due
        writer.append("plugin/note", {"ignorable": True})
    assert query(path, "SELECT count(*) FROM dshkit_packs") == [(11,)]
    with Session.open(path, read_only=True) as reopened:
        assert [event.seq for event in reopened.events] == list(range(49))


def test_a_range_holding_a_newline_stays_rows(tmp_path: Path, jsonl_log: Path):
    # A record with a newline as JSON whitespace cannot be split back out of a pack: its range,
    # and every range after it, stays rows, which read as they always did.
    path = tmp_path / "log.sqlite"
    with Session.open(jsonl_log, read_only=True) as source, Session.create(store=packed_store(path), durability="none") as copy:
        copy_into(source, copy)
        (body,) = query(path, "SELECT body FROM dshkit_events WHERE seq = 33")[0]
        spaced = body.replace('"type":', '"type":\n', 1)
        query(path, "UPDATE dshkit_events SET body = ?, crc = ? WHERE seq = 33", spaced, checksum(spaced))
        for _ in range(8):
            copy.append("plugin/note", {"ignorable": True})
    assert query(path, "SELECT count(*), min(seq) FROM dshkit_events") == [(12, 32)]
    with Session.open(path, read_only=True) as reopened:
        assert facts(reopened)[:36] == facts_of(jsonl_log)


def test_a_database_made_before_packs_opens_unchanged_then_its_next_writer_packs_it(tmp_path: Path, jsonl_log: Path):
    path = tmp_path / "log.sqlite"
    with Session.open(jsonl_log, read_only=True) as source, Session.create(store=packed_store(path, 10**9), durability="none") as copy:
        copy_into(source, copy)  # as a dshkit before packs wrote it: rows only, user_version 0
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'dshkit_packs'") == []
    with Session.open(path, read_only=True) as reopened:
        assert facts(reopened) == facts_of(jsonl_log)
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'dshkit_packs'") == []
    with Session.open(store=packed_store(path)) as writer:
        writer.append("plugin/note", {"ignorable": True})
    assert query(path, "SELECT count(*), min(first_seq), max(last_seq) FROM dshkit_packs") == [(8, 0, 31)]
    with Session.open(path, read_only=True) as reopened:
        assert facts(reopened)[:36] == facts_of(jsonl_log) and len(reopened.events) == 37


def test_a_reader_opening_in_a_loop_while_a_writer_packs_sees_a_whole_prefix(tmp_path: Path):
    path = tmp_path / "log.sqlite"
    total = 400
    seen: list[int] = []
    failures: list[BaseException] = []
    started, done = threading.Event(), threading.Event()

    def read() -> None:
        started.wait()
        try:
            while not done.is_set():
                with Session.open(path, read_only=True) as reader:
                    seqs = [event.seq for event in reader.events]
                assert seqs == list(range(len(seqs))) and [event.data["n"] for event in reader.events] == seqs
                seen.append(len(seqs))
        except BaseException as error:  # reported by the test thread
            failures.append(error)

    with Session.create(store=packed_store(path), durability="none") as writer:
        thread = threading.Thread(target=read)
        thread.start()
        try:
            for n in range(total):
                writer.append("plugin/note", {"ignorable": True, "n": n})
                started.set()
                if n % 25 == 24:  # let the reader open at least once within each stretch of appends
                    opened = len(seen)
                    while len(seen) < opened + 2 and thread.is_alive():
                        time.sleep(0.001)
        finally:
            done.set()
            thread.join()
    assert not failures, failures[0]
    assert seen == sorted(seen) and len(set(seen)) >= total // 25  # many prefixes, never one going back
    assert query(path, "SELECT count(*) FROM dshkit_packs") == [(total // PACK - 1,)]


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    import dshkit
    from dshkit.session import Session
    from dshkit.session.stores.sqlite import SqliteStore
    store = SqliteStore(sys.argv[1])
    store.pack_events = 4
    try:
        session = Session.open(store=store, durability="always")
    except FileNotFoundError:
        session = Session.create(store=store, durability="always")
    print("ready", flush=True)
    n = len(session.events)
    while True:
        event = session.append("user/message", dshkit.create_user_message(f"append {n}", source={"kind": "user"}))
        print(event.seq, flush=True)
        n += 1
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_while_it_packs_loses_nothing_it_reported_done(tmp_path: Path):
    # At packs of four, a pack is made every fourth append: the kills land inside packing too.
    from support import DSHKIT_PATH

    path, rng, reported = tmp_path / "log.sqlite", random.Random(20261205), -1
    for _ in range(5):
        child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path), DSHKIT_PATH], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.05, 0.3))
        child.send_signal(signal.SIGKILL)
        done = [int(line) for line in child.stdout if line.endswith("\n")]  # a line cut short is no report
        child.stdout.close()
        assert child.wait(timeout=30) == -signal.SIGKILL
        reported = max([reported, *done])
        with Session.open(path, read_only=True) as reopened:
            texts = [message.text for message in reopened.messages()]
        assert texts == [f"append {n}" for n in range(len(texts))] and len(texts) > reported
        packs = query(path, "SELECT first_seq, last_seq FROM dshkit_packs")
        assert packs == [(k * 4, k * 4 + 3) for k in range(len(packs))]
        assert query(path, "SELECT min(seq) FROM dshkit_events") == [(len(packs) * 4,)]
    assert reported > 40 and len(packs) > 8  # the children made progress, and packs
