"""The headless Chromium the example page is opened in (tests/browser.py), as tests/cli has it."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from browser import Browser, chromium_binary


@pytest.fixture(scope="session")
def serve_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Debian's `chromium`; skips without one, except under CI, where a missing browser fails."""
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no chromium binary under CI: .ci/run installs Debian's chromium package")
        pytest.skip("no chromium binary on PATH (apt-get install chromium, or set DSHKIT_CHROMIUM)")
    started = Browser.start(binary, tmp_path_factory.mktemp("chromium-profile"))
    yield started
    started.stop()
