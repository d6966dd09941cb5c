"""`dshkit demo`: offline, deterministic, ends with the verify command for a log that verifies."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from dshkit.cli.demo import main
from dshkit.session import Session


def run_demo(path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(argparse.Namespace(log=str(path))) == 0
    return capsys.readouterr().out.splitlines()


def test_the_demo_writes_a_log_that_verifies_and_ends_with_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "demo.jsonl"
    lines = run_demo(path, capsys)
    assert lines[-1] == f"  dshkit log verify {path}"
    verify = subprocess.run(
        [sys.executable, "-m", "dshkit", "log", "verify", str(path)], capture_output=True, text=True, timeout=60
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr

    with Session.open(path, read_only=True) as session:
        events = list(session.events)
    types = [event.type for event in events]
    reasons = [event.data["reason"]["kind"] for event in events if event.type == "turn/end"]
    assert reasons == ["completed", "completed", "aborted", "completed"]
    assert any(e.type == "assistant/message" and e.data.get("interrupted") for e in events)
    assert "compaction/start" in types and "compaction/end" in types
    replaced = [e for e in events if e.type == "tool/result" and e.surface_op != "append"]
    assert len(replaced) == 1
    original = events[replaced[0].source_event_seqs[0]]
    assert original.data["message"].id == replaced[0].data["message"].id  # pruned, same id
    outcomes = [e.data["outcome"] for e in events if e.type == "agent/inbox/spliced"]
    assert outcomes.count("inserted") == 6 and outcomes.count("claimed") == 6
    text = "\n".join(lines)
    for expected in ("pre_step  rewrote", "(same id)", "(new id)", "[interrupted]", "queued while busy", "steer", "requests 1-"):
        assert expected in text


def test_the_demo_is_deterministic_apart_from_ids_and_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shapes = []
    for name in ("one.jsonl", "two.jsonl"):
        run_demo(tmp_path / name, capsys)
        with Session.open(tmp_path / name, read_only=True) as session:
            shapes.append([(e.type, e.surface_op, e.source_event_seqs) for e in session.events])
    assert shapes[0] == shapes[1]


def test_the_demo_refuses_to_overwrite_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "exists.jsonl"
    path.write_text("precious\n")
    assert main(argparse.Namespace(log=str(path))) == 2
    assert "already exists" in capsys.readouterr().err
    assert path.read_text() == "precious\n"


def test_the_command_line_runs_the_demo_into_a_temporary_log() -> None:
    result = subprocess.run([sys.executable, "-m", "dshkit", "demo"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith("  dshkit log verify ")
    log = Path(last.split("verify ", 1)[1])
    try:
        assert log.exists()
    finally:
        log.unlink()
        log.parent.rmdir()


def test_the_file_tools_work_in_a_workspace_reached_through_a_symlink(tmp_path: Path) -> None:
    import asyncio

    from dshkit.cli.demo import file_tools, make_workspace

    make_workspace(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")  # as /tmp is on macOS, or a symlinked TMPDIR
    tools = {tool.name: tool for tool in file_tools(tmp_path / "link")}
    listing = asyncio.run(tools["list_files"].run({"path": "."}, None))
    assert listing.splitlines() == ["notes.md", "src/", "todo.txt"]
    assert asyncio.run(tools["read_file"].run({"path": "src/app.py"}, None)) == (tmp_path / "real" / "src" / "app.py").read_text()
    with pytest.raises(PermissionError, match="outside the workspace"):
        asyncio.run(tools["read_file"].run({"path": "../../etc/passwd"}, None))


def test_the_demo_opens_with_run_sync_and_typed_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_demo(tmp_path / "first.jsonl", capsys)
    assert lines[0] == "== An agent in one call: run_sync, a typed tool, typed output =="
    assert lines[2] == "  result.output  Sum(total=5, explanation='2 + 3 = 5')"
    assert lines[3].startswith("  a bad answer went back to the model: - /total: Input should be a valid integer")
