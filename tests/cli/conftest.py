"""The headless Chromium the viewer tests open pages in (tests/browser.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from browser import Browser, chromium_binary


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Debian's `chromium`, started once for the run; skips without one, except under CI (`CI=true`),
    where a missing browser fails: CI installs it (`.ci/run`)."""
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no chromium binary under CI: .ci/run installs Debian's chromium package")
        pytest.skip("no chromium binary on PATH (apt-get install chromium, or set DSHKIT_CHROMIUM)")
    started = Browser.start(binary, tmp_path_factory.mktemp("chromium-profile"))
    yield started
    started.stop()
