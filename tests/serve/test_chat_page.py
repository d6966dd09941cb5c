"""The example chat page (examples/serve_chat) in a real headless Chromium, against `dshkit serve`:
chat, approve a call from the page, and survive the server being SIGKILLed and restarted (the
page reconnects with Last-Event-ID and shows every event once). `DSHKIT_WRITE_SCREENSHOT=1` also
writes docs/images/serve-chat.png."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos")
pytest.importorskip("ag_ui")

from browser import Browser, Page  # noqa: E402

from tests.serve.serving import DSHKIT_PATH, Process, child_env  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "serve_chat"


def start(store: Path, log: Path, port: int = 0) -> Process:
    env = child_env(DSHKIT_SERVE_TOKENS="demo=demo", PYTHONPATH=os.pathsep.join([DSHKIT_PATH, str(REPO)]))
    argv = ["serve", "examples.serve_chat.app:AGENTS", "--store", str(store), "--port", str(port), "--static", str(EXAMPLE)]
    return Process(argv, env, log)


@pytest.fixture()
def page(serve_browser: Browser) -> Iterator[Page]:
    tab = serve_browser.page()
    yield tab
    tab.close()


def bubbles(page: Page, kind: str) -> list[str]:
    return page.evaluate(f"[...document.querySelectorAll('.msg.{kind}')].map(e => e.textContent)")  # type: ignore[no-any-return]


def say(page: Page, text: str) -> None:
    page.type_text("#text", text)
    page.click("#send")


@pytest.mark.slow
def test_the_chat_page_chats_approves_and_resumes_after_a_restart(page: Page, tmp_path: Path) -> None:
    server = start(tmp_path / "sessions", tmp_path / "serve.log")
    try:
        assert server.url is not None
        page.open(server.url + "/", ready="document.body && document.body.dataset.ready === '1'")
        say(page, "hello")
        page.wait_for("[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.startsWith('You said: hello'))", timeout=120)
        say(page, "email ada@example.com about lunch")
        page.wait_for("!!document.querySelector('.ask button.approve')", timeout=120)
        assert "send_email" in bubbles(page, "ask")[0]
        page.click(".ask button.approve")
        page.wait_for("[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.startsWith('Done'))", timeout=120)

        port = int(server.url.rsplit(":", 1)[1])
        server.kill()  # the page's stream breaks; the same store and port come back
        server = start(tmp_path / "sessions", tmp_path / "serve.log", port)
        say(page, "still there?")
        page.wait_for("[...document.querySelectorAll('.msg.assistant')].some(e => e.textContent.startsWith('You said: still there?'))", timeout=120)
        assert bubbles(page, "user") == ["hello", "email ada@example.com about lunch", "still there?"]
        assistant = bubbles(page, "assistant")
        assert len(assistant) == 3 and assistant[1] == "Done (sent to ada@example.com: 'lunch')."
        assert bubbles(page, "tool") == ["tool result: sent to ada@example.com: 'lunch'"]
        assert page.evaluate("document.querySelector('.ask').dataset.outcome") == "allowed_once"
        shot = page.screenshot(tmp_path / "serve-chat.png")
        assert shot.stat().st_size > 10_000
        if os.environ.get("DSHKIT_WRITE_SCREENSHOT") == "1":
            (REPO / "docs" / "images" / "serve-chat.png").write_bytes(shot.read_bytes())
    finally:
        server.stop()
