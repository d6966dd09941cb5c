"""The examples of docs/session.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "session.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_guide_example_runs(index: int, capsys) -> None:
    exec(compile(EXAMPLES[index], f"{GUIDE.name} example {index + 1}", "exec"), {})


def test_the_guide_has_examples() -> None:
    assert len(EXAMPLES) >= 4
