"""`PostgresStore(url, session_id, connections=pool)`: the store takes its connection from a
caller's pool and gives it back, with no advisory lock held and its settings unchanged, against a
real PostgreSQL server."""

from __future__ import annotations

from typing import Any

import pytest

import dshkit
from dshkit.session import Session, SessionError
from dshkit.session.stores.postgres import PostgresStore, ensure_schema

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL store needs psycopg (dshkit[postgres])")


class CountingPool:
    """A pool of real connections that records what it lent and what came back."""

    def __init__(self, url: str, *, autocommit: bool = True) -> None:
        self.url, self.autocommit = url, autocommit
        self.idle: list[Any] = []
        self.lent: list[Any] = []
        self.returned: list[Any] = []

    def getconn(self) -> Any:
        connection = self.idle.pop() if self.idle else psycopg.connect(self.url, autocommit=self.autocommit)
        self.lent.append(connection)
        return connection

    def putconn(self, connection: Any) -> None:
        self.returned.append(connection)
        if not connection.closed and not connection.broken:
            self.idle.append(connection)

    def close(self) -> None:
        for connection in self.idle:
            connection.close()


def advisory_locks_held(connection: Any) -> int:
    row = connection.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").fetchone()
    return int(row[0])


def hello() -> dshkit.Message:
    return dshkit.create_user_message("hello", source={"kind": "user"})


def test_a_writer_on_a_pool_gives_its_connection_back_unlocked_and_reused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as setup:
        ensure_schema(setup)
    pool = CountingPool(postgres_url)
    try:
        session = Session.create(store=PostgresStore(postgres_url, "pooled-writer", connections=pool))
        session.append("user/message", hello())
        session.sync()
        with pytest.raises(SessionError, match="open for writing by another"):
            Session.open(postgres_url, session_id="pooled-writer")  # the pooled writer holds the lock
        session.close()
        assert pool.returned == pool.lent and len(pool.lent) == 1
        given_back = pool.returned[0]
        assert not given_back.closed and advisory_locks_held(given_back) == 0
        # The lock went with the close: another writer opens at once, and a read reuses the connection.
        Session.open(postgres_url, session_id="pooled-writer").close()
        with Session.open(store=PostgresStore(postgres_url, "pooled-writer", connections=pool), read_only=True) as read:
            assert [event.type for event in read.events] == ["user/message"]
        assert pool.lent == [given_back, given_back] and pool.returned == pool.lent
    finally:
        pool.close()


def test_a_pool_failure_or_a_missing_session_gives_the_connection_back(postgres_url: str) -> None:
    pool = CountingPool(postgres_url)
    try:
        with pytest.raises(FileNotFoundError, match="no session nowhere"):
            Session.open(store=PostgresStore(postgres_url, "nowhere", connections=pool), read_only=True)
        assert pool.returned == pool.lent and len(pool.lent) == 1
        Session.create(store=PostgresStore(postgres_url, "taken", connections=pool)).close()
        with pytest.raises(FileExistsError, match="taken"):
            Session.create(store=PostgresStore(postgres_url, "taken", connections=pool))
        assert len(pool.returned) == len(pool.lent) == 3 and advisory_locks_held(pool.returned[-1]) == 0
    finally:
        pool.close()



@pytest.mark.parametrize("session_id", ["pooled-read-fails", "pooled-missing"])
def test_a_writers_open_whose_read_fails_after_its_lock_gives_the_connection_back_unlocked(postgres_url: str, session_id: str) -> None:
    # The writer's lock is taken first in the read's round trip; a session-level advisory lock
    # outlives the read's failure (a rollback keeps it), so the store must still let it go.
    if session_id == "pooled-read-fails":
        Session.create(postgres_url, session_id=session_id).close()
    pool = CountingPool(postgres_url)
    try:
        connection = pool.getconn()
        pool.putconn(connection)
        if session_id == "pooled-read-fails":
            connection.execute("SET search_path = no_such_schema")  # the lock needs no table; the read fails
        with pytest.raises((psycopg.errors.UndefinedTable, FileNotFoundError)):
            Session.open(store=PostgresStore(postgres_url, session_id, connections=pool))
        assert pool.returned[-1] is connection and not connection.closed
        assert advisory_locks_held(connection) == 0
    finally:
        pool.close()

def test_bad_pools_and_settings_are_refused_with_what_was_wrong(postgres_url: str) -> None:
    with pytest.raises(TypeError, match=r"getconn\(\) and putconn"):
        PostgresStore(postgres_url, "s", connections=object())  # type: ignore[arg-type]
    in_transactions = CountingPool(postgres_url, autocommit=False)
    try:
        with pytest.raises(ValueError, match="autocommit mode"):
            Session.open(store=PostgresStore(postgres_url, "taken", connections=in_transactions), read_only=True)
        assert in_transactions.returned == in_transactions.lent  # given back, not kept or leaked
    finally:
        in_transactions.close()
    pool = CountingPool(postgres_url)
    try:
        with pytest.raises(ValueError, match="durability 'none'"):
            Session.create(store=PostgresStore(postgres_url, "fast", connections=pool), durability="none")
        assert pool.lent == []
    finally:
        pool.close()


def test_a_pooled_writer_whose_connection_dies_gives_it_back_and_takes_another(postgres_url: str) -> None:
    pool = CountingPool(postgres_url)
    try:
        session = Session.create(store=PostgresStore(postgres_url, "pooled-blip", connections=pool), durability="always")
        session.append("user/message", hello())
        first = pool.lent[0]
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 10000)", (first.info.backend_pid,))
        session.append("user/message", hello())  # the store reconnects through the pool, takes its lock again
        assert pool.returned == [first] and len(pool.lent) == 2
        session.close()
        assert pool.returned == pool.lent and advisory_locks_held(pool.lent[1]) == 0
        with Session.open(postgres_url, session_id="pooled-blip", read_only=True) as read:
            assert [event.type for event in read.events] == ["user/message", "user/message"]
    finally:
        pool.close()
