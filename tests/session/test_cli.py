"""`dshkit log show|verify|messages`: read-only inspection of a log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import dshkit
from dshkit.cli import main
from dshkit.session import Session
from dshkit.session._log.checksums import seal_line


@pytest.fixture
def finished_log(log_path: Path, build) -> Path:
    with Session.create(log_path) as session:
        build.tool_turn(session, 1, ["c1", "c2"])
        history = session.messages()
        session.replace(history[2].with_content(
            [{"type": "tool_result", "tool_call_id": "c1", "content": [{"type": "text", "text": "[pruned]"}], "is_error": False}]
        ))
        session.append("user/message", build.user("a long question " * 40))
    return log_path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["log", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_show_prints_a_readable_transcript(finished_log: Path, capsys):
    before = finished_log.read_bytes()
    code, out, _ = run(capsys, "show", str(finished_log))
    assert code == 0
    with Session.open(finished_log, read_only=True) as session:
        for message in session.messages():
            assert message.id in out  # every message with its full id
        replaced = session.events[-2]
    assert out.startswith(f"session {session.id} created ")
    assert "turn 1 (#0" in out and "  step 1 (#1)" in out and "turn 1 end: completed" in out
    assert "(model test/m1)" in out and "(tool c1)" in out and "(user)" in out
    assert "calls lookup id=c1" in out
    assert f"#{replaced.seq} user" in out and "REPLACES surface 2" in out
    assert "… (" in out  # long text is shortened
    assert finished_log.read_bytes() == before


def test_verify_accepts_a_sound_log(finished_log: Path, capsys):
    code, out, _ = run(capsys, "verify", str(finished_log))
    assert code == 0, out
    assert "ok (" in out


def test_messages_prints_one_json_object_per_line(finished_log: Path, capsys):
    code, out, _ = run(capsys, "messages", str(finished_log))
    assert code == 0
    with Session.open(finished_log, read_only=True) as session:
        expected = session.messages()
    printed = [dshkit.freeze_message(json.loads(line)) for line in out.splitlines()]
    assert printed == list(expected)


def append_raw(path: Path, *records: dict) -> None:
    with path.open("ab") as log:
        for record in records:
            log.write(seal_line(json.dumps(record)))


def message_record(seq: int, message: dshkit.Message, op: object = "append") -> dict:
    return {"seq": seq, "time": 1, "type": "user/message", "data": message.to_dict(), "surface_op": op, "source_event_seqs": []}


def test_verify_reports_each_problem_with_its_line(tmp_path: Path, build, capsys):
    path = tmp_path / "bad.jsonl"
    prompt = build.user("hi")
    with Session.create(path) as session:
        session.append("turn/start", {"turn": 1})
        session.append("user/message", prompt)
        session.append("assistant/message", {"turn": 1, "step": 1, "message": build.assistant("x", ["c1"])})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    other = dshkit.freeze_message({**prompt.to_dict(), "source": {"kind": "plugin", "plugin": "x"}})
    append_raw(
        path,
        message_record(4, prompt),  # the same id appended twice
        message_record(5, other, {"op": "replace", "start": 0, "end": 1}),  # a "rewrite" that changes the source
        {"seq": 6, "time": 0, "type": "turn/start", "data": {"turn": 2}},
    )
    before = path.read_bytes()
    code, out, _ = run(capsys, "verify", str(path))
    assert code == 1
    problems = out.splitlines()
    assert any(line.endswith("line 4: no request/header before this model response: its request cannot be rebuilt") for line in problems)
    assert any("line 5: turn 1 ended with tool call(s) 'c1' unanswered" in line for line in problems)
    assert any("line 6: message" in line and "already in the session" in line for line in problems)
    assert any("line 7: replacement of" in line and "source" in line for line in problems)
    assert any("line 8: time 0 is before" in line for line in problems)
    assert any("line 8: turn 2 has no turn/end" in line for line in problems)
    assert path.read_bytes() == before  # verify never repairs


def test_verify_reports_an_unreadable_log(tmp_path: Path, capsys):
    path = tmp_path / "junk.jsonl"
    path.write_text("not a log\n")
    code, _, err = run(capsys, "verify", str(path))
    assert code == 1 and "junk.jsonl: line 1: not a dshkit session log" in err
    code, _, err = run(capsys, "show", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "missing.jsonl" in err


def test_verify_reports_a_torn_tail(tmp_path: Path, build, capsys):
    path = tmp_path / "torn.jsonl"
    with Session.create(path) as session:
        session.append("user/message", build.user())
    with path.open("ab") as log:
        log.write(b'{"seq":1,"ti')
    code, out, _ = run(capsys, "verify", str(path))
    assert code == 1 and "line 3: torn last line" in out


def test_messages_refuses_an_underivable_log(tmp_path: Path, build, capsys):
    path = tmp_path / "future.jsonl"
    with Session.create(path) as session:
        session.append("user/message", build.user())
    append_raw(path, {"seq": 1, "time": 1, "type": "surface/rewind", "data": {}})
    code, _, err = run(capsys, "messages", str(path))
    assert code == 1 and "surface/rewind" in err


def test_the_command_line_entry_point(finished_log: Path):
    result = subprocess.run([sys.executable, "-m", "dshkit", "log", "verify", str(finished_log)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
