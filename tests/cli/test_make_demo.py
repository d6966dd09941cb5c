"""`make demo` installs what the demo uses (the runtime and the mcp extra it shows), not the test
and bench extras, and lets cargo show its progress; `make test` still installs the test extras."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from support import child_env_without

REPO = Path(__file__).resolve().parents[2]


def planned(target: str) -> list[str]:
    """The commands `make -n target` would run on a fresh clone (nothing is run)."""
    if shutil.which("make") is None:
        pytest.skip("no make on PATH")
    done = subprocess.run(["make", "-n", "-B", "-C", str(REPO), target], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_make_demo_builds_with_the_mcp_extra_only_and_shows_cargos_progress() -> None:
    builds = [line for line in planned("demo") if "maturin develop" in line]
    assert len(builds) == 1
    assert "--extras mcp" in builds[0] and "test" not in builds[0] and "bench" not in builds[0]
    assert "--quiet" not in builds[0]


@pytest.mark.parametrize("target", ["pytest", "stubtest"])
def test_the_test_targets_still_install_the_test_extras_into_the_same_venv(target: str) -> None:
    builds = [line for line in planned(target) if "maturin develop" in line]
    assert builds and all("--extras test,bench,postgres" in line and ".venv/bin/maturin" in line for line in builds)


def closure(names: list[str]) -> set[str]:
    """`names` and every distribution they require (with the extras they ask for), recursively, as installed here."""
    seen: set[tuple[str, str]] = set()
    todo = [(name, "") for name in names]
    while todo:
        name, extra = todo.pop()
        name = name.lower().replace("_", "-")
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        for text in metadata.requires(name) or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                todo += [(requirement.name, ""), *((requirement.name, wanted) for wanted in requirement.extras)]
    return {name for name, _ in seen}


def test_the_demo_runs_whole_with_nothing_but_the_runtime_and_the_mcp_extra(tmp_path: Path) -> None:
    allowed = closure(["httpx", "jsonschema-rs", "mcp"])  # pyproject's dependencies and the mcp extra
    others = sorted(
        module for module, owners in metadata.packages_distributions().items()
        if module.isidentifier() and module != "dshkit" and not {name.lower().replace("_", "-") for name in owners} & allowed
    )
    assert "pytest" in others and "mcp" not in others and "httpx" not in others
    env = child_env_without(tmp_path / "site", *others)  # as in a venv holding only what `make demo` installs
    done = subprocess.run([sys.executable, "-m", "dshkit", "demo"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "MCP server 'units' started over stdio" in done.stdout  # the server process ran under the same limits
