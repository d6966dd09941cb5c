"""The engine under the workers: DBOS Transact, its queue partitioned by session, and the enqueuing.

Every change a person asks for (a message, an approval decision, a cancel) becomes the input of
one DBOS workflow, `dshkit_serve_session`, enqueued on the queue `dshkit_sessions` with the
session id as its partition key (`partition_concurrency=1`: one session runs one workflow at a
time, different sessions run in parallel). The workflow id is derived from the session id and the
request's own id, so a repeated request is deduplicated by DBOS itself ("return-existing") and
answers as the first did. Every process launches DBOS; only workers listen to the queue, so
only they run (and recover) workflows.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from dshkit.session.stores import is_url

QUEUE_NAME = "dshkit_sessions"
APP_NAME = "dshkit-serve"
# One version for every process of a deployment: an API process enqueues for it, and workers of
# that version (and only they) dequeue and recover the work. Change it when workflows change.
APP_VERSION = "dshkit-serve-1"
POLLING_INTERVAL_SEC = 0.02


def engine_url(store: str, engine: str | None) -> str:
    """The DBOS system database: `engine` if given, else PostgreSQL beside a PostgreSQL store,
    else a SQLite file `.dbos.sqlite` in the store's directory (a name no session id can take)."""
    if engine is not None:
        if not engine.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError(f"engine {engine!r}: expected a sqlite:/// or postgresql:// URL")
        return engine
    if is_url(store):  # a server store is PostgreSQL: the engine shares its database
        return store
    return f"sqlite:///{Path(store).absolute() / '.dbos.sqlite'}"


def worker_concurrency() -> int:
    """How many sessions one worker runs at once (each holds a store connection while it runs)."""
    text = os.environ.get("DSHKIT_SERVE_WORKER_CONCURRENCY", "8")
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"DSHKIT_SERVE_WORKER_CONCURRENCY: expected a positive integer, got {text!r}")
    return int(text)


def workflow_id(session_id: str, kind: str, request_id: str) -> str:
    """The DBOS workflow id of one request on one session: the engine's deduplication key."""
    return f"{session_id}:{kind}:{request_id}"


class Engine:
    """DBOS in this process: enqueues session work, and dequeues and runs it when `work` is true.

    An API process started with `--no-worker` launches DBOS listening to no queue (it enqueues
    only); a worker listens to `dshkit_sessions`. Each process has its own executor id: at launch
    DBOS recovers the workflows a previous process of that id left unfinished.
    """

    def __init__(self, url: str, *, work: bool, executor_id: str | None = None) -> None:
        self.url = url
        self.work = work
        self.executor_id = executor_id
        self._queue: Any = None

    def launch(self) -> None:
        """Start DBOS (creating or migrating its system database) and declare the queue."""
        from dbos import DBOS

        import dshkit.serve.worker  # noqa: F401 - registers the workflow with DBOS before launch

        if self.url.startswith("sqlite:///"):
            use_write_ahead_log(Path(self.url[len("sqlite:///"):]))
        # A worker's default id is "local" (one machine: the restarted process recovers its work);
        # a process that only enqueues runs no workflow, so any fresh id will do.
        executor = self.executor_id or ("local" if self.work else "api-" + uuid.uuid4().hex[:12])
        DBOS(config=dbos_config(self.url, executor))  # type: ignore[arg-type]
        DBOS.listen_queues([QUEUE_NAME] if self.work else [])
        DBOS.launch()
        self._queue = DBOS.register_queue(
            QUEUE_NAME, partition_concurrency=1, polling_interval_sec=POLLING_INTERVAL_SEC,
            worker_concurrency=worker_concurrency(),
        )

    def enqueue(self, session_id: str, kind: str, request_id: str, action: dict[str, Any]) -> str:
        """Enqueue `action` for the session (idempotent per `(session, kind, request_id)`); its id."""
        from dbos import SetEnqueueOptions, SetWorkflowID

        from dshkit.serve.worker import run_session_workflow

        wanted = workflow_id(session_id, kind, request_id)
        with SetWorkflowID(wanted), SetEnqueueOptions(queue_partition_key=session_id):
            handle = self._queue.enqueue(run_session_workflow, session_id, action)
        return str(handle.get_workflow_id())

    def interrupt(self, session_id: str, request_id: str, cause: str) -> list[str]:
        """Send a cancel message to each unfinished workflow of the session (running or queued, on
        any worker); the ids it was sent to. A running one cancels its turn at once (its listener,
        `worker._cancel_on_message`); a queued one cancels the turn it starts, as the agent's
        cancel discards input still pending. Repeating the same `request_id` sends nothing new."""
        from dbos import DBOS, SendMessage

        from dshkit.serve.worker import CANCEL_TOPIC

        prefix = f"{session_id}:"  # see `workflow_id`; no session id holds a ':'
        found = DBOS.list_workflows(workflow_id_prefix=prefix, status=["PENDING", "ENQUEUED"],
                                    load_input=False, load_output=False)
        targets = [w.workflow_id for w in found
                   if w.workflow_id.startswith(prefix) and not w.workflow_id.startswith(f"{prefix}cancel:")]
        note = {"cause": cause, "request": request_id}
        if targets:  # one transaction; the key is per destination (DBOS suffixes it)
            DBOS.send_bulk([SendMessage(t, note, CANCEL_TOPIC, idempotency_key=f"cancel:{request_id}") for t in targets])
        return targets

    def status(self, workflow: str) -> str | None:
        """The workflow's DBOS status (`ENQUEUED`, `PENDING`, `SUCCESS`, `ERROR`, ...), None if unknown."""
        from dbos import DBOS

        found = DBOS.get_workflow_status(workflow)
        return None if found is None else str(found.status)

    def destroy(self) -> None:
        """Stop DBOS in this process (running workflows are left to recovery)."""
        from dbos import DBOS

        DBOS.destroy(destroy_registry=False)


def use_write_ahead_log(path: Path) -> None:
    """Put DBOS's SQLite system database in WAL mode (a lasting property of the file), creating it if need be.

    DBOS leaves SQLite in its rollback-journal mode, where every commit writes and syncs a journal
    and the database while holding the one write lock, and every DBOS transaction takes that lock
    (even its 20 ms queue polls). Under load enqueues and status updates then waited in SQLite's
    busy handler for tens or hundreds of ms. In WAL a commit is one append and one sync of the log
    (`synchronous` stays FULL: an acknowledged enqueue survives a power cut), and the lock is
    held that much shorter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30.0)
    try:
        db.execute("PRAGMA journal_mode=WAL").fetchall()
    finally:
        db.close()


def dbos_config(url: str, executor_id: str | None) -> dict[str, Any]:
    """The DBOS configuration of a worker (`executor_id`: who recovers this worker's work after a crash)."""
    config: dict[str, Any] = {
        "name": APP_NAME,
        "system_database_url": url,
        "application_version": APP_VERSION,
        "log_level": os.environ.get("DSHKIT_SERVE_DBOS_LOG_LEVEL", "WARNING"),
        "run_admin_server": False,
        "sys_db_pool_size": 10,
        "notification_listener_polling_interval_sec": 0.05,
    }
    if executor_id is not None:
        config["executor_id"] = executor_id
    return config
