"""`python -m dshkit demo` (what `make demo` runs) works offline and shows real message ids."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ULID = re.compile(r"\b[0-7][0-9A-HJKMNP-TV-Z]{25}\b")


def run_demo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # Offline: the demo must not need a model endpoint even if the developer has one configured.
    for key in [k for k in env if k.startswith("DSHKIT_")]:
        del env[key]
    return subprocess.run(
        [sys.executable, "-m", "dshkit", "demo", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
    )


def test_demo_runs_and_prints_a_message_id(tmp_path: Path) -> None:
    done = run_demo(cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    ids = ULID.findall(done.stdout)
    assert ids, done.stdout[-3000:]
    # A rewrite keeps the id, so the demo shows at least one id more than once.
    assert any(ids.count(i) > 1 for i in ids), done.stdout[-3000:]


def test_demo_accepts_a_log_path(tmp_path: Path) -> None:
    log = tmp_path / "demo-session.jsonl"
    done = run_demo("--log", str(log), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ULID.search(done.stdout)


def test_module_help_lists_the_commands(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dshkit", "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert done.returncode == 0
    for command in ("demo", "log", "chat"):
        assert command in done.stdout
