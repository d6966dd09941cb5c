"""Large logs: the records sorted ahead of the message building on a second thread
(`rust/log/sort_ahead.rs`, from 1,024 records) and the checksums of megabytes of lines. The same
records, the same verdicts, and the same first failing line as a small log's, wherever it lies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshkit._core import crc32c, split_records, verified_joined
from dshkit.session import Session, SessionCorruptError, SessionIntegrityWarning
from dshkit.session._log.checksums import seal_line
from dshkit.session._log.event_codec import decode_events
from dshkit.session.events import Event

from tests.session.conftest import Build

COUNT = 6000  # records of ~250 bytes: 1.5 MB


def chunk_record(seq: int) -> bytes:
    data = {"turn": 1, "step": 1, "chunk": {"text": f"{seq:06d}" + "x" * 180}}
    return json.dumps({"seq": seq, "time": 1, "type": "assistant/chunk", "data": data}, separators=(",", ":")).encode()


RECORDS = [chunk_record(seq) for seq in range(COUNT)]
LINES = [seal_line(record.decode()) for record in RECORDS]


def flipped(lines: list[bytes], *at: int) -> bytes:
    damaged = list(lines)
    for index in at:
        line = bytearray(damaged[index])
        line[12] ^= 0x01
        damaged[index] = bytes(line)
    return b"".join(damaged)


def test_the_log_is_large_enough_for_two_threads():
    assert len(b"".join(LINES)) > 1 << 20 and COUNT > 1024


def test_every_line_of_a_large_log_is_split_and_checked():
    content = b"header\n" + b"".join(LINES)
    records, bad = split_records(content, len(b"header\n"), len(content), True)
    assert bad == -1 and records is not None and list(records) == RECORDS
    unsealed, bad = split_records(content, 0, len(content), False)
    assert bad == -1 and unsealed is not None and len(unsealed) == COUNT + 1 and unsealed[COUNT] == LINES[-1][:-1]


@pytest.mark.parametrize("bad", [[0], [187], [188], [3007], [3008], [COUNT - 1], [10, 5000], [3008, COUNT - 1], [187, 188]])
def test_a_large_log_names_its_first_bad_line(bad: list[int]):
    content = flipped(LINES, *bad)
    assert split_records(content, 0, len(content), True) == (None, bad[0])


def test_a_short_last_line_of_a_large_log_is_named():
    content = b"".join(LINES) + b"{}\n"
    assert split_records(content, 0, len(content), True) == (None, COUNT)


def test_a_large_joined_table_is_checked_row_by_row():
    bodies = b"\n".join(RECORDS)
    crcs = [str(crc32c(record)) for record in RECORDS]
    records, bad = verified_joined(bodies, ",".join(crcs))
    assert bad == -1 and records is not None and list(records) == RECORDS
    for index in (0, 187, 188, 3008, COUNT - 1):
        wrong = [*crcs]
        wrong[index] = str(int(wrong[index]) ^ 1)
        assert verified_joined(bodies, ",".join(wrong)) == (None, index)
    later = [*crcs]
    later[4000] = "x"
    later[3500] = "+" + later[3500]
    assert verified_joined(bodies, ",".join(later)) == (None, 3500)
    assert verified_joined(bodies + b"\n", ",".join(crcs)) == (None, COUNT)  # more records than checksums
    assert verified_joined(b"\n".join(RECORDS[:-1]), ",".join(crcs)) == (None, COUNT - 1)  # more checksums


def append_record(path: Path, record: dict[str, object]) -> None:
    with path.open("ab") as log:
        log.write(seal_line(json.dumps(record, ensure_ascii=False)))


def python_events(path: Path) -> list[Event]:
    lines = path.read_bytes().split(b"\n")[1:-1]
    return list(decode_events([line[:-18] + b"}" for line in lines], str, lambda event: None))


def conversation(path: Path, turns: int) -> int:
    """A log of `turns` agent turns (8 events each); its length."""
    with Session.create(path, durability="none") as session:
        for turn in range(1, turns + 1):
            session.append("turn/start", {"turn": turn})
            session.append("step/start", {"turn": turn, "step": 1})
            session.append("user/message", Build.user(f"question {turn}"))
            session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"text": "ok"}})
            session.append("assistant/message", {"turn": turn, "step": 1, "message": Build.assistant(f"answer {turn}")})
            session.append("step/end", {"turn": turn, "step": 1})
            session.append("plugin/note", {"ignorable": True, "turn": turn})
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return len(session.events)


def test_a_large_log_opens_to_the_events_of_the_python_decoder(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    seq = conversation(path, 300)
    # Records dshkit would not write, far past the first chunk of verdicts: spaced, keys reordered,
    # a float, an escape; each takes whatever path it took on one thread.
    append_record(path, {"data": {"turn": 301}, "type": "turn/start", "time": 2, "seq": seq})
    append_record(path, {"seq": seq + 1, "time": 2, "type": "step/start", "data": {"turn": 301, "step": 1, "w": 0.5}})
    append_record(path, {"seq": seq + 2, "time": 2, "type": "step/end", "data": {"turn": 301, "step": 1, "\u00e9": "\u2603"}})
    expected = python_events(path)
    assert len(expected) > 2400
    with Session.open(path, read_only=True) as session:
        assert list(session.events) == expected
        assert [message.text for message in session.messages()][-2:] == ["question 300", "answer 300"]


def test_a_sealed_record_breaking_its_rules_deep_in_a_large_log_is_corruption_naming_its_line(tmp_path: Path):
    path = tmp_path / "log.jsonl"
    seq = conversation(path, 300)
    record = {"seq": seq, "time": 1, "type": "turn/start", "data": {"turn": "301"}}  # checksum good, rule broken
    append_record(path, record)
    append_record(path, {"seq": seq + 1, "time": 1, "type": "turn/end", "data": {"turn": 301, "reason": {"kind": "completed"}}})
    with pytest.raises(SessionCorruptError, match=f"line {seq + 2}: .*must be an int"):
        Session.open(path)
    with pytest.warns(SessionIntegrityWarning, match="must be an int"), Session.open(path, read_only=True) as session:
        assert session.events[seq].data == record["data"]
        assert session.events[seq + 1].type == "turn/end"


def test_a_large_sqlite_log_names_its_bad_row(tmp_path: Path):
    import sqlite3
    from contextlib import closing

    path = tmp_path / "log.db"
    seq = conversation(path, 300)
    with closing(sqlite3.connect(path)) as db, db:  # `with db` alone commits but never closes
        db.execute("UPDATE dshkit_events SET crc = crc + 1 WHERE seq = ?", (seq - 5,))
    with pytest.raises(SessionCorruptError, match=f"row {seq - 4} of dshkit_events: checksum mismatch"):
        Session.open(path, read_only=True)
