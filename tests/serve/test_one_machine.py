"""One machine, the default: `dshkit serve` with its in-process DBOS worker on SQLite, driven over
real HTTP on loopback: turns, the AG-UI stream, an approval, a reconnect with Last-Event-ID, and
every hostile request with its clear error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("dbos")
pytest.importorskip("ag_ui")

from tests.serve.serving import Process, answers_of, client, log_events, read_sse, serve, wait_for  # noqa: E402

from dshkit.session import Session  # noqa: E402
from dshkit.session._verify import check_events  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Path]]:
    folder = tmp_path_factory.mktemp("served")
    process = serve(str(folder / "sessions"), folder / "serve.log")
    yield process, folder / "sessions"
    process.stop()


@pytest.fixture()
def alice(server: tuple[Process, Path]) -> Iterator[httpx.Client]:
    with client(server[0].url or "", "t-alice") as http:
        yield http


def new_session(http: httpx.Client) -> str:
    response = http.post("/sessions", json={"agent": "echo"})
    assert response.status_code == 201, response.text
    return response.json()["session_id"]  # type: ignore[no-any-return]


def finished_runs(count: int) -> Any:
    return lambda events: sum(1 for _, e in events if e["type"] == "RUN_FINISHED") >= count


def test_turns_stream_and_approval_through_the_api(alice: httpx.Client, server: tuple[Process, Path]) -> None:
    session_id = new_session(alice)
    posted = [alice.post(f"/sessions/{session_id}/messages", json={"text": text, "id": f"m{n}"})
              for n, text in enumerate(["hello", "approve: ship it"])]
    assert [r.status_code for r in posted] == [202, 202]
    pending = wait_for(lambda: alice.get(f"/sessions/{session_id}/approvals").json()["pending"], "the approval ask")
    # A message posted while a call waits for a person is a turn of its own, after that one.
    assert alice.post(f"/sessions/{session_id}/messages", json={"text": "bye", "id": "m2"}).status_code == 202
    wait_for(lambda: any(e["type"] == "agent/inbox/spliced" and '"m2"' in json.dumps(e["data"])
                         for e in log_events(alice, session_id)), "'bye' queued behind the waiting turn")
    assert [(p["tool"], json.loads(p["arguments"])) for p in pending] == [("publish", {"text": "ship it"})]
    decided = alice.post(f"/sessions/{session_id}/approvals/{pending[0]['call_id']}", json={"decision": "approve"})
    assert decided.status_code == 202, decided.text

    stream = read_sse(alice, f"/sessions/{session_id}/events", finished_runs(3))
    kinds = [e["type"] for _, e in stream]
    assert kinds.count("RUN_STARTED") == 3 and "TOOL_CALL_RESULT" in kinds
    texts = [e["delta"] for _, e in stream if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["hello", "echo: hello", "approve: ship it", "published: SHIP IT", "bye", "echo: bye"]
    assert [e["name"] for _, e in stream if e["type"] == "CUSTOM"] == ["dshkit.approval_asked", "dshkit.approval_decided"]

    answers = answers_of(log_events(alice, session_id))
    assert answers == {"m0": ["echo: hello"], "m1": ["published: SHIP IT"], "m2": ["echo: bye"]}
    with Session.open(server[1] / f"{session_id}.sqlite", read_only=True) as session:
        assert check_events(list(session.events)) == []


def test_a_reconnect_with_last_event_id_sees_no_gap_and_no_duplicate(alice: httpx.Client) -> None:
    session_id = new_session(alice)
    for n in range(2):
        assert alice.post(f"/sessions/{session_id}/messages", json={"text": f"turn {n}", "id": f"r{n}"}).status_code == 202
    whole = read_sse(alice, f"/sessions/{session_id}/events", finished_runs(2))
    for cut in (1, 4, 7, len(whole) - 1):  # a cut after a sub-event ("4.1") and after a whole one
        first = read_sse(alice, f"/sessions/{session_id}/events", lambda events, cut=cut: len(events) >= cut)
        rest = read_sse(alice, f"/sessions/{session_id}/events", lambda events, n=len(whole) - cut: len(events) >= n,
                        last_event_id=first[-1][0])
        assert first + rest == whole
    ids = [event_id for event_id, _ in whole]
    assert len(set(ids)) == len(ids) and any("." in i for i in ids)


def test_a_replayed_message_id_adds_nothing_and_answers_as_the_first(alice: httpx.Client) -> None:
    session_id = new_session(alice)
    first = alice.post(f"/sessions/{session_id}/messages", json={"text": "once", "id": "same"})
    again = alice.post(f"/sessions/{session_id}/messages", json={"text": "twice?", "id": "same"})
    assert first.status_code == again.status_code == 202 and first.json() == again.json()
    read_sse(alice, f"/sessions/{session_id}/events", finished_runs(1))
    assert alice.post(f"/sessions/{session_id}/messages", json={"text": "thrice?", "id": "same"}).json() == first.json()
    assert alice.post(f"/sessions/{session_id}/messages", json={"text": "next", "id": "next"}).status_code == 202
    read_sse(alice, f"/sessions/{session_id}/events", finished_runs(2))
    assert answers_of(log_events(alice, session_id)) == {"same": ["echo: once"], "next": ["echo: next"]}


def test_a_request_that_fails_transiently_is_tried_again_not_dropped(alice: httpx.Client, server: tuple[Process, Path]) -> None:
    # The "flaky" agent's first build for a session raises ConnectionError, as a lost database
    # connection would: DBOS does not retry a workflow that raised, so the worker must.
    created = alice.post("/sessions", json={"agent": "flaky"})
    assert created.status_code == 201, created.text
    session_id = created.json()["session_id"]
    assert alice.post(f"/sessions/{session_id}/messages", json={"text": "still there?", "id": "f1"}).status_code == 202
    read_sse(alice, f"/sessions/{session_id}/events", finished_runs(1))
    events = log_events(alice, session_id)
    assert answers_of(events) == {"f1": ["echo: still there?"]}
    with Session.open(server[1] / f"{session_id}.sqlite", read_only=True) as session:
        assert check_events(list(session.events)) == []
    assert "retrying in 0.5 s" in server[0].log_path.read_text()


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    assert "Traceback" not in response.text
    return response.status_code, body["error"]["code"]


def test_hostile_requests_get_their_clear_errors_and_lose_nothing(alice: httpx.Client, server: tuple[Process, Path]) -> None:
    session_id = new_session(alice)
    url = server[0].url or ""
    base = f"/sessions/{session_id}"
    with client(url, "t-bob") as bob, httpx.Client(base_url=url, timeout=60.0) as nobody:
        assert error_of(nobody.post("/sessions", json={"agent": "echo"})) == (401, "unauthenticated")
        assert error_of(nobody.get(f"{base}/log")) == (401, "unauthenticated")
        assert error_of(bob.get(f"{base}/log")) == (404, "unknown_session")
        assert error_of(bob.post(f"{base}/messages", json={"text": "mine now"})) == (404, "unknown_session")
        assert error_of(bob.get(f"{base}/events")) == (404, "unknown_session")
    assert error_of(alice.get("/sessions/no-such-session/log")) == (404, "unknown_session")
    assert error_of(alice.get("/sessions/..%2F..%2Fetc/log"))[0] == 404
    assert error_of(alice.get("/sessions/.hidden/log")) == (404, "unknown_session")
    assert error_of(alice.get("/sessions/.dbos/log")) == (404, "unknown_session")
    (server[1] / "not-a-log.sqlite").write_bytes(b"SQLite format 3\x00 but not really")
    assert error_of(alice.get("/sessions/not-a-log/log")) == (404, "unknown_session")
    assert error_of(alice.get("/nowhere")) == (404, "not_found")
    assert error_of(alice.post("/sessions", json={"agent": "nobody"})) == (400, "unknown_agent")
    assert error_of(alice.post(f"{base}/messages", content=b"{not json")) == (400, "malformed_json")
    assert error_of(alice.post(f"{base}/messages", content=b"[1, 2]")) == (400, "malformed_json")
    assert error_of(alice.post(f"{base}/messages", json={"text": 3})) == (400, "bad_message")
    assert error_of(alice.post(f"{base}/messages", json={"text": "x", "id": "a b"})) == (400, "bad_id")
    assert error_of(alice.post(f"{base}/messages", content=b'{"text": "' + b"x" * 300_000 + b'"}')) == (413, "body_too_large")
    assert error_of(alice.post(f"{base}/messages", json={"text": "x" * 70_000})) == (413, "message_too_large")
    assert error_of(alice.post(f"{base}/approvals/nope", json={"decision": "approve"})) == (409, "not_pending")
    assert error_of(alice.post(f"{base}/approvals/nope", json={"decision": "maybe"})) == (400, "bad_decision")
    assert error_of(alice.get(f"{base}/events", headers={"Last-Event-ID": "x1"})) == (400, "bad_last_event_id")
    assert error_of(alice.get(f"{base}/log", params={"after": "soon"})) == (400, "bad_after")
    # Nothing of the above reached the log: a message posted now is the session's first.
    assert alice.post(f"{base}/messages", json={"text": "after all that", "id": "ok"}).status_code == 202
    read_sse(alice, f"{base}/events", finished_runs(1))
    assert answers_of(log_events(alice, session_id)) == {"ok": ["echo: after all that"]}


def test_a_flood_of_streams_is_refused_beyond_the_bound(server: tuple[Process, Path]) -> None:
    url = server[0].url or ""
    with client(url, "t-carol") as carol, httpx.Client(base_url=url, timeout=60.0,
                                                      headers={"Authorization": "Bearer t-carol"}) as other:
        session_id = new_session(carol)
        opened = []
        try:
            for _ in range(8):  # Limits().max_streams_per_principal
                response = other.send(other.build_request("GET", f"/sessions/{session_id}/events"), stream=True)
                assert response.status_code == 200
                opened.append(response)
            assert error_of(carol.get(f"/sessions/{session_id}/events")) == (429, "too_many_streams")
            with client(url, "t-alice") as alice:  # another principal is not affected
                alice_session = new_session(alice)
                assert alice.post(f"/sessions/{alice_session}/messages", json={"text": "hi"}).status_code == 202
                read_sse(alice, f"/sessions/{alice_session}/events", finished_runs(1))
        finally:
            for response in opened:
                response.close()
        # Closed streams are given back (the server notices the disconnect).
        wait_for(lambda: _can_open(carol, session_id), "a stream slot after closing the others")


def _can_open(http: httpx.Client, session_id: str) -> bool:
    response = http.send(http.build_request("GET", f"/sessions/{session_id}/events"), stream=True)
    try:
        return response.status_code == 200
    finally:
        response.close()


def test_a_server_killed_inside_a_turn_answers_the_message_once_after_its_restart(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    server = serve(str(store), tmp_path / "serve.log")
    try:
        with client(server.url or "") as http:
            session_id = new_session(http)
            assert http.post(f"/sessions/{session_id}/messages", json={"text": "slow: take your time", "id": "s1"}).status_code == 202
            wait_for(lambda: any(e["type"] == "assistant/chunk" for e in log_events(http, session_id)), "the slow answer to start")
        port = (server.url or "").rsplit(":", 1)[1]
        server.kill()  # inside the model's answer: the turn is cut, its workflow left PENDING
        server = serve(str(store), tmp_path / "serve.log", "--port", port)
        with client(server.url or "") as http:
            read_sse(http, f"/sessions/{session_id}/events",
                     lambda events: any(e["type"] == "RUN_FINISHED" and e["metadata"]["dshkit_reason"]["kind"] == "completed" for _, e in events))
            events = log_events(http, session_id)
    finally:
        server.stop()
    ends = [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"]
    assert ends == ["interrupted", "completed"]
    assert answers_of(events) == {"s1": ["echo: slow: take your time" * 20]}
    continuation = [e["data"]["message"] for e in events if e["type"] == "user/message"][1]
    assert continuation["source"]["kind"] == "plugin" and continuation["id"].startswith("serve-continue-")
    with Session.open(store / f"{session_id}.sqlite", read_only=True) as session:
        assert check_events(list(session.events)) == []


def _session_with_answers(http: httpx.Client) -> str:
    session_id = new_session(http)
    for n, text in enumerate(["first <b>question</b>", "second question"]):
        assert http.post(f"/sessions/{session_id}/messages", json={"text": text, "id": f"p{n}"}).status_code == 202
    read_sse(http, f"/sessions/{session_id}/events", finished_runs(2))
    return session_id


def test_the_log_page_is_served_to_the_sessions_owner_only(alice: httpx.Client, server: tuple[Process, Path]) -> None:
    session_id = _session_with_answers(alice)
    page = alice.get(f"/sessions/{session_id}/log.html")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["cache-control"] == "no-store"
    assert page.text.startswith("<!DOCTYPE html>") and f"served session {session_id}" in page.text
    for said in ("first \\u003cb>question\\u003c/b>", "echo: second question", '"p0"', '"p1"'):
        assert said in page.text, said  # the messages and their ids, embedded as the page's data
    assert str(server[1]) not in page.text  # the page names the session, not the server's files
    with client(server[0].url or "", "t-bob") as bob, httpx.Client(base_url=server[0].url or "", timeout=60.0) as nobody:
        assert error_of(bob.get(f"/sessions/{session_id}/log.html")) == (404, "unknown_session")
        assert error_of(nobody.get(f"/sessions/{session_id}/log.html")) == (401, "unauthenticated")
    assert error_of(alice.get("/sessions/no-such-session/log.html")) == (404, "unknown_session")


def test_the_served_log_page_shows_the_session_in_chromium(alice: httpx.Client, server: tuple[Process, Path],
                                                           serve_browser: Any) -> None:
    session_id = _session_with_answers(alice)
    tab = serve_browser.page()
    try:  # a browser's navigation sends the bearer token as an extra header
        tab.send("Network.enable")
        tab.send("Network.setExtraHTTPHeaders", {"headers": {"Authorization": "Bearer t-alice"}})
        tab.open(f"{server[0].url}/sessions/{session_id}/log.html", ready="document.querySelectorAll('.row.message').length >= 4")
        shown = tab.evaluate("[...document.querySelectorAll('.row.message')].map(r => [r.dataset.id, r.querySelector('.text').innerText])")
    finally:
        tab.close()
    assert [text for _, text in shown[:4]] == ["first <b>question</b>", "echo: first <b>question</b>", "second question", "echo: second question"]
    assert [message_id for message_id, _ in shown][0::2][:2] == ["p0", "p1"]
