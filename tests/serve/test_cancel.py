"""`POST /sessions/{id}/cancel` stops the turn a worker process is running right now: on one
machine (the worker inside `dshkit serve`, SQLite), with the worker in a process of its own
(SQLite), and on PostgreSQL (API and worker processes apart). The cancelled turn ends `aborted`
keeping what it did, the log verifies, the next message runs normally; a cancel of an idle session
does nothing and one of a turn waiting for approval cancels that call."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("dbos")
pytest.importorskip("ag_ui")

from tests.serve.serving import Process, answers_of, client, log_events, read_sse, serve, wait_for, worker  # noqa: E402

from dshkit.session import Session  # noqa: E402
from dshkit.session._verify import check_events  # noqa: E402


@pytest.fixture(params=["one-process", "worker-process", "postgresql"])
def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(API url, store) of a running deployment; the worker runs in another process but for one-process."""
    if request.param == "postgresql":
        store = request.getfixturevalue("postgres_url")
    else:
        store = str(tmp_path / "sessions")
    processes: list[Process] = []
    try:
        if request.param == "one-process":
            processes.append(serve(store, tmp_path / "serve.log"))
        else:
            processes.append(worker(store, tmp_path / "worker.log", "--executor-id", "cancel-test"))
            processes.append(serve(store, tmp_path / "serve.log", "--no-worker"))
        yield processes[-1].url or "", store
    finally:
        for process in reversed(processes):
            process.stop()


def _new_session(http: httpx.Client) -> str:
    response = http.post("/sessions", json={"agent": "echo"})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]  # type: ignore[no-any-return]


def _turn_ends(http: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in log_events(http, session_id) if e["type"] == "turn/end"]


def _runs_finished(count: int) -> Any:
    return lambda events: sum(1 for _, e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")) >= count


def _verify(store: str, session_id: str) -> None:
    where: dict[str, Any] = {"path": store, "session_id": session_id} if store.startswith("postgresql://") \
        else {"path": Path(store) / f"{session_id}.sqlite"}
    with Session.open(**where, read_only=True) as session:
        assert check_events(list(session.events)) == []


def test_a_cancel_stops_the_turn_a_worker_is_running_now(deployment: tuple[str, str]) -> None:
    url, store = deployment
    with client(url) as http:
        session_id = _new_session(http)
        base = f"/sessions/{session_id}"
        # "slow: ..." streams 40 chunks a quarter of a second apart: ten seconds unless cancelled.
        assert http.post(f"{base}/messages", json={"text": "slow: stop me", "id": "long"}).status_code == 202
        # The log shows the turn once it starts (a worker syncs before each model call; on PostgreSQL
        # the streamed chunks only at the turn's end): from then on it is running, for ten seconds.
        wait_for(lambda: any(e["type"] == "turn/start" for e in log_events(http, session_id)), "the slow turn to start")
        cancelled = http.post(f"{base}/cancel", json={"id": "stop-1"})
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["interrupted"] == [f"{session_id}:message:long"]

        stream = read_sse(http, f"{base}/events", _runs_finished(1))
        ended = [e for _, e in stream if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
        assert [(e["type"], e["metadata"]["dshkit_reason"]) for e in ended] == [("RUN_FINISHED", {"kind": "aborted", "cause": "user"})]
        # Kept what happened: the person's message, and the text streamed before the cancel (if any).
        events = log_events(http, session_id)
        assert [e["data"]["message"]["id"] for e in events if e["type"] == "user/message"] == ["long"]
        streamed = ["".join(b["text"] for b in e["data"]["message"]["content"] if b["type"] == "text")
                    for e in events if e["type"] == "assistant/message"]
        assert len(streamed) <= 1 and all(len(text) < len("echo: slow: stop me" * 20) for text in streamed)

        # The cancel queued behind the turn found nothing left to cancel; the next message runs normally.
        assert http.post(f"{base}/messages", json={"text": "and now?", "id": "next"}).status_code == 202
        read_sse(http, f"{base}/events", _runs_finished(2))
        assert answers_of(log_events(http, session_id)) == {"long": [], "next": ["echo: and now?"]}
        assert [r["kind"] for r in _turn_ends(http, session_id)] == ["aborted", "completed"]
    _verify(store, session_id)


def test_a_cancel_of_an_idle_session_or_of_a_waiting_approval(deployment: tuple[str, str]) -> None:
    url, store = deployment
    with client(url) as http:
        session_id = _new_session(http)
        base = f"/sessions/{session_id}"
        idle = http.post(f"{base}/cancel", json={})
        assert idle.status_code == 202 and idle.json()["interrupted"] == []
        assert http.post(f"{base}/messages", json={"text": "approve: nothing yet", "id": "ask"}).status_code == 202
        wait_for(lambda: http.get(f"{base}/approvals").json()["pending"], "the approval ask")
        waiting = http.post(f"{base}/cancel", json={"id": "stop-ask"})
        assert waiting.status_code == 202, waiting.text
        read_sse(http, f"{base}/events", _runs_finished(1))
        assert http.get(f"{base}/approvals").json()["pending"] == []
        decided = [e["data"] for e in log_events(http, session_id) if e["type"] == "approval/decided"]
        assert [d["outcome"] for d in decided] == ["cancelled"]
        assert [r["kind"] for r in _turn_ends(http, session_id)] == ["aborted"]
        assert http.post(f"{base}/messages", json={"text": "hello again", "id": "again"}).status_code == 202
        read_sse(http, f"{base}/events", _runs_finished(2))
        assert answers_of(log_events(http, session_id))["again"] == ["echo: hello again"]
    _verify(store, session_id)


def test_a_cancel_of_another_principals_session_is_refused(deployment: tuple[str, str]) -> None:
    url, _ = deployment
    with client(url) as alice, client(url, "t-bob") as bob:
        session_id = _new_session(alice)
        refused = bob.post(f"/sessions/{session_id}/cancel", json={})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "unknown_session"
        assert alice.post(f"/sessions/{session_id}/cancel", json={"id": "a b"}).status_code == 400
