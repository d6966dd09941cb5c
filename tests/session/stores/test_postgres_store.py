"""The PostgreSQL store against a real server: fencing, idempotent appends, retry, crash take-over."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import dshkit
from dshkit.session import (
    PostgresStore,
    Session,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    list_sessions,
)
from dshkit.session._log.event_codec import encode_event, encode_header
from dshkit.session.events import Event
from dshkit.session._log.checksums import checksum
from dshkit.session.stores.postgres import ensure_schema
from dshkit.session.stores.postgres_schema import SCHEMA_VERSION, WRITE_EVENTS, write_params
from dshkit.session._verify import check_events

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store needs psycopg (dshkit[postgres])")

SRC = str(Path(dshkit.__file__).resolve().parent.parent)


def rows(url: str, session_id: str) -> list[tuple[int, str]]:
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute(
            "SELECT seq, body FROM dshkit_events WHERE session_id = %s ORDER BY seq", (session_id,)
        ).fetchall()


def run_child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize("durability", ["always", "checkpoint", "none"])
def test_a_session_round_trips_and_continues(postgres_url, build, durability):
    with Session.create(postgres_url, durability=durability) as session:
        build.tool_turn(session, 1, ["c1", "c2"])
        session.append("plugin/notes", {"ignorable": True, "text": "héllo ✓ \u2028", "n": -2**63})
        written, session_id = list(session.events), session.id
    with Session.open(postgres_url, session_id=session_id, durability=durability) as reopened:
        assert list(reopened.events) == written
        assert [m.id for m in reopened.messages()] == [e.message.id for e in written if e.message is not None]
        reopened.append("user/message", build.user("more"))
    assert [seq for seq, _ in rows(postgres_url, session_id)] == list(range(len(written) + 1))


def test_checkpoint_holds_appends_until_sync(postgres_url, build):
    with Session.create(postgres_url, durability="checkpoint") as session:
        session.append("user/message", build.user("one"))
        session.append("user/message", build.user("two"))
        assert rows(postgres_url, session.id) == []
        session.sync()
        assert len(rows(postgres_url, session.id)) == 2


def test_a_given_session_id_is_used_and_never_reused(postgres_url):
    Session.create(postgres_url, session_id="worker-7/task-1").close()
    with Session.open(postgres_url, session_id="worker-7/task-1", read_only=True) as session:
        assert session.id == "worker-7/task-1"
    with pytest.raises(FileExistsError, match="worker-7/task-1 already exists"):
        Session.create(postgres_url, session_id="worker-7/task-1")
    with pytest.raises(FileNotFoundError, match="no session nope"):
        Session.open(postgres_url, session_id="nope")


def test_creating_an_id_whose_writer_is_open_or_racing_is_a_file_exists_error(postgres_url):
    import threading

    with Session.create(postgres_url, session_id="worker-8/task-1"):
        with pytest.raises(FileExistsError, match="worker-8/task-1 already exists"):
            Session.create(postgres_url, session_id="worker-8/task-1")
    for round_ in range(10):
        session_id = f"race-{round_}"
        barrier = threading.Barrier(4)
        outcomes: list[str] = []

        def create() -> None:
            barrier.wait()
            try:
                Session.create(postgres_url, session_id=session_id).close()
                outcomes.append("created")
            except FileExistsError:
                outcomes.append("exists")
            except Exception as error:
                outcomes.append(f"{type(error).__name__}: {error}")

        threads = [threading.Thread(target=create) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["created"] + ["exists"] * 3, outcomes


def test_bad_urls_and_a_missing_session_id_are_clear(postgres_url, tmp_path):
    with pytest.raises(ValueError, match="pass session_id="):
        Session.open(postgres_url)
    with pytest.raises(ValueError, match="bad PostgreSQL URL"):
        Session.create("postgresql://user@host:notaport/db")
    with pytest.raises(ValueError, match="the URL schemes are postgresql://"):
        Session.create("mysql://user@host/db")
    with pytest.raises(ValueError, match="session_id must be a non-empty str"):
        Session.create(postgres_url, session_id="")
    missing = f"postgresql://postgres@/dshkit_test?host={tmp_path}"
    with pytest.raises(SessionError, match="cannot connect to"):
        Session.create(missing)
    secret = f"postgresql://postgres:hunter2@/dshkit_test?host={tmp_path}"
    with pytest.raises(SessionError) as caught:
        Session.open(secret, session_id="x")
    assert "hunter2" not in str(caught.value)


def test_a_second_writer_is_refused_before_writing_and_readers_are_not(postgres_url, build):
    with Session.create(postgres_url) as first:
        first.append("user/message", build.user("mine"))
        first.sync()
        with pytest.raises(SessionError, match="open for writing by another connection"):
            Session.open(postgres_url, session_id=first.id)
        with Session.open(postgres_url, session_id=first.id, read_only=True) as reader:
            assert [m.text for m in reader.messages()] == ["mine"]
    Session.open(postgres_url, session_id=first.id).close()  # released on close


WRITER = """
    import sys, time, dshkit
    from dshkit.session import Session, SessionError
    url, session_id, role = sys.argv[1:4]
    try:
        session = Session.open(url, session_id=session_id, durability="always")
    except SessionError as error:
        print("refused", error, flush=True)
        sys.exit(3)
    print("writing", flush=True)
    session.append("user/message", dshkit.create_user_message(role, source={"kind": "user"}))
    print("wrote", flush=True)
    sys.stdin.readline()
    session.close()
"""


def test_two_processes_writing_one_session_never_fork_it(postgres_url):
    Session.create(postgres_url, session_id="shared").close()
    first = run_child(WRITER, postgres_url, "shared", "first")
    assert first.stdout.readline() == "writing\n" and first.stdout.readline() == "wrote\n"
    second = run_child(WRITER, postgres_url, "shared", "second")
    out, _ = second.communicate(timeout=60)
    assert second.returncode == 3 and out.startswith("refused") and "writing\n" not in out.splitlines(keepends=True)
    first.communicate("\n", timeout=60)
    assert first.returncode == 0
    with Session.open(postgres_url, session_id="shared", read_only=True) as session:
        assert [m.text for m in session.messages()] == ["first"]


KILLED_MID_TURN = """
    import sys, time, dshkit
    from dshkit.session import Session
    url, session_id = sys.argv[1:3]
    session = Session.create(url, session_id=session_id, durability="checkpoint")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", dshkit.create_user_message("go", source={"kind": "user"}))
    session.append("request/header", {"header": {"system": "s", "tools": [], "config": {}}, "reason": "initial"})
    calls = [{"type": "tool_call", "id": c, "name": "lookup", "arguments": "{}"} for c in ("c1", "c2")]
    session.append("assistant/message", {"turn": 1, "step": 1, "message": dshkit.create_assistant_message(calls, provider="t", model="m")})
    session.append("tool/call", {"turn": 1, "step": 1, "call_id": "c1", "name": "lookup", "arguments": "{}"})
    session.sync()  # the agent's durability point before a tool body
    print("in tool body", flush=True)
    time.sleep(600)
"""


def test_a_worker_killed_mid_turn_is_taken_over_repaired_and_continued(postgres_url, build):
    child = run_child(KILLED_MID_TURN, postgres_url, "crashy")
    assert child.stdout.readline() == "in tool body\n"
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    session = None
    for _ in range(200):  # the server releases the lock once it notices the dead connection
        try:
            session = Session.open(postgres_url, session_id="crashy")
            break
        except SessionError:
            time.sleep(0.05)
    assert session is not None, "the dead writer's lock was never released"
    with session:
        types = [event.type for event in session.events]
        assert types[6:] == ["tool/result", "tool/result", "step/end", "turn/end"]
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        assert [e.data["error"]["code"] for e in session.events if e.type == "tool/result"] == ["INTERRUPTED", "NOT_STARTED"]
        build.tool_turn(session, 2, ["c3"])
    with Session.open(postgres_url, session_id="crashy", read_only=True) as reread:
        assert check_events(reread.events) == []
        assert len(reread.events) == len(rows(postgres_url, "crashy"))


@pytest.mark.parametrize("durability", ["always", "checkpoint"])
def test_a_write_whose_acknowledgement_is_lost_is_retried_once_and_stored_once(postgres_url, build, durability):
    session = Session.create(postgres_url, durability=durability)
    store: PostgresStore = session.store
    killed = []

    def drop_connection_after_commit(connection):
        if killed:
            return
        killed.append(connection.info.backend_pid)
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (connection.info.backend_pid,))
        connection.execute("SELECT 1")  # the acknowledgement never arrives: a real connection error

    store._after_write = drop_connection_after_commit
    with session:
        event = session.append("user/message", build.user("once"))
        session.sync()
        assert killed and store.retries == 1
        assert store._connection.info.backend_pid != killed[0]
        session.append("user/message", build.user("after"))
    assert rows(postgres_url, session.id) == [(0, encode_event(event)), (1, rows(postgres_url, session.id)[1][1])]
    with Session.open(postgres_url, session_id=session.id) as reopened:
        assert [m.text for m in reopened.messages()] == ["once", "after"]


def test_an_identical_record_is_accepted_and_a_different_one_is_a_conflict(postgres_url, build):
    store = PostgresStore(postgres_url, "idempotent")
    store.create(encode_header("idempotent", 1), "always")
    event = Event("user/message", 0, 5, build.user("a"), "append", ())
    store.append(event, encode_event(event))
    store.append(event, encode_event(event))  # a retry: the identical record is already there
    assert len(rows(postgres_url, "idempotent")) == 1
    other = Event("user/message", 0, 5, build.user("b"), "append", ())
    with pytest.raises(SessionConflictError, match="event 0 is already stored with a different record"):
        store.append(other, encode_event(other))
    store.close()
    assert rows(postgres_url, "idempotent") == [(0, encode_event(event))]


def _plan_nodes(plan: dict) -> list[dict]:
    return [plan] + [node for child in plan.get("Plans", ()) for node in _plan_nodes(child)]


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_a_write_reads_no_stored_event_unless_some_row_was_already_there(postgres_url, plan_cache_mode):
    """The cost of a write must not grow with the session: new rows are inserted, nothing is scanned."""
    session_id = f"plan-{plan_cache_mode}"
    body = '{"seq":%d,"time":1,"type":"plugin/x","data":{"ignorable":true}}'

    def batch(first: int, count: int, text: str = body) -> dict:
        return write_params(
            session_id, [(seq, "plugin/x", 1, None, text % seq, checksum(text % seq)) for seq in range(first, first + count)]
        )

    def reads_of_stored_events(connection, params) -> int:
        with connection.transaction(force_rollback=True):
            (plan,), = connection.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + WRITE_EVENTS, params, prepare=True).fetchone()
        return sum(
            node["Actual Loops"] for node in _plan_nodes(plan["Plan"])
            if node.get("Relation Name") == "dshkit_events" and node["Node Type"] != "ModifyTable"
        )

    with psycopg.connect(postgres_url, autocommit=True) as connection:
        ensure_schema(connection)
        connection.execute("INSERT INTO dshkit_sessions VALUES (%s, '{}', 0, NULL, 0)", (session_id,))
        for first in range(0, 2000, 200):
            connection.execute(WRITE_EVENTS, batch(first, 200)).fetchone()
        connection.execute("ANALYZE dshkit_events")
        connection.execute(f"SET plan_cache_mode = {plan_cache_mode}")
        assert reads_of_stored_events(connection, batch(2000, 8)) == 0
        assert reads_of_stored_events(connection, batch(1996, 8)) > 0  # 4 were stored: they are compared
        assert connection.execute(WRITE_EVENTS, batch(1996, 8)).fetchone() == (8, 4)  # 4 identical, 4 new
        with pytest.raises(psycopg.Error, match="event 2003 is already stored with a different record"):
            connection.execute(WRITE_EVENTS, batch(2003, 2, body + " ")).fetchone()
    assert len(rows(postgres_url, session_id)) == 2004


def test_a_writer_that_lost_its_lock_cannot_fork_the_log(postgres_url, build):
    stale = Session.create(postgres_url, durability="always")
    stale.append("user/message", build.user("shared start"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # the stale writer's connection dies
        # With a timeout the call waits for the backend to exit: without it, the successor could
        # find the lock still held by a backend not yet gone (seen on a loaded machine).
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (stale.store._connection.info.backend_pid,))
    with Session.open(postgres_url, session_id=stale.id, durability="always") as successor:
        successor.append("user/message", build.user("successor's"))
        with pytest.raises(SessionError, match="open for writing by another connection"):
            stale.append("user/message", build.user("stale's"))  # reconnects, but the lock is taken
    with pytest.raises(SessionConflictError, match="event 1 is already stored"):
        stale.append("user/message", build.user("stale's"))  # lock free now: the key still guards
    stale.close()
    with Session.open(postgres_url, session_id=stale.id, read_only=True) as session:
        assert [m.text for m in session.messages()] == ["shared start", "successor's"]


def verify_all(url: str, ids: list[str], turns: int) -> None:
    for session_id in ids:
        with Session.open(url, session_id=session_id, read_only=True) as session:
            assert check_events(session.events) == []
            assert sum(e.type == "turn/end" for e in session.events) == turns


@pytest.mark.parametrize("durability", ["always", "checkpoint"])
def test_fifty_sessions_written_from_threads(postgres_url, build, durability):
    ids: list[str] = []
    errors: list[BaseException] = []

    def work():
        try:
            with Session.create(postgres_url, durability=durability) as session:
                ids.append(session.id)
                for turn in range(1, 4):
                    build.tool_turn(session, turn, [f"c{turn}"])
                    session.sync()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(ids) == 50
    verify_all(postgres_url, ids, 3)


def test_fifty_sessions_written_from_asyncio_tasks(postgres_url, build):
    async def work(number: int) -> str:
        session = await asyncio.to_thread(Session.create, postgres_url, session_id=f"task-{number}")
        with session:
            for turn in range(1, 4):
                build.tool_turn(session, turn, [f"c{turn}"])
                await asyncio.to_thread(session.sync)
                await asyncio.sleep(0)
        return session.id

    async def main() -> list[str]:
        return list(await asyncio.gather(*(work(n) for n in range(50))))

    ids = asyncio.run(main())
    verify_all(postgres_url, ids, 3)
    listed = {info.id: info for info in list_sessions(postgres_url)}
    assert all(listed[session_id].event_count == 3 * 12 for session_id in ids)


def test_events_are_append_only(postgres_url, build):
    with Session.create(postgres_url, durability="always") as session:
        session.append("user/message", build.user())
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for statement in ("UPDATE dshkit_events SET body = 'x'", "DELETE FROM dshkit_events"):
            with pytest.raises(psycopg.Error, match="append-only") as caught:
                connection.execute(statement + " WHERE session_id = %s", (session.id,))
            assert caught.value.sqlstate == "DK002"
    assert len(rows(postgres_url, session.id)) == 1
    import dshkit.session.stores.postgres_schema as schema
    import dshkit.session.stores.postgres as store_module
    import dshkit.session.stores.postgres_packs as packs

    for module in (schema, store_module, packs):  # the one DELETE moves events into a pack
        source = Path(module.__file__).read_text().replace(f"DELETE_PACKED = \"{packs.DELETE_PACKED}\"", "")
        assert not re.search(r"(UPDATE|DELETE FROM)\s+dshkit_events", source.replace("UPDATE OR DELETE ON dshkit_events", ""))


def test_the_schema_is_versioned_and_a_newer_one_is_refused(fresh_database):
    Session.create(fresh_database).close()
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM dshkit_schema").fetchall() == [(SCHEMA_VERSION,)]
        connection.execute("UPDATE dshkit_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(SessionError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade dshkit"):
        Session.create(fresh_database)
    with pytest.raises(SessionError, match="upgrade dshkit"):
        list_sessions(fresh_database)


def test_first_use_from_many_threads_creates_the_schema_once(fresh_database):
    errors: list[BaseException] = []

    def create():
        try:
            Session.create(fresh_database).close()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(list_sessions(fresh_database)) == 8


def test_an_async_agent_runs_on_a_postgres_session(postgres_url):
    from dshkit.agent import Agent, Tool
    from dshkit.models import ScriptedModel

    loop_threads: set[int] = set()

    async def lookup(arguments, ctx):
        return "found"

    call = [
        {"type": "tool_call_delta", "index": 0, "id": "call-1", "name": "lookup", "arguments": "{}"},
        {"type": "finish", "reason": "tool_calls"},
    ]
    session = Session.create(postgres_url, durability="checkpoint")
    store_sync = session.store.sync

    def sync_recording_thread():
        loop_threads.add(threading.get_ident())
        store_sync()

    session.store.sync = sync_recording_thread
    tool = Tool("lookup", "looks up", {"type": "object", "properties": {}}, lookup)

    async def main():
        agent = Agent(ScriptedModel([call, "the answer"]), session=session, tools=[tool], system="s")
        agent.followup(dshkit.create_user_message("question", source={"kind": "user"}))
        await agent.when_idle()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert loop_threads and loop_thread not in loop_threads  # the durability points ran off the loop
    session.close()
    with Session.open(postgres_url, session_id=session.id, read_only=True) as reread:
        assert check_events(reread.events) == []
        assert [m.text for m in reread.messages()][-1] == "the answer"


@pytest.mark.parametrize(("durability", "setting"), [("always", "on"), ("checkpoint", "on"), ("none", "off")])
def test_durability_none_commits_without_waiting_for_the_wal_flush(postgres_url, durability, setting):
    with Session.create(postgres_url, durability=durability) as session:
        assert session.store._connection.execute("SHOW synchronous_commit").fetchone() == (setting,)


# -- checksums (format version 2) ----------------------------------------------------------------


def _update_event(connection, session_id: str, seq: int, body: str, crc: int | None) -> None:
    """Overwrite a stored event (the append-only trigger is off for this transaction only)."""
    with connection.transaction():
        connection.execute("ALTER TABLE dshkit_events DISABLE TRIGGER dshkit_events_append_only")
        connection.execute(
            "UPDATE dshkit_events SET body = %s, crc = %s WHERE session_id = %s AND seq = %s", (body, crc, session_id, seq)
        )
        connection.execute("ALTER TABLE dshkit_events ENABLE TRIGGER dshkit_events_append_only")


def test_every_record_carries_its_checksum_and_a_retry_must_match_it(postgres_url, build):
    with Session.create(postgres_url, durability="always") as session:
        build.tool_turn(session, 1, ["c1"])
        written = list(session.events)
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        header, header_crc = connection.execute(
            "SELECT header, crc FROM dshkit_sessions WHERE session_id = %s", (session.id,)
        ).fetchone()
        stored = connection.execute(
            "SELECT body, crc FROM dshkit_events WHERE session_id = %s ORDER BY seq", (session.id,)
        ).fetchall()
        assert header_crc == checksum(header) and '"version":2' in header
        assert stored == [(encode_event(event), checksum(encode_event(event))) for event in written]
        body, crc = stored[0]
        row = (0, "turn/start", written[0].time, None, body, crc)
        assert connection.execute(WRITE_EVENTS, write_params(session.id, [row])).fetchone() == (1, 0)  # identical
        with pytest.raises(psycopg.Error, match="event 0 is already stored with a different record"):
            connection.execute(WRITE_EVENTS, write_params(session.id, [row[:5] + (crc ^ 1,)])).fetchone()
        with pytest.raises(psycopg.Error, match="event 0 is already stored with a different record"):
            connection.execute(WRITE_EVENTS, write_params(session.id, [row[:5] + (None,)])).fetchone()


def test_the_events_are_read_in_one_query_and_a_bad_checksum_still_names_its_event(postgres_url, build):
    # One value per column, checked natively; a checksum out of a CRC's range, NULL, or a record
    # holding a newline sends the read row by row, which names the event (or reads it as written).
    from dshkit._core import Records
    from dshkit.session.stores.postgres import PostgresStore

    with Session.create(postgres_url, durability="always") as session:
        build.tool_turn(session, 1, ["c1"])
        expected = [message.id for message in session.messages()]
    store = PostgresStore(postgres_url, session_id=session.id)
    try:
        _, records = store.load("none", read_only=True)
    finally:
        store.close()
    assert isinstance(records, Records) and len(records) == len(session.events)
    seq = next(event.seq for event in session.events if event.type == "assistant/message")
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        body, crc = connection.execute(
            "SELECT body, crc FROM dshkit_events WHERE session_id = %s AND seq = %s", (session.id, seq)
        ).fetchone()
        for stored in (crc - (1 << 32), crc + (1 << 32), None):
            _update_event(connection, session.id, seq, body, stored)
            with pytest.raises(SessionCorruptError, match=f"session {session.id}: event {seq}: checksum mismatch"):
                Session.open(postgres_url, session_id=session.id, read_only=True)
        spaced = body.replace('"data":', '"data":\n', 1)
        _update_event(connection, session.id, seq, spaced, checksum(spaced))
        with Session.open(postgres_url, session_id=session.id, read_only=True) as reopened:
            assert [message.id for message in reopened.messages()] == expected
        _update_event(connection, session.id, seq, spaced, crc)
        with pytest.raises(SessionCorruptError, match=f"session {session.id}: event {seq}: checksum mismatch"):
            Session.open(postgres_url, session_id=session.id, read_only=True)


def _utf8_text(data: bytes) -> str | None:
    """`data` as text a PostgreSQL `text` column can hold, or None."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def test_flipping_any_byte_of_a_stored_record_is_corruption_naming_it(postgres_url, build):
    """Bit flips in the header and in a ~500-byte event record (those a text column can hold)."""
    with Session.create(postgres_url, durability="always") as session:
        build.tool_turn(session, 1, ["c1"])
        expected = list(session.events)
    seq = next(event.seq for event in expected if event.type == "assistant/message")
    where = f"session {session.id}"
    flips = 0
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        body, crc = connection.execute(
            "SELECT body, crc FROM dshkit_events WHERE session_id = %s AND seq = %s", (session.id, seq)
        ).fetchone()
        header, header_crc = connection.execute(
            "SELECT header, crc FROM dshkit_sessions WHERE session_id = %s", (session.id,)
        ).fetchone()
        assert len(body) > 300
        for offset in range(len(body.encode())):
            damaged = _utf8_text(bytearray_flip(body.encode(), offset))
            if damaged is None:
                continue
            _update_event(connection, session.id, seq, damaged, crc)
            with pytest.raises(SessionCorruptError, match=f"{where}: event {seq}: checksum mismatch"):
                Session.open(postgres_url, session_id=session.id, read_only=True)
            flips += 1
        _update_event(connection, session.id, seq, body, crc ^ 1)
        with pytest.raises(SessionCorruptError, match=f"{where}: event {seq}: checksum mismatch"):
            Session.open(postgres_url, session_id=session.id)
        _update_event(connection, session.id, seq, body, crc)
        for offset in range(len(header.encode())):
            damaged = _utf8_text(bytearray_flip(header.encode(), offset))
            if damaged is None:
                continue
            connection.execute("UPDATE dshkit_sessions SET header = %s WHERE session_id = %s", (damaged, session.id))
            with pytest.raises(SessionCorruptError, match=f"{where}: header: checksum mismatch"):
                Session.open(postgres_url, session_id=session.id, read_only=True)
            flips += 1
        connection.execute("UPDATE dshkit_sessions SET header = %s, crc = %s WHERE session_id = %s", (header, header_crc ^ 1, session.id))
        with pytest.raises(SessionCorruptError, match=f"{where}: header: checksum mismatch"):
            Session.open(postgres_url, session_id=session.id)
        connection.execute("UPDATE dshkit_sessions SET crc = %s WHERE session_id = %s", (header_crc, session.id))
    assert flips > 300
    with Session.open(postgres_url, session_id=session.id) as intact:
        assert list(intact.events) == expected


def bytearray_flip(data: bytes, offset: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 1 << (offset % 8)
    return bytes(damaged)


def _version_1_database(url: str) -> None:
    """Tables as schema version 1 (before checksums) made them, as an older dshkit left them."""
    from dshkit.session.stores.postgres_schema import MIGRATIONS

    with psycopg.connect(url, autocommit=True) as connection:
        for statement in MIGRATIONS[0]:
            connection.execute(statement)
        connection.execute("UPDATE dshkit_schema SET version = 1")


def _insert_version_1_session(url: str, session_id: str, header_version: int, events: list[Event]) -> None:
    header = encode_header(session_id, 1).replace('"version":2', f'"version":{header_version}')
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("INSERT INTO dshkit_sessions (session_id, header, created_at) VALUES (%s, %s, 1)", (session_id, header))
        for event in events:
            connection.execute(
                "INSERT INTO dshkit_events (session_id, seq, type, time, body) VALUES (%s, %s, %s, %s, %s)",
                (session_id, event.seq, event.type, event.time, encode_event(event)),
            )


def test_a_version_1_database_is_migrated_and_its_sessions_stay_version_1(fresh_database, build):
    _version_1_database(fresh_database)
    old = [Event("user/message", seq, 5, build.user(f"m{seq}"), "append", ()) for seq in range(3)]
    _insert_version_1_session(fresh_database, "old", 1, old)
    with Session.open(fresh_database, session_id="old") as session:
        assert [m.text for m in session.messages()] == ["m0", "m1", "m2"]
        session.append("user/message", build.user("m3"))
    with Session.create(fresh_database, session_id="new") as session:
        session.append("user/message", build.user("n0"))
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM dshkit_schema").fetchall() == [(SCHEMA_VERSION,)]
        crcs = dict(connection.execute("SELECT session_id, array_agg(crc ORDER BY seq) FROM dshkit_events GROUP BY 1"))
        assert crcs["old"] == [None] * 4  # no mixed sessions: a version 1 session gets no checksums
        assert None not in crcs["new"]
        assert connection.execute("SELECT session_id FROM dshkit_sessions WHERE crc IS NULL").fetchall() == [("old",)]
        # A version 1 session whose records are checked by no one must not grow a checksum.
        body = connection.execute("SELECT body FROM dshkit_events WHERE session_id = 'old' AND seq = 1").fetchone()[0]
        _update_event(connection, "old", 1, body, checksum(body))
    with pytest.raises(SessionCorruptError, match="session old: event 1: a checksum on a record of a version 1 session"):
        Session.open(fresh_database, session_id="old", read_only=True)
    with Session.open(fresh_database, session_id="new", read_only=True) as session:
        assert [m.text for m in session.messages()] == ["n0"]


def test_a_version_2_header_without_a_checksum_is_corruption(fresh_database, build):
    _version_1_database(fresh_database)
    _insert_version_1_session(fresh_database, "unchecked", 2, [Event("user/message", 0, 5, build.user(), "append", ())])
    with pytest.raises(SessionCorruptError, match="session unchecked: header: a version 2 header on records without checksums"):
        Session.open(fresh_database, session_id="unchecked", read_only=True)
