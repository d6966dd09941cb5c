"""`dshkit log serve`: the viewer page on loopback, following a log another writer appends to."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import VIEWER_READY as READY
from browser import Browser

import dshkit
from dshkit.cli import main as cli_main
from dshkit.cli.viewer.serve import make_server
from dshkit.session import Session
from dshkit.session.errors import SessionCorruptError


def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Session]:
    with Session.create(tmp_path / "live.jsonl") as session:
        session.append("user/message", user("first"))
        yield session


@pytest.fixture
def address(writer: Session, tmp_path: Path) -> Iterator[str]:
    server = make_server(str(tmp_path / "live.jsonl"), None, port=0, poll_ms=100)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/"
    server.shutdown()
    server.server_close()
    thread.join()


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_page_follows_the_log_as_the_writer_appends(browser: Browser, writer: Session, address: str) -> None:
    tab = browser.page()
    try:
        tab.open(address, ready=READY)
        assert tab.evaluate("[...document.querySelectorAll('.row.message .text')].map(e => e.innerText)") == ["first"]
        second = user("second, written while the page is open")
        writer.append("user/message", second)
        tab.wait_for(f"document.querySelector('.row.message[data-id=\"{second.id}\"]') !== null")
        assert tab.evaluate("document.body.dataset.events") == str(len(writer.events))
        assert tab.evaluate("window.dshkitViewer.rows()") == 2
    finally:
        tab.close()


def test_data_answers_only_when_the_log_changed(writer: Session, address: str) -> None:
    status, body = get(address + "data?since=1")
    assert (status, body) == (204, b"")
    writer.append("user/message", user("more"))
    status, body = get(address + "data?since=1")
    data = json.loads(body)
    assert status == 200 and data["session"]["event_count"] == 2 and data["live"] == {"poll_ms": 100}
    assert [message["content"][0]["text"] for message in data["messages"]] == ["first", "more"]
    status, body = get(address)
    assert status == 200 and b"connect-src 'self'" in body and b'"dshkit-data"' in body
    assert get(address + "elsewhere")[0] == 404


def test_a_log_that_goes_bad_is_reported_not_served(writer: Session, address: str, tmp_path: Path) -> None:
    log = tmp_path / "live.jsonl"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([lines[0], lines[1].replace("first", "FIRST"), *lines[2:]]) + "\n")
    status, body = get(address + "data?since=1")
    assert status == 500 and b"line 2: checksum mismatch" in body


def test_a_bad_log_fails_before_anything_listens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text("hello\n")
    with pytest.raises(SessionCorruptError, match="line 1: not a dshkit session log"):
        make_server(str(log), None, port=0)
    assert cli_main(["log", "serve", str(log), "--port", "0"]) == 1
    assert capsys.readouterr().err.startswith(f"dshkit log serve: {log}: line 1: not a dshkit session log")
    assert cli_main(["log", "serve", str(tmp_path / "none.jsonl"), "--port", "0"]) == 1
    assert capsys.readouterr().err == f"dshkit log serve: {tmp_path / 'none.jsonl'}: no such file\n"
