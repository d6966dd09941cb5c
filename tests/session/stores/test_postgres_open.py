"""What opening a PostgreSQL session asks of the server: one statement reading the whole session
in seq order along the primary key (never a sort, whatever the planner's estimates), in one round
trip with the writer's lock, with the caller's connection settings left as they were, and a
store's own connection set up in its schema check's round trip; the packs' bodies copied into
Python memory once. Seen from the server (`auto_explain` and `log_statement` sent to the client as
notices) and from libpq's own protocol trace, on real connections."""

from __future__ import annotations

import tracemalloc
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from dshkit.session import Session
from dshkit.session._log.checksums import verified_join
from dshkit.session.errors import SessionError
from dshkit.session.stores.postgres import PostgresStore, lock_key
from dshkit.session.stores.postgres_schema import SCHEMA_VERSION, read_session

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store needs psycopg (dshkit[postgres])")


class OneConnection:
    """A pool lending one real connection, again and again (`PostgresConnections`)."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def getconn(self) -> Any:
        return self.connection

    def putconn(self, connection: Any) -> None:
        assert connection is self.connection


@pytest.fixture
def session_id(postgres_url: str, build) -> str:
    """A session of 30 tool-calling turns (150 messages) in the test database."""
    with Session.create(postgres_url, durability="none") as session:
        for turn in range(1, 31):
            session.append("user/message", build.user(f"question {turn}"))
            build.tool_turn(session, turn, calls=(f"call-{turn}",))
        return session.id


def server_log(connection: Any) -> list[str]:
    """Make the server report every statement of `connection` and its plan to it, as notices."""
    notices: list[str] = []
    connection.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
    try:
        connection.execute("LOAD 'auto_explain'")
    except psycopg.Error as error:
        pytest.skip(f"the server has no auto_explain module: {error}")
    connection.execute("SET auto_explain.log_min_duration = 0")
    connection.execute("SET log_statement = 'all'")
    connection.execute("SET client_min_messages = log")
    return notices


@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "to_write"])
def test_an_open_reads_the_session_in_one_statement_along_the_primary_key(postgres_url: str, session_id: str, read_only: bool) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        # Costs under which any plan with a sort looks cheaper than the primary key's index scan,
        # as they do for a session written since the table was last analyzed.
        connection.execute("SET random_page_cost = 100000")
        connection.execute("SET jit = off")  # those costs would compile the plan, slowly
        notices = server_log(connection)
        # Six opens on one connection: from the sixth run on, psycopg prepares the statement on
        # the server, whose plan is then cached, and must still be the index scan.
        for _ in range(6):
            notices.clear()
            with Session.open(store=PostgresStore(postgres_url, session_id, connections=OneConnection(connection)), read_only=read_only) as session:
                assert len(session.messages()) == 150
            statements = [notice for notice in notices if notice.startswith("execute") and "dshkit_" in notice]
            plans = [notice for notice in notices if "plan:" in notice and "dshkit_events" in notice]
            assert len(statements) == 1 and "FROM dshkit_sessions" in statements[0], statements
            assert len(plans) == 1 and "Index Scan using dshkit_events_pkey" in plans[0] and "Sort" not in plans[0], plans
        assert statements[0].startswith("execute _pg3_")  # the prepared statement's name
        # The planner setting was local to the read: the caller's connection is as it was.
        assert connection.execute("SHOW enable_sort").fetchone() == ("on",)


def traced(connection: Any, file: Any) -> Any:
    """`connection` with libpq's protocol trace of everything it sends and receives going to `file`."""
    connection.pgconn.trace(file.fileno())
    connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
    return connection


def round_trips(path: Path) -> list[str]:
    """The statements of a libpq trace, one per round trip: each Sync the client sends makes it
    wait for the server's ReadyForQuery (a pipeline sends its statements, then one Sync)."""
    statements: list[str] = []
    batch: list[str] = []
    for fields in (line.split("\t") for line in path.read_text().splitlines()):
        if fields[0] == "F" and fields[2] == "Parse":  # Parse\t "<name>" "<statement>" <types>
            batch.append(fields[3].split('"', 3)[3].rsplit('"', 1)[0])
        elif fields[0] == "F" and fields[2] in ("Sync", "Query"):
            statements.append(" ; ".join(batch + fields[3:4] * (fields[2] == "Query")))
            batch = []
    return statements


def test_an_open_is_one_round_trip_with_the_writers_lock(postgres_url: str, session_id: str, tmp_path: Path) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        pool = OneConnection(connection)
        syncs = {}
        for read_only in (True, False):
            trace = tmp_path / f"trace-{read_only}.txt"
            with trace.open("w") as file:
                connection.pgconn.trace(file.fileno())
                connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
                try:
                    Session.open(store=PostgresStore(postgres_url, session_id, connections=pool), read_only=read_only).close()
                finally:
                    connection.pgconn.untrace()
            # Each Sync the client sends is a round trip: it waits for the server's ReadyForQuery.
            messages = [line.split("\t") for line in trace.read_text().splitlines()]
            syncs[read_only] = sum(fields[0] == "F" and fields[2] == "Sync" for fields in messages)
        assert syncs == {True: 1, False: 2}  # the read (after a writer's lock, in its round trip); the unlock on close


@pytest.mark.parametrize("durability", ["checkpoint", "none"])
def test_an_open_on_its_own_connection_is_one_round_trip_checking_the_schema_and_setting_it_up(
    postgres_url: str, session_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: str
) -> None:
    connect = psycopg.connect
    traces: list[Path] = []

    def connect_traced(*args: Any, **kwargs: Any) -> Any:
        traces.append(tmp_path / f"trace-{len(traces)}.txt")
        return traced(connect(*args, **kwargs), files.enter_context(traces[-1].open("w")))

    monkeypatch.setattr(psycopg, "connect", connect_traced)
    with ExitStack() as files:
        for read_only in (True, False):
            with Session.open(postgres_url, session_id=session_id, read_only=read_only, durability=durability) as session:
                assert len(session.messages()) == 150
                settings = session.store._connection.execute("SELECT current_setting('plan_cache_mode'), current_setting('synchronous_commit')")
                assert settings.fetchone() == ("force_generic_plan", "off" if durability == "none" else "on")
    reader, writer = (round_trips(trace) for trace in traces)
    # The open: the version check setting the connection up (and taking a writer's lock), then
    # the read, in one round trip; then the test's look at the settings, and the writer's unlock.
    assert len(reader) == 2 and len(writer) == 3, (reader, writer)
    for trips in (reader, writer):
        check, plan, read = trips[0].split(" ; ")
        assert check.startswith("SELECT version, set_config($1, $2, false)") and check.endswith("FROM dshkit_schema")
        assert check.count("set_config") == (2 if durability == "none" else 1)
        assert "enable_sort" in plan and "FROM dshkit_sessions" in read
    assert "pg_try_advisory_lock" not in reader[0]
    assert "CASE WHEN version = 4 THEN pg_try_advisory_lock(" in writer[0].split(" ; ")[0]
    assert writer[2].startswith("SELECT pg_advisory_unlock")


@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "to_write"])
def test_an_open_in_a_database_without_the_tables_makes_them_and_finds_no_session(fresh_database: str, read_only: bool) -> None:
    with pytest.raises(FileNotFoundError, match="no session absent in"):
        Session.open(fresh_database, session_id="absent", read_only=read_only)
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM dshkit_schema").fetchall() == [(SCHEMA_VERSION,)]
        assert advisory_locks(connection) == 0


@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "to_write"])
def test_an_open_in_a_database_of_a_newer_schema_is_refused_before_reading_or_locking(fresh_database: str, read_only: bool, build) -> None:
    with Session.create(fresh_database, session_id="newer", durability="none") as session:
        session.append("user/message", build.user("hi"))
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        connection.execute("UPDATE dshkit_schema SET version = %s", (SCHEMA_VERSION + 1,))
        with pytest.raises(SessionError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade dshkit"):
            Session.open(fresh_database, session_id="newer", read_only=read_only)
        assert advisory_locks(connection) == 0


def test_a_writer_opening_a_session_of_an_older_schema_migrates_it_and_holds_its_lock_once(fresh_database: str, build) -> None:
    # The version-3 database has no `dshkit_packs`: the open's read fails in its round trip, and
    # the lock beside the version check is taken only at this dshkit's version. Taken there too,
    # the read after the migration would take it a second time, and one unlock would not free it.
    with Session.create(fresh_database, session_id="older", durability="none") as session:
        session.append("user/message", build.user("hi"))
    with psycopg.connect(fresh_database, autocommit=True) as connection:
        for statement in (
            "DROP TABLE dshkit_packs", "DROP TRIGGER dshkit_events_packed_only ON dshkit_events",
            "DROP FUNCTION dshkit_check_packed()", "UPDATE dshkit_schema SET version = 3",
        ):
            connection.execute(statement)
        with Session.open(fresh_database, session_id="older") as session:
            assert [message.text for message in session.messages()] == ["hi"]
            assert connection.execute("SELECT version FROM dshkit_schema").fetchall() == [(SCHEMA_VERSION,)]
            key = lock_key("older")
            assert session.store._connection.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone() == (True,)
            assert connection.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
            connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
            session.store._locked = False  # given up above


def advisory_locks(connection: Any) -> int:
    """How many advisory locks any connection to this database holds."""
    query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    return int(connection.execute(query).fetchone()[0])


def test_a_writer_rewrites_a_message_written_before_it_opened(postgres_url: str, session_id: str) -> None:
    # The open reads the session's message ids with its events: a same-id rewrite of an old
    # message is known as one (no new id to index), not refused as a duplicate id.
    with Session.open(postgres_url, session_id=session_id) as session:
        first = session.messages()[0]
        session.replace(first.with_content([{"type": "text", "text": "question 1, reworded"}]))
        session.sync()
    with Session.open(postgres_url, session_id=session_id, read_only=True) as read:
        assert read.messages()[0].text == "question 1, reworded" and read.messages()[0].id == first.id


def test_a_writers_open_decodes_the_stored_message_ids_only_when_a_replacement_asks(postgres_url: str, build) -> None:
    # Ids in packs and in rows: kept as psycopg received them through the open and the appends,
    # decoded by the first replacement, which must know them all: a replaced message of a pack
    # keeps its id unindexed (indexed again, the server would refuse the write as a duplicate).
    store = PostgresStore(postgres_url)
    store.pack_events = 4
    with Session.create(store=store, durability="none") as session:
        for turn in range(13):
            session.append("user/message", build.user(f"m{turn}"))
        session.sync()
        session_id = session.id
    with Session.open(postgres_url, session_id=session_id) as session:
        ids = session.store._message_ids
        assert len(ids._stored) == 3 and not ids._ids  # two packs' arrays and the rows', undecoded
        session.append("user/message", build.user("new"))
        assert len(ids._stored) == 3
        old = session.messages()[1]
        session.replace(old.with_content([{"type": "text", "text": "m1, reworded"}]))
        assert not ids._stored and len(ids._ids) == 14
        session.sync()
    with Session.open(postgres_url, session_id=session_id, read_only=True) as read:
        assert [message.text for message in read.messages()][:3] == ["m0", "m1, reworded", "m2"]


@pytest.mark.skipif(psycopg.pq.__impl__ == "python", reason="psycopg's pure Python implementation hands loaders copies")
def test_an_open_copies_none_of_the_packs_bodies_into_python_memory(postgres_url: str, build) -> None:
    # Packs of 100 KB messages: the bodies dwarf everything else the read allocates. The default
    # bytea loader copies each pack into a `bytes`, and a join would copy them all again; the
    # records are read from views over the query's result instead (`verified_join` takes the
    # parts as they are), so Python's memory holds no copy of them.
    store = PostgresStore(postgres_url)
    store.pack_events = 4
    with Session.create(store=store, durability="none") as session:
        for turn in range(40):
            session.append("user/message", build.user(f"{turn} " + "x" * 100_000))
        session.sync()
        session_id = session.id
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        packed = connection.execute("SELECT count(*), sum(length(bodies)) FROM dshkit_packs WHERE session_id = %s", (session_id,)).fetchone()
        assert packed[0] == 9 and packed[1] > 3_000_000
        tracemalloc.start()
        try:
            _, read = read_session(connection, session_id, message_ids=False)
            records = verified_join(read.bodies, read.crcs) if read is not None else None
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert read is not None and records is not None and len(records) == 40
        joined = b"\n".join(bytes(part) for part in read.bodies)
        assert joined.count(b"\n") == 39 and len(joined) > 4_000_000
        assert peak < 0.1 * len(joined), (peak, len(joined))
        assert [records[index] for index in range(40)] == joined.split(b"\n")
