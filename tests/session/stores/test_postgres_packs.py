"""Packs in the PostgreSQL store against a real server: a packed session reads as the same log
unpacked, damage inside a pack names the pack and the event, a failed packing transaction loses
and duplicates nothing, readers racing a packing writer see whole prefixes, and a database made
before packs opens and then packs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from dshkit.session import PostgresStore, Session, SessionCorruptError, list_sessions
from dshkit.session._log.checksums import checksum
from dshkit.session._log.event_codec import encode_event, encode_header
from dshkit.session._verify import check_events
from dshkit.session.stores.postgres_schema import MIGRATIONS, SCHEMA_VERSION

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store needs psycopg (dshkit[postgres])")

PACK = 4


def store(url: str, session_id: str | None = None) -> PostgresStore:
    """A store packing every `PACK` events."""
    made = PostgresStore(url, session_id)
    made.pack_events = PACK
    return made


def write_turns(session: Session, build: Any, turns: range) -> None:
    for turn in turns:
        session.append("user/message", build.user(f"question {turn}"))
        build.tool_turn(session, turn, [f"c{turn}a", f"c{turn}b"])
        session.sync()


def layout(url: str, session_id: str) -> tuple[list[tuple[int, int]], list[int]]:
    """The session's packs (first, last seq) and its rows' seqs."""
    with psycopg.connect(url, autocommit=True) as connection:
        packs = connection.execute(
            "SELECT first_seq, last_seq FROM dshkit_packs WHERE session_id = %s ORDER BY first_seq", (session_id,)
        ).fetchall()
        seqs = [seq for (seq,) in connection.execute("SELECT seq FROM dshkit_events WHERE session_id = %s ORDER BY seq", (session_id,))]
    return packs, seqs


def assert_packed(url: str, session_id: str, events: int) -> None:
    """Aligned packs up to the last whole range but one; the rest rows."""
    packs, seqs = layout(url, session_id)
    assert packs == [(first, first + PACK - 1) for first in range(0, (events // PACK - 1) * PACK, PACK)]
    assert seqs == list(range(len(packs) * PACK, events))


def copy_to_jsonl(session: Session, path: Path) -> Path:
    with Session.create(path, durability="none") as copy:
        for event in session.events:
            copy.append(event.type, event.data, surface_op=event.surface_op, source_event_seqs=event.source_event_seqs)
    return path


def same_log(opened: Session, expected: Session) -> None:
    """The same events (but for their times: the copy was written later) and messages."""
    assert [event._replace(time=0) for event in opened.events] == [event._replace(time=0) for event in expected.events]
    assert [m.id for m in opened.messages()] == [m.id for m in expected.messages()]
    assert check_events(opened.events) == []


@pytest.mark.parametrize("durability", ["always", "checkpoint"])
def test_a_packed_session_reopens_as_the_same_log_unpacked_and_keeps_packing(postgres_url, build, tmp_path, durability):
    with Session.create(store=store(postgres_url), durability=durability) as session:
        write_turns(session, build, range(1, 4))
        session_id, events, written = session.id, list(session.events), len(session.events)
        jsonl = copy_to_jsonl(session, tmp_path / "same.jsonl")
    assert written > 4 * PACK
    assert_packed(postgres_url, session_id, written)
    with Session.open(jsonl, read_only=True) as expected:
        for read_only in (True, False):
            with Session.open(postgres_url, session_id=session_id, read_only=read_only) as opened:
                same_log(opened, expected)
                assert list(opened.events) == events
    with Session.open(store=store(postgres_url, session_id), durability=durability) as session:
        write_turns(session, build, range(4, 7))  # the message ids of packed events are known: no conflict
        written = len(session.events)
        copy_to_jsonl(session, tmp_path / "more.jsonl")
    assert_packed(postgres_url, session_id, written)
    with Session.open(tmp_path / "more.jsonl", read_only=True) as expected, Session.open(postgres_url, session_id=session_id) as opened:
        same_log(opened, expected)
    assert {info.id: info.event_count for info in list_sessions(postgres_url)}[session_id] == written


def test_the_default_pack_size_packs_a_long_session_written_in_one_sync(postgres_url, build):
    from dshkit.session.stores.packs import PACK_EVENTS

    with Session.create(postgres_url, durability="none") as session:
        for number in range(2 * PACK_EVENTS + 10):
            session.append("user/message", build.user(f"m{number}"))
        written = list(session.events)
    packs, seqs = layout(postgres_url, session.id)
    assert packs == [(0, PACK_EVENTS - 1)] and seqs == list(range(PACK_EVENTS, len(written)))
    with Session.open(postgres_url, session_id=session.id, read_only=True) as opened:
        assert list(opened.events) == written


def test_a_writer_keeps_the_pack_size_a_session_was_packed_at(postgres_url, build):
    with Session.create(store=store(postgres_url), durability="always") as session:
        write_turns(session, build, range(1, 3))
        session_id, texts = session.id, [m.text for m in session.messages()]
    with Session.open(postgres_url, session_id=session_id) as session:  # a store of the default size
        assert session.store.pack_events == PACK
        assert [m.text for m in session.messages()] == texts
        for number in range(2 * PACK):
            session.append("user/message", build.user(f"later {number}"))
    assert_packed(postgres_url, session_id, len(session.events))


def damage_pack(url: str, session_id: str, first_seq: int, **columns: Any) -> None:
    """Overwrite columns of a pack (its append-only trigger off for this transaction only)."""
    assignments = ", ".join(f"{name} = %({name})s" for name in columns)
    with psycopg.connect(url) as connection, connection.transaction():
        connection.execute("ALTER TABLE dshkit_packs DISABLE TRIGGER dshkit_packs_append_only")
        updated = connection.execute(
            f"UPDATE dshkit_packs SET {assignments} WHERE session_id = %(session)s AND first_seq = %(first)s",
            {**columns, "session": session_id, "first": first_seq},
        ).rowcount
        connection.execute("ALTER TABLE dshkit_packs ENABLE TRIGGER dshkit_packs_append_only")
    assert updated == 1


def pack_of(url: str, session_id: str, first_seq: int) -> tuple[bytes, str]:
    with psycopg.connect(url, autocommit=True) as connection:
        bodies, crcs = connection.execute(
            "SELECT bodies, crcs FROM dshkit_packs WHERE session_id = %s AND first_seq = %s", (session_id, first_seq)
        ).fetchone()
    return bytes(bodies), crcs


@pytest.fixture
def packed(postgres_url: str, build) -> str:
    """A session of 3 tool turns packed at 4 events a pack."""
    with Session.create(store=store(postgres_url), durability="checkpoint") as session:
        write_turns(session, build, range(1, 4))
        return session.id


@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "to_write"])
def test_a_record_changed_inside_a_pack_is_refused_naming_the_pack_and_event(postgres_url, packed, read_only):
    bodies, crcs = pack_of(postgres_url, packed, 8)
    records = bodies.split(b"\n")
    where = f"session {packed}: dshkit_packs row 2 \\(events 8-11\\), event 10: checksum mismatch"
    changed = records[2].replace(b'"time":', b'"time":1', 1)
    damage_pack(postgres_url, packed, 8, bodies=b"\n".join(records[:2] + [changed] + records[3:]))
    with pytest.raises(SessionCorruptError, match=where):
        Session.open(postgres_url, session_id=packed, read_only=read_only)
    stored = crcs.split(",")
    stored[2] = str(int(stored[2]) ^ 1)
    damage_pack(postgres_url, packed, 8, bodies=bodies, crcs=",".join(stored))
    with pytest.raises(SessionCorruptError, match=where):
        Session.open(postgres_url, session_id=packed, read_only=read_only)
    damage_pack(postgres_url, packed, 8, crcs=crcs)
    Session.open(postgres_url, session_id=packed, read_only=read_only).close()  # the intact pack reads again


def test_a_pack_whose_record_count_or_range_is_wrong_is_refused(postgres_url, packed):
    bodies, crcs = pack_of(postgres_url, packed, 4)
    short = {"bodies": bodies.rsplit(b"\n", 1)[0], "crcs": crcs.rsplit(",", 1)[0]}
    damage_pack(postgres_url, packed, 4, **short)
    with pytest.raises(SessionCorruptError, match=rf"dshkit_packs row 1 \(events 4-7\): holds 3 records and 3 checksums for 4 events"):
        Session.open(postgres_url, session_id=packed, read_only=True)
    damage_pack(postgres_url, packed, 4, bodies=bodies, crcs=crcs, last_seq=8)
    with pytest.raises(SessionCorruptError, match=rf"dshkit_packs row 1 \(events 4-8\): holds 4 records and 4 checksums for 5 events"):
        Session.open(postgres_url, session_id=packed)
    records, checksums = bodies.split(b"\n"), crcs.split(",")
    order = [1, 0, 2, 3]  # two records swapped, each with its own checksum: every checksum holds
    damage_pack(
        postgres_url, packed, 4, last_seq=7,
        bodies=b"\n".join(records[i] for i in order), crcs=",".join(checksums[i] for i in order),
    )
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 1 \(events 4-7\), event 4: seq 5 where 4 was expected"):
        Session.open(postgres_url, session_id=packed, read_only=True)
    damage_pack(postgres_url, packed, 4, bodies=bodies, crcs=crcs)
    Session.open(postgres_url, session_id=packed, read_only=True).close()
    with psycopg.connect(postgres_url) as connection, connection.transaction():  # a pack lost
        connection.execute("ALTER TABLE dshkit_packs DISABLE TRIGGER dshkit_packs_append_only")
        connection.execute("DELETE FROM dshkit_packs WHERE session_id = %s AND first_seq = 4", (packed,))
        connection.execute("ALTER TABLE dshkit_packs ENABLE TRIGGER dshkit_packs_append_only")
    with pytest.raises(SessionCorruptError, match=r"dshkit_packs row 1 \(events 8-11\): the events before it end at 3 \(events missing\)"):
        Session.open(postgres_url, session_id=packed, read_only=True)


def test_events_and_packs_are_append_only_but_for_moving_events_into_a_pack(postgres_url, packed):
    packs, seqs = layout(postgres_url, packed)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for statement, params in [
            ("DELETE FROM dshkit_events WHERE session_id = %s AND seq = %s", (packed, seqs[-1])),
            ("DELETE FROM dshkit_packs WHERE session_id = %s AND first_seq = %s", (packed, 0)),
            ("UPDATE dshkit_packs SET crcs = '' WHERE session_id = %s AND first_seq = %s", (packed, 0)),
        ]:
            with pytest.raises(psycopg.Error, match="append-only") as caught:
                connection.execute(statement, params)
            assert caught.value.sqlstate == "DK002"
    assert layout(postgres_url, packed) == (packs, seqs)


def open_writer(url: str, session_id: str) -> Session:
    return Session.open(store=store(url, session_id), durability="always")


@pytest.mark.parametrize("failure", ["error", "connection_lost"])
def test_a_failure_inside_the_packing_transaction_leaves_the_rows(postgres_url, build, tmp_path, failure):
    with Session.create(store=store(postgres_url), durability="always") as session:
        session_id = session.id
        for number in range(2 * PACK - 1):
            session.append("user/message", build.user(f"m{number}"))

        def fail(connection: Any) -> None:  # between the pack's insert and the rows' delete
            if failure == "error":
                connection.execute("SELECT 1 / 0")
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (connection.info.backend_pid,))

        session.store._during_pack = fail
        session.append("user/message", build.user("completes range 1"))  # acknowledged all the same
        assert session.store.pack_failures == 1
        assert layout(postgres_url, session_id) == ([], list(range(2 * PACK)))
        session.store._during_pack = None
        session.append("user/message", build.user("next"))  # packs again (on a new connection if lost)
        written = len(session.events)
        copy_to_jsonl(session, tmp_path / "log.jsonl")
    assert_packed(postgres_url, session_id, written)
    with Session.open(tmp_path / "log.jsonl", read_only=True) as expected, Session.open(postgres_url, session_id=session_id) as opened:
        same_log(opened, expected)


def test_a_batch_retried_after_a_lost_acknowledgement_is_stored_once_after_packing(postgres_url, build, tmp_path):
    with Session.create(store=store(postgres_url), durability="checkpoint") as session:
        write_turns(session, build, range(1, 3))
        assert layout(postgres_url, session.id)[0]  # packs were made before the lost write
        killed: list[int] = []

        def drop_connection_after_commit(connection: Any) -> None:
            if killed:
                return
            killed.append(connection.info.backend_pid)
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 10000)", (connection.info.backend_pid,))
            connection.execute("SELECT 1")  # the acknowledgement never arrives

        session.store._after_write = drop_connection_after_commit
        write_turns(session, build, range(3, 5))  # the batch is resent, compared with the rows, then packed
        assert killed and session.store.retries == 1
        written = len(session.events)
        copy_to_jsonl(session, tmp_path / "log.jsonl")
    assert_packed(postgres_url, session.id, written)
    with Session.open(tmp_path / "log.jsonl", read_only=True) as expected, Session.open(postgres_url, session_id=session.id) as opened:
        same_log(opened, expected)


def test_readers_racing_a_packing_writer_always_see_a_whole_prefix(postgres_url, build):
    with Session.create(store=store(postgres_url), durability="always") as session:
        session_id = session.id
    reads: list[list[Any]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                with Session.open(postgres_url, session_id=session_id, read_only=True) as reader:
                    reads.append(list(reader.events))
        except BaseException as error:
            errors.append(error)
            raise

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        with open_writer(postgres_url, session_id) as writer:
            for number in range(40 * PACK):
                writer.append("user/message", build.user(f"m{number}"))
            final = list(writer.events)
    finally:
        done.set()
        for thread in readers:
            thread.join()
    assert errors == []
    assert len(reads) > 10 and len({len(events) for events in reads}) > 5
    assert all(events == final[: len(events)] for events in reads)
    assert_packed(postgres_url, session_id, len(final))


def version_3_database(url: str, session_id: str, events: list[Any]) -> None:
    """Tables as schema version 3 (before packs) made them, holding one session as it wrote it."""
    with psycopg.connect(url, autocommit=True) as connection:
        for version in range(3):
            for statement in MIGRATIONS[version]:
                connection.execute(statement)
        connection.execute("UPDATE dshkit_schema SET version = 3")
        header = encode_header(session_id, 1)
        connection.execute(
            "INSERT INTO dshkit_sessions (session_id, header, crc, created_at) VALUES (%s, %s, %s, 1)", (session_id, header, checksum(header))
        )
        for event in events:
            record = encode_event(event)
            connection.execute(
                "INSERT INTO dshkit_events (session_id, seq, type, time, body, crc) VALUES (%s, %s, %s, %s, %s, %s)",
                (session_id, event.seq, event.type, event.time, record, checksum(record)),
            )


def test_a_database_made_before_packs_opens_and_then_packs(fresh_database, build, tmp_path):
    with Session.create(tmp_path / "old.jsonl", durability="none") as old:
        write_turns(old, build, range(1, 4))
        events = list(old.events)
    version_3_database(fresh_database, "old", events)
    with Session.open(fresh_database, session_id="old", read_only=True) as opened, Session.open(tmp_path / "old.jsonl", read_only=True) as expected:
        same_log(opened, expected)
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM dshkit_schema").fetchall() == [(SCHEMA_VERSION,)] == [(4,)]
    assert layout(fresh_database, "old") == ([], list(range(len(events))))  # opening packs nothing
    with open_writer(fresh_database, "old") as writer:
        writer.append("user/message", build.user("after the upgrade"))  # the writer packs from seq 0
        written = len(writer.events)
        copy_to_jsonl(writer, tmp_path / "new.jsonl")
    assert_packed(fresh_database, "old", written)
    with Session.open(tmp_path / "new.jsonl", read_only=True) as expected, Session.open(fresh_database, session_id="old") as opened:
        same_log(opened, expected)


def test_the_latest_seq_a_server_watches_is_a_row_of_a_packed_session(postgres_url, packed):
    from dshkit.serve.places import ReadingPool, _postgres_latest

    with Session.open(postgres_url, session_id=packed, read_only=True) as session:
        last = session.events[-1].seq
    pool = ReadingPool(postgres_url)
    try:
        assert _postgres_latest(pool, [packed]) == {packed: last}
    finally:
        pool.close()
