"""`dshkit bench`: the shape of its report and its answers to bad input (not its speed)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dshkit.cli.bench import BadDocument, Progress, builtin_document, format_seconds, load_document

ROW = re.compile(r"^  (\S*)\s+(.+?)\s+([\d.]+ (?:ns|µs|ms|s))\s+([\d.]+)x$")


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dshkit", "bench", "--rounds", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
        encoding="utf-8",
    )


def rows(report: str) -> list[tuple[str, str]]:
    """(operation group, implementation) of every table row, groups carried down."""
    found, group = [], ""
    for line in report.splitlines():
        match = ROW.match(line)
        if match:
            group = match.group(1) or group
            found.append((group, match.group(2)))
    return found


def test_the_builtin_document_gets_every_comparison() -> None:
    done = bench()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no progress bar when standard error is not a terminal
    assert done.stdout.startswith("built-in document")
    measured = rows(done.stdout)
    groups = [group for group, _ in measured]
    assert sorted(set(groups)) == ["freeze", "id", "message", "parse", "serialise"]
    labels = [label for _, label in measured]
    assert "dshkit.freeze(value)" in labels and "copy.deepcopy(value)" in labels
    assert "json.loads(text)" in labels and "dshkit.to_json(frozen)" in labels
    assert ("orjson.loads(text)" in labels) == _has("orjson")
    # The first row of each operation is dshkit's, the base of its relative column.
    for line in done.stdout.splitlines():
        match = ROW.match(line)
        if match and match.group(1):
            assert match.group(2).startswith(("dshkit.", "create_tool_result_message")) and match.group(4) == "1.00"


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def test_one_table_per_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"rows": [{"id": n, "tags": ["x", "y"]} for n in range(50)]}))
    second.write_text("[1, 2.5, \"three\", null, true]")
    done = bench(str(first), str(second))
    assert done.returncode == 0, done.stderr
    headers = [line for line in done.stdout.splitlines() if line.endswith("bytes of JSON")]
    assert headers == [f"{first}: {first.stat().st_size} bytes of JSON", f"{second}: {second.stat().st_size} bytes of JSON"]
    assert len(rows(done.stdout)) == 2 * len(rows(bench().stdout))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ('{"a": [1, 2}', "not valid JSON: line 1 column 12"),
        ('{"a": NaN}', "JSON that dshkit does not accept: value['a']: float nan"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_bad_input_is_named_and_exits_2(tmp_path: Path, content: str | bytes | None, message: str) -> None:
    path = tmp_path / "doc.json"
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    done = bench(str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"dshkit bench: {path}: {message}"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_rounds_value_exits_2() -> None:
    done = subprocess.run([sys.executable, "-m", "dshkit", "bench", "--rounds", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--rounds must be at least 1" in done.stderr


def test_load_document_keeps_text_and_value(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"k": [1, {"z": null}]}')
    assert load_document(str(path)) == ('{"k": [1, {"z": null}]}', {"k": [1, {"z": None}]})
    with pytest.raises(BadDocument, match="is a directory"):
        load_document(str(tmp_path))


def test_the_builtin_document_is_plain_json() -> None:
    document = builtin_document()
    assert json.loads(json.dumps(document)) == document
    assert any(message.get("tool_calls") for message in document["messages"])


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_is_cleared_at_the_end() -> None:
    terminal, pipe = _Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        progress = Progress(stream, 4)
        for label in ("a", "b", "c", "d"):
            progress.step(label)
        progress.close()
    assert "[######..................] 1/4 a" in terminal.getvalue()
    assert "[########################] 4/4 d" in terminal.getvalue()
    assert terminal.getvalue().endswith("\r\x1b[K")
    assert pipe.getvalue() == ""


def test_times_are_shown_in_fitting_units() -> None:
    assert [format_seconds(s) for s in (2.5e-7, 3.1e-6, 0.0421, 2.0)] == ["250 ns", "3.1 µs", "42.1 ms", "2 s"]
