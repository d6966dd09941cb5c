"""Opening a log holds its records to the append rules; `dshkit log verify` caps what it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import dshkit
from dshkit.cli import main
from dshkit.session import Session, SessionCorruptError, SessionIntegrityWarning
from dshkit.session._log.checksums import seal_line

from tests.session.conftest import Build


def message_record(seq: int, event_type: str, message: dict, **envelope: object) -> dict:
    data = message if event_type == "user/message" else {**envelope, "message": message}
    return {"seq": seq, "time": 1, "type": event_type, "data": data, "surface_op": "append", "source_event_seqs": []}


def prompt() -> dict:
    return {**Build.user("hi").to_dict(), "id": "u"}


BAD_RECORDS = {
    "a user/message with role assistant": (
        message_record(1, "user/message", Build.assistant("pretending").to_dict()),
        "needs a user-role message",
    ),
    "an assistant message with a user source": (
        message_record(1, "assistant/message", {**Build.assistant("x").to_dict(), "source": {"kind": "user"}}, turn=1),
        "",
    ),
    "a tool result answering no pending call": (
        message_record(1, "tool/result", Build.result("c9").to_dict(), turn=1),
        "no pending tool call",
    ),
    "two messages with one id": (message_record(1, "user/message", prompt()), "already in the session"),
    "a surface_op on turn/start": (
        {"seq": 1, "time": 1, "type": "turn/start", "data": {"turn": 1}, "surface_op": "append", "source_event_seqs": []},
        "carry no surface_op",
    ),
}


def write_log(path: Path, record: dict) -> None:
    with Session.create(path) as session:
        session.append("user/message", dshkit.freeze_message(prompt()))
    with path.open("ab") as log:
        log.write(seal_line(json.dumps(record)))


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_a_record_that_breaks_the_append_rules_is_corruption_naming_its_line(tmp_path: Path, case: str):
    path = tmp_path / "log.jsonl"
    record, reason = BAD_RECORDS[case]
    write_log(path, record)
    before = path.read_bytes()
    with pytest.raises(SessionCorruptError, match=rf"log\.jsonl: line 3: .*{reason}"):
        Session.open(path)
    assert path.read_bytes() == before
    with pytest.warns(SessionIntegrityWarning, match=rf"1 record\(s\) break the append rules .*line 3: .*{reason}"):
        session = Session.open(path, read_only=True)  # still open for inspection
    with session:
        assert len(session.events) == 2
        if case == "two messages with one id":
            assert [m.id for m in session.messages()] == ["u", "u"]
    assert path.read_bytes() == before


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_verify_reports_a_record_that_breaks_the_append_rules(tmp_path: Path, case: str, capsys):
    path = tmp_path / "log.jsonl"
    write_log(path, BAD_RECORDS[case][0])
    assert main(["log", "verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "line 3: " in out and out.splitlines()[-1].endswith("problem(s) in 2 events")


def test_verify_prints_the_first_50_problems_then_a_count_and_a_summary(tmp_path: Path, capsys):
    path = tmp_path / "log.jsonl"
    with Session.create(path, durability="none") as session:
        for turn in range(1, 121):  # every turn/start but the first: "while turn n-1 has no turn/end"
            session.append("turn/start", {"turn": turn})
    assert main(["log", "verify", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 52
    assert all(": turn/start while turn" in line for line in lines[:50])
    assert lines[50] == "... and 70 more (--all prints every problem)"
    assert lines[51] == f"{path}: 120 problem(s) in 120 events"
    assert main(["log", "verify", "--all", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 121 and lines[119].endswith("turn 120 has no turn/end (a crash; it is closed when the log is opened for writing)")
    assert lines[120] == f"{path}: 120 problem(s) in 120 events"
