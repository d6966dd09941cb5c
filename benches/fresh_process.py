"""Run a bench function in a fresh interpreter that imports only what that function needs.

A full (oldest-generation) collection of CPython's cyclic GC walks every tracked object in the
process. `make bench` collects every bench module in one process, so it holds pytest-benchmark
and three peer frameworks, about 270,000 tracked objects against about 34,000 for dshkit and its
bench workload alone: a concurrency row measured there pays for the other contenders' heaps. A
row that measures scaling or GC time runs each contender in a process of its own, as an
application holding that one framework would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dshkit

BENCHES = Path(__file__).resolve().parent

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import importlib
function = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])
arguments, warmup, rounds = json.loads(sys.argv[4])
for _ in range(warmup):
    function(*arguments)
print(json.dumps([function(*arguments) for _ in range(rounds)]))
"""


def run_in_fresh_process(module: str, function: str, arguments: list[Any], *, warmup: int, rounds: int) -> list[Any]:
    """`rounds` results of `module.function(*arguments)` (JSON values) from a new interpreter,
    after `warmup` calls whose results are dropped; the child imports the dshkit this process runs."""
    env = dict(os.environ)
    # The child must import the same dshkit (a worktree's source tree, or the installed package).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(dshkit.__file__).parent.parent), env.get("PYTHONPATH")]))
    spec = json.dumps([arguments, warmup, rounds])
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(BENCHES), module, function, spec],
        env=env, capture_output=True, text=True, timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module}.{function}{tuple(arguments)} failed in its own process:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])
