"""The session viewer on a 100,000-event log: building the page, and its first paint in Chromium.

The log is agent-shaped (`_agent_log`): turns of steps, each step a user message or tool result,
streamed chunks, an assistant message with a tool call and its usage, the tool call and its
result. `dshkit_page_html` is `dshkit log html`'s work (`page_data` + `render_page`) beside
`transcript_text`, what `dshkit log show` does with the same events (the text a reader gets
without the page).

`dshkit_first_paint_chromium` opens the page in a headless Chromium (tests/browser.py; skipped
without one) and records, per round, the time from navigation to the viewer's first rows
(`first_rows_ms`, the page's `dshkit-viewer-painted` mark) and to the browser's first contentful
paint (`first_paint_ms`); the timed value is navigation until the page says it is ready.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.cli.viewer import session_page
from dshkit.session import Session
from dshkit.session._transcript import render

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import Browser, chromium_binary  # noqa: E402  (tests/ holds the DevTools client)

EVENTS = 100_000
GROUP = "viewer-page-100k"
PAINT_GROUP = "viewer-first-paint-100k"
READY = "document.body && document.body.dataset.ready === '1'"

TARGETS = [
    {"name": "viewer page of a 100,000-event log built in <= 3 s", "group": GROUP, "row": "dshkit", "max_seconds": 3.0},
    {
        "name": "viewer's first rows of a 100,000-event log in <= 3 s after navigation (Chromium)",
        "group": PAINT_GROUP,
        "extra_info": "first_rows_ms",
        "max_value": 3000.0,
    },
]


def _agent_log(events: int) -> Session:
    session = Session()
    provider = {"provider": "bench", "model": "m"}
    turn = 0
    while len(session.events) < events:
        turn += 1
        session.append("turn/start", {"turn": turn})
        for step in range(1, 5):
            session.append("step/start", {"turn": turn, "step": step})
            if step == 1:
                session.append("user/message", dshkit.create_user_message(f"task {turn}: look into file {turn}.txt", source={"kind": "user"}))
                if turn == 1:
                    session.append("request/header", {"reason": "initial", "header": {"system": "be useful", "tools": [{"name": "read"}]}})
            for word in ("Reading", " the", " file", " now."):
                session.append("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": "text_delta", "text": word}})
            call_id = f"c{turn}-{step}"
            message = dshkit.create_assistant_message(
                [{"type": "text", "text": "Reading the file now."}, {"type": "tool_call", "id": call_id, "name": "read", "arguments": f'{{"path": "{turn}.txt"}}'}],
                **provider,
            )
            answer = session.append("assistant/message", {"turn": turn, "step": step, "message": message, "finish_reason": "tool_calls",
                                                          "usage": {"prompt_tokens": 400 + 50 * step, "completion_tokens": 20}})
            call = session.append("tool/call", {"turn": turn, "step": step, "call_id": call_id, "name": "read", "arguments": message.tool_calls[0]["arguments"]})
            result = dshkit.create_tool_result_message(call_id, f"contents of {turn}.txt, line {step}: " + "lorem ipsum " * 8)
            session.append("tool/result", {"turn": turn, "step": step, "message": result}, source_event_seqs=(call.seq,))
            del answer
            session.append("step/end", {"turn": turn, "step": step})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return session


@pytest.fixture(scope="module")
def agent_log() -> Session:
    return _agent_log(EVENTS)


@pytest.mark.benchmark(group=GROUP)
def test_dshkit_page_html(benchmark: Any, agent_log: Session) -> None:
    page = benchmark.pedantic(lambda: session_page(agent_log, where="bench"), rounds=3, warmup_rounds=0)
    assert agent_log.events[-1].data["reason"]["kind"] == "completed" and '"dshkit-data"' in page
    benchmark.extra_info["events"] = len(agent_log.events)
    benchmark.extra_info["page_mib"] = round(len(page.encode()) / 2**20, 1)


@pytest.mark.benchmark(group=GROUP)
def test_transcript_text(benchmark: Any, agent_log: Session) -> None:
    def text() -> list[str]:
        return list(render(agent_log.events, session_id=agent_log.id, created_at=agent_log.created_at, where="bench"))

    lines = benchmark.pedantic(text, rounds=3, warmup_rounds=0)
    assert len(lines) > len(agent_log.events) // 3
    benchmark.extra_info["events"] = len(agent_log.events)


@pytest.mark.benchmark(group=PAINT_GROUP)
def test_dshkit_first_paint_chromium(benchmark: Any, agent_log: Session, tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        pytest.skip("no chromium binary on PATH")
    html = tmp_path / "page.html"
    html.write_text(session_page(agent_log, where="bench"), encoding="utf-8")
    browser = Browser.start(binary, tmp_path / "profile")
    rows: list[float] = []
    paints: list[float] = []
    try:
        page = browser.page()

        def open_page() -> None:
            page.send("Page.navigate", {"url": "about:blank"})
            page.wait_for("location.href === 'about:blank'")
            page.open(html.as_uri(), ready=READY)
            rows.append(page.evaluate("performance.getEntriesByName('dshkit-viewer-painted')[0].startTime"))
            paints.append(page.wait_for("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime"))

        benchmark.pedantic(open_page, rounds=3, warmup_rounds=1)
        assert page.evaluate("window.dshkitViewer.rows()") > EVENTS // 2 and page.evaluate("document.querySelectorAll('.row').length") < 200
        page.close()
    finally:
        browser.stop()
    benchmark.extra_info["first_rows_ms"] = round(statistics.median(rows[-3:]), 1)
    benchmark.extra_info["first_paint_ms"] = round(statistics.median(paints[-3:]), 1)
    benchmark.extra_info["page_mib"] = round(html.stat().st_size / 2**20, 1)
