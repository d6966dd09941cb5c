"""`dshkit log html` seen as a person sees it: the page opened in a real headless Chromium.

The browser is Debian's `chromium`, started on loopback by the `browser` fixture (conftest.py).
`DSHKIT_WRITE_SCREENSHOT=1` also writes the README's `docs/images/session-viewer.png`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import VIEWER_READY as READY
from browser import Browser, Page

import dshkit
from dshkit.cli import main as cli_main
from dshkit.cli.demo import main as run_demo
from dshkit.session import Session
from dshkit.session.request import project_request

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.jsonl"
    assert run_demo(argparse.Namespace(log=str(path))) == 0
    return path


def write_page(log: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> Path:
    out = log.with_suffix(".html")
    capsys.readouterr()
    assert cli_main(["log", "html", str(log), "-o", str(out), *extra]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: ")
    return out


@pytest.fixture()
def page(browser: Browser, demo_log: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[Page]:
    html = write_page(demo_log, capsys)
    tab = browser.page()
    tab.open(html.as_uri(), ready=READY)
    yield tab
    tab.close()


def texts(page: Page, selector: str) -> list[str]:
    return page.evaluate(f"[...document.querySelectorAll({selector!r})].map(e => e.innerText)")  # type: ignore[no-any-return]


def demo_events(log: Path) -> list[Any]:
    with Session.open(log, read_only=True) as session:
        return list(session.events)


def scroll_through(page: Page, selector: str) -> dict[int, str]:
    """Scroll the timeline from top to bottom as a reader would; the text of each row matching `selector`, by seq."""
    seen: dict[int, str] = {}
    page.evaluate("document.getElementById('timeline').scrollTop = 0")
    while True:
        rows = page.evaluate(f"[...document.querySelectorAll({selector!r})].map(r => [Number(r.dataset.seq), r.innerText])")
        seen.update({seq: text for seq, text in rows})
        moved = page.evaluate(
            "(() => { const t = document.getElementById('timeline'); const before = t.scrollTop;"
            " t.scrollTop = before + t.clientHeight; t.dispatchEvent(new Event('scroll')); return t.scrollTop > before; })()"
        )
        if not moved:
            return seen
        page.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")


def test_the_page_shows_each_turn_with_how_it_ended(page: Page, demo_log: Path) -> None:
    events = demo_events(demo_log)
    starts = {event.seq: event.data["turn"] for event in events if event.type == "turn/start"}
    endings = {event.seq: event.data["reason"]["kind"] for event in events if event.type == "turn/end"}
    # Only the rows in view are in the page: what a reader scrolling down sees.
    assert page.evaluate("window.dshkitViewer.rows()") > len(texts(page, ".row"))
    shown = scroll_through(page, ".row.turn")
    assert {seq: text.split(" · ")[0].split("\n")[-1] for seq, text in shown.items()} == {seq: f"Turn {turn}" for seq, turn in starts.items()}
    ended = scroll_through(page, ".row.turn-end")
    assert {seq: text.split("ended: ")[1].split(" ")[0] for seq, text in ended.items()} == endings
    assert "user pressed stop" in ended[list(endings)[2]]


def test_a_tool_call_sits_beside_its_result(page: Page, demo_log: Path) -> None:
    events = demo_events(demo_log)
    results = {event.data["message"].source["call_id"]: event for event in events if event.type == "tool/result" and event.surface_op == "append"}
    page.evaluate("window.dshkitViewer.search('call_list')")
    row = page.evaluate(
        "(() => { const r = document.querySelector('.row.call'); const [c, res] = r.querySelectorAll('.cell');"
        " const a = c.getBoundingClientRect(), b = res.getBoundingClientRect();"
        " return {id: r.dataset.callId, call: c.innerText, result: res.innerText, left: [a.left, a.right, a.top], right: [b.left, b.top]}; })()"
    )
    assert row["id"] == "call_list"
    assert "list_files" in row["call"] and '"path": "."' in row["call"]
    result = results["call_list"]
    assert row["result"].startswith(f"→ #{result.seq} ") and "notes.md" in row["result"]
    assert row["right"][0] >= row["left"][1] and row["right"][1] == row["left"][2]  # beside: same line, to the right
    # The search keeps the rows that show the call id: the call, its start and its result (whose source names it).
    asked = next(e for e in events if e.type == "assistant/message" and any(c["id"] == "call_list" for c in e.message.tool_calls))
    started = next(e for e in events if e.type == "tool/call" and e.data["call_id"] == "call_list")
    kept = page.evaluate("[...document.querySelectorAll('.row')].map(r => [r.dataset.kind, Number(r.dataset.seq)])")
    assert sorted(map(tuple, kept)) == sorted([("call", asked.seq), ("other", started.seq), ("message", result.seq)])
    page.click(".row.call")
    assert page.evaluate("document.querySelector('#detail h2').innerText") == "Tool call list_files"
    sides = texts(page, "#detail .pair > div")
    assert sides[0].startswith("CALL") and sides[1].startswith("RESULT") and "todo.txt" in sides[1]


def test_a_compacted_range_shows_what_replaced_it(page: Page, demo_log: Path) -> None:
    events = demo_events(demo_log)
    summary = next(e for e in events if e.type == "user/message" and e.surface_op != "append")
    pruned = next(e for e in events if e.type == "tool/result" and e.surface_op != "append")
    compacted_ids = {events[seq].message.id for seq in summary.source_event_seqs if events[seq].type != "compaction/start"}
    page.evaluate("window.dshkitViewer.search('compacted →')")
    rows = page.evaluate("[...document.querySelectorAll('.row.message')].map(r => [r.dataset.id, r.querySelector('.badge.replaced').innerText, r.classList.contains('is-replaced')])")
    assert {row[0] for row in rows} == compacted_ids
    assert all(badge == f"compacted → #{summary.seq}" and struck for _, badge, struck in rows)
    page.evaluate(f"window.dshkitViewer.search({summary.data.id!r})")
    badge = page.evaluate(f"document.querySelector('.row.message[data-seq=\"{summary.seq}\"] .badge.replaces').innerText")
    start, end = summary.surface_op["start"], summary.surface_op["end"]
    assert badge == f"replaces {end - start} (surface {start}…{end - 1})"
    page.evaluate(f"window.dshkitViewer.search({pruned.data['message'].id!r})")
    assert f"rewritten → #{pruned.seq}" in texts(page, ".row.message .badge.replaced")
    # The compaction's start lists the messages it put away.
    page.evaluate("window.dshkitViewer.search('compaction starts')")
    page.click(".row.compaction")
    listed = page.evaluate("[...document.querySelectorAll('#detail .request-list li .id')].map(e => e.innerText)")
    assert set(listed) == compacted_ids


def step_request_seqs(events: list[Any]) -> list[int]:
    """For each step that called the model, the seq right before its first output (the request's log)."""
    found, waiting = [], False
    for event in events:
        if event.type == "step/start":
            waiting = True
        elif waiting and event.type in ("assistant/chunk", "assistant/message"):
            found.append(event.seq - 1)
            waiting = False
    return found


def test_show_request_rebuilds_each_step_request_from_the_log(page: Page, demo_log: Path) -> None:
    events = demo_events(demo_log)
    request_seqs = step_request_seqs(events)
    step_seqs = [event.seq for event in events if event.type == "step/start"]
    assert len(request_seqs) == len(step_seqs)  # every step of the demo called the model
    with Session.open(demo_log, read_only=True) as session:
        expected = [project_request(session, at_seq=seq) for seq in request_seqs]
    page.evaluate("window.dshkitViewer.search('Step ')")
    assert len(texts(page, ".row.step")) == len(expected)
    for step_seq, request_seq, request in zip(step_seqs, request_seqs, expected):
        page.click(f'.row.step[data-seq="{step_seq}"] .show-request')
        heading = page.evaluate("document.querySelector('#detail .request h3').textContent")
        assert heading == f"Request, rebuilt from events #0…#{request_seq}"
        shown = page.evaluate("[...document.querySelectorAll('#detail .request-message')].map(e => e.dataset.id)")
        assert shown == [message.id for message in request.messages]
        assert request.system in page.evaluate("document.querySelector('#detail .request').innerText")
    # After the compaction the request holds the summary in place of the compacted range.
    assert len(expected[-1].messages) < len(expected[-2].messages)


def test_search_keeps_the_rows_that_mention_the_text(page: Page, demo_log: Path) -> None:
    events = demo_events(demo_log)
    snapshot = next(e.message for e in events if e.message is not None and e.message.source.get("plugin") == "workspace")
    page.type_text("#search", snapshot.id.lower())
    page.press("Enter")
    page.wait_for(f"document.getElementById('matches').innerText.includes(' of ')")
    rows = page.evaluate("[...document.querySelectorAll('.row')].map(r => [r.dataset.kind, r.dataset.id || '', r.innerText])")
    assert rows and all(snapshot.id in text for _, _, text in rows)
    assert ["message", snapshot.id] in [row[:2] for row in rows]
    assert page.evaluate("document.querySelectorAll('.row mark').length") >= len(rows)
    total = page.evaluate("window.dshkitViewer.rows()")
    assert page.evaluate("document.getElementById('matches').innerText") == f"{len(rows)} of {total} rows"
    page.evaluate("window.dshkitViewer.search('no such text anywhere')")
    assert texts(page, ".row") == []


def test_the_page_loads_nothing_from_anywhere(page: Page) -> None:
    assert page.evaluate("performance.getEntriesByType('resource').length") == 0
    assert page.evaluate("document.querySelectorAll('script[src], link[href], img[src]').length") == 0


def test_a_screenshot_of_the_page(browser: Browser, demo_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(demo_log.parent)  # the page names the log as it was given: demo.jsonl
    capsys.readouterr()
    assert cli_main(["log", "html", demo_log.name, "-o", str(tmp_path / "demo.html")]) == 0
    events = demo_events(demo_log)
    last_step = [event.seq for event in events if event.type == "step/start"][-1]
    tab = browser.page()
    try:
        tab.open((tmp_path / "demo.html").as_uri(), ready=READY)
        # The end of the log in view (the interrupted answer, the prune, the compaction), the last step's request beside it.
        tab.evaluate(f"window.dshkitViewer.scrollToSeq({last_step}, 18)")
        tab.wait_for(f"document.querySelector('.row.step[data-seq=\"{last_step}\"] .show-request') !== null")
        tab.click(f'.row.step[data-seq="{last_step}"] .show-request')
        assert "compact recall" in tab.evaluate("document.querySelector('#detail .request').innerText")
        shot = tab.screenshot(tmp_path / "session-viewer.png")
    finally:
        tab.close()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    if os.environ.get("DSHKIT_WRITE_SCREENSHOT") == "1":
        target = REPO / "docs" / "images" / "session-viewer.png"
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(shot.read_bytes())


def test_message_text_is_shown_as_text_never_run(browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "</script><script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'> <!-- done"
    log = tmp_path / "hostile.jsonl"
    with Session.create(log) as session:
        session.append("user/message", dshkit.create_user_message(hostile, source={"kind": "user"}))
    tab = browser.page()
    try:
        tab.open(write_page(log, capsys).as_uri(), ready=READY)
        assert tab.evaluate("window.pwned === undefined")
        assert tab.evaluate("document.querySelector('.row.message .text').innerText") == hostile
        tab.click(".row.message")
        assert tab.evaluate("document.querySelector('#detail pre.text').innerText") == hostile
    finally:
        tab.close()


def test_a_large_log_keeps_only_the_rows_in_view(browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "large.jsonl"
    with Session.create(log, durability="none") as session:
        for number in range(3000):
            session.append("user/message", dshkit.create_user_message(f"message {number}", source={"kind": "user"}))
    tab = browser.page()
    try:
        tab.open(write_page(log, capsys).as_uri(), ready=READY)
        assert tab.evaluate("window.dshkitViewer.rows()") == 3000
        assert tab.evaluate("document.querySelectorAll('.row').length") < 100
        tab.evaluate("document.getElementById('timeline').scrollTop = 1e9")
        tab.wait_for("[...document.querySelectorAll('.row .text')].some(e => e.innerText === 'message 2999')")
        assert tab.evaluate("document.querySelectorAll('.row').length") < 100
    finally:
        tab.close()
