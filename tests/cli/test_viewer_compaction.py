"""The viewer page of a log an agent compacted on its own, and of long runs, as a person sees it in Chromium.

Every compaction row reads from the log's one description of a compaction
(`dshkit.session.compactions.read_compactions`), whichever code wrote it; the summary row shows
the summary; the chart says when no usage was reported and draws bars on 10,000+ steps; a
search keeps only rows that show what matched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import VIEWER_READY as READY
from browser import Browser, Page

import dshkit
from dshkit.agent import Agent, Compaction, Tool
from dshkit.cli import main as cli_main
from dshkit.models import ScriptedModel
from dshkit.session import Session
from dshkit.session.compactions import CompactionFacts, read_compactions

SUMMARY = "The user asked to read the page; the page was read and answered at length."


class Summarizer:
    """Answers every summarizer call with `SUMMARY` (a long range is summarized in several calls)."""

    provider = "sum"
    model = "sum-1"

    def stream(self, request: Any, cancel: Any = None) -> Any:
        return self._run()

    async def _run(self) -> Any:
        yield {"type": "text_delta", "text": SUMMARY}
        yield {"type": "finish", "reason": "stop"}


def user(text: str) -> dshkit.Message:
    return dshkit.create_user_message(text, source={"kind": "user"})


def agent_compacted_log(path: Path) -> None:
    """Two turns of an agent that calls `read_page`; before the second request it prunes and summarizes."""

    async def main() -> None:
        session = Session.create(path)
        read_page = Tool("read_page", "read the page", {"type": "object"}, lambda arguments, ctx: "page text " * 300)
        call = [{"type": "tool_call_delta", "index": 0, "id": "call_read", "name": "read_page", "arguments": "{}"}, {"type": "finish", "reason": "tool_calls"}]
        settings = Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100, summarizer=Summarizer())
        agent = Agent(ScriptedModel([call, "a" * 4000, "Short."]), session=session, tools=[read_page], compaction=settings)
        for text in ("Read the page.", "And now?"):
            agent.followup(user(text))
            await agent.when_idle()
        session.close()

    asyncio.run(main())


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CompactionFacts]:
    path = tmp_path_factory.mktemp("compacted") / "agent.jsonl"
    agent_compacted_log(path)
    with Session.open(path, read_only=True) as session:
        (facts,) = read_compactions(session.events)
    assert facts.message_seq is not None and facts.error is None and len(facts.replaced_ids) >= 3
    return path, facts


def open_page(browser: Browser, log: Path) -> Page:
    out = log.with_suffix(".html")
    assert cli_main(["log", "html", str(log), "-o", str(out)]) == 0
    tab = browser.page()
    tab.open(out.as_uri(), ready=READY)
    return tab


@pytest.fixture()
def page(browser: Browser, compacted: tuple[Path, CompactionFacts], capsys: pytest.CaptureFixture[str]) -> Iterator[Page]:
    tab = open_page(browser, compacted[0])
    capsys.readouterr()
    yield tab
    tab.close()


def row_text(page: Page, seq: int) -> str:
    page.evaluate(f"window.dshkitViewer.search('#{seq}')")
    return page.evaluate(f"document.querySelector('.row[data-seq=\"{seq}\"]:not(.call)').innerText")  # type: ignore[no-any-return]


def test_an_agent_compaction_reads_as_what_it_did(page: Page, compacted: tuple[Path, CompactionFacts]) -> None:
    _, facts = compacted
    ids = facts.replaced_ids
    start = row_text(page, facts.start_seq)
    assert f"compaction starts (threshold, turn 2): {len(ids)} messages, {ids[0]} … {ids[-1]} → summary {facts.summary_id}" in start
    summary_row = row_text(page, facts.summary_event_seq)  # type: ignore[arg-type]
    assert f"compaction summary: {len(ids)} messages ({facts.shadowed_token_count} tokens) by sum/sum-1" in summary_row
    assert SUMMARY in summary_row and "{" not in summary_row  # not the record's JSON
    assert f"compaction ends: summary {facts.summary_id}" in row_text(page, facts.end_seq)  # type: ignore[arg-type]
    message = row_text(page, facts.message_seq)  # type: ignore[arg-type]
    assert SUMMARY in message and "automatically generated checkpoint" not in message
    for seq in (facts.start_seq, facts.summary_event_seq, facts.end_seq, facts.message_seq):
        assert "undefined" not in row_text(page, seq)  # type: ignore[arg-type]
    # The start's detail lists the messages it put away, and the summary as text.
    row_text(page, facts.start_seq)
    page.click(f'.row[data-seq="{facts.start_seq}"]')
    assert page.evaluate("[...document.querySelectorAll('#detail .compacted li .id')].map(e => e.innerText)") == ids
    assert page.evaluate("document.querySelector('#detail pre.summary').innerText") == SUMMARY
    # So does the summary record's, with no raw JSON of it.
    row_text(page, facts.summary_event_seq)  # type: ignore[arg-type]
    page.click(f'.row[data-seq="{facts.summary_event_seq}"]')
    assert page.evaluate("document.querySelector('#detail pre.summary').innerText") == SUMMARY
    assert "shadowed_seqs" not in page.evaluate("document.getElementById('detail').innerText")


def test_a_chart_without_usage_says_so(page: Page) -> None:
    note = page.evaluate("document.querySelector('#chart-box .legend').innerText")
    assert "no step reported token usage" in note and "up to" not in note


def test_a_search_for_a_tool_name_keeps_only_rows_that_show_it(page: Page) -> None:
    page.type_text("#search", "read_page")
    page.press("Enter")
    page.wait_for("document.getElementById('matches').innerText.includes(' of ')")
    rows = page.evaluate("[...document.querySelectorAll('.row')].map(r => [r.dataset.kind, r.innerText, r.querySelectorAll('mark').length])")
    assert {kind for kind, _, _ in rows} >= {"call", "message"}
    assert all("read_page" in text.lower() and marks > 0 for _, text, marks in rows)
    # A match far inside a long text shows the part around it.
    page.evaluate("window.dshkitViewer.search('aaaa')")
    assert page.evaluate("[...document.querySelectorAll('.row .text')].every(e => e.innerText.toLowerCase().includes('aaaa'))")


def test_a_screenshot_of_an_agent_compacted_log(page: Page, compacted: tuple[Path, CompactionFacts], tmp_path: Path) -> None:
    _, facts = compacted
    page.evaluate(f"window.dshkitViewer.scrollToSeq({facts.start_seq}, 6)")
    page.wait_for(f"document.querySelector('.row[data-seq=\"{facts.start_seq}\"]') !== null")
    page.click(f'.row[data-seq="{facts.start_seq}"]')
    shot = page.screenshot(tmp_path / "agent-compaction.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_ten_thousand_steps_are_drawn_as_bars(browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "long.jsonl"
    steps = 10_000
    with Session.create(log, durability="none") as session:
        session.append("turn/start", {"turn": 1})
        for step in range(1, steps + 1):
            session.append("step/start", {"turn": 1, "step": step})
            answer = dshkit.create_assistant_message(f"step {step}", provider="p", model="m")
            session.append("assistant/message", {"turn": 1, "step": step, "message": answer, "usage": {"input_tokens": 1000 + step, "output_tokens": 10}})
            session.append("step/end", {"turn": 1, "step": step})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    tab = open_page(browser, log)
    capsys.readouterr()
    try:
        bars = int(tab.evaluate("document.getElementById('chart').dataset.bars"))
        width = tab.evaluate("document.getElementById('chart').clientWidth")
        assert 50 < bars <= width // 4 < steps
        assert f"{steps} steps, {bars} bars of " in tab.evaluate("document.querySelector('#chart-box .legend').innerText")
        # Along the chart's bottom line, drawn runs alternate with gaps: one run a bar, not one solid ramp.
        runs = tab.evaluate(
            "(() => { const c = document.getElementById('chart'), r = window.devicePixelRatio || 1;"
            " const row = c.getContext('2d').getImageData(0, c.height - Math.ceil(r), c.width, 1).data; let runs = 0, inside = false;"
            " for (let x = 0; x < c.width; x++) { const drawn = row[4 * x + 3] > 0; if (drawn && !inside) runs++; inside = drawn; } return runs; })()"
        )
        assert runs == bars
    finally:
        tab.close()
