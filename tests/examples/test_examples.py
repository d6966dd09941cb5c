"""Every script in examples/ runs, as a user would run it, and prints what it should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DSHKIT_PATH

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = {
    "first_agent.py": """\
total=5 explanation='2 + 3 = 5'
2 requests, 1 tool call, status completed
""",
    "tools.py": """\
tool result: - /max_chars: 500 is greater than the maximum of 100 (got 500)
tool result: milk, eggs
tool result: call w1 in turn 1
answer: You need milk and eggs.
ToolRetriesExhausted: tool 'read_note', status error
""",
    "structured_output.py": """\
Forecast(city='Oslo', degrees=21, summary='sunny')
- /degrees: Input should be a valid integer, unable to parse string as an integer (got "warm")
- /summary: Field required (got {"city":"Oslo","degrees":"warm"})
[3, 1, 2]
OutputValidationError: ('/degrees: Field required (got {"city":"Oslo"})', '/summary: Field required (got {"city":"Oslo"})')
""",
    "streaming.py": """\
calling temperature
result 21
partial {'city': 'Os'}
partial {'city': 'Oslo'}
partial {'city': 'Oslo', 'degrees': 21}
final city='Oslo' degrees=21
It |is |twenty-one |degrees.
""",
    "durable_approvals.py": """\
waiting: deploy {"version": "1.2"}
found after restart: [('deploy', True)]
completed - Version 1.2 is live.
""",
    "compaction.py": """\
tokens before: 1267
answer: Done. - tokens after: 123
['compaction/start', 'compaction/summary', 'compaction/end']
first message now: plugin
""",
}


def test_every_example_is_checked() -> None:
    assert sorted(path.name for path in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_and_prints_what_it_should(name: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": DSHKIT_PATH}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED[name]
