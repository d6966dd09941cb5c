"""Checksums left to check where a record is first read (`split_records(..., defer_checks=True)`).

A JSON Lines log's lines are split at open without their CRC-32C computed; `decode_records`
checks each record on the thread that sorts records ahead of it (or inline, on a small log), and
`Records.check` / `Records.__getitem__` check whatever is read another way. What must not change:
the first damaged line is the one named, whichever way it is damaged, and no unchecked text is
ever handed out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dshkit
from dshkit._core import Records, decode_records, split_records, verified_joined
from dshkit.session import Session, SessionCorruptError
from dshkit.session._log.checksums import checksum, seal_line
from dshkit.session.catalog import list_sessions
from dshkit.session.events import Event


def sealed(records: list[str]) -> bytes:
    return b"".join(seal_line(record) for record in records)


def turn_records(count: int) -> list[str]:
    return [f'{{"seq":{seq},"time":7,"type":"turn/start","data":{{"turn":{seq + 1}}}}}' for seq in range(count)]


def damage_checksum(line: bytes) -> bytes:
    """The line with one digit of its stated checksum changed (still sealed in form)."""
    at = len(line) - 4
    digit = b"0" if line[at : at + 1] != b"0" else b"1"
    return line[:at] + digit + line[at + 1 :]


def test_a_deferred_split_reads_every_suffix_but_checks_no_checksum_yet():
    lines = [seal_line(record) for record in turn_records(3)]
    lines[1] = damage_checksum(lines[1])
    content = b"".join(lines)
    eager, bad = split_records(content, 0, len(content), True)
    assert (eager, bad) == (None, 1)
    records, bad = split_records(content, 0, len(content), True, defer_checks=True)
    assert bad == -1 and isinstance(records, Records) and len(records) == 3
    assert records[0] == turn_records(3)[0].encode()
    with pytest.raises(ValueError, match="record 1: its checksum does not match its text"):
        records[1]
    assert records.check() == 1
    assert decode_records(records, Event) == 1  # the index instead of the columns


def test_a_deferred_split_still_refuses_a_line_that_is_not_sealed_naming_an_earlier_damaged_one_first():
    lines = [seal_line(record) for record in turn_records(6)]
    lines[4] = lines[4][:-19] + b"}\n"  # no checksum suffix at all
    content = b"".join(lines)
    assert split_records(content, 0, len(content), True, defer_checks=True) == (None, 4)
    lines[2] = damage_checksum(lines[2])
    content = b"".join(lines)
    assert split_records(content, 0, len(content), True, defer_checks=True) == (None, 2)
    assert split_records(content, 0, len(content), True) == (None, 2)


@pytest.mark.parametrize("digits", [str.upper, lambda hex_digits: hex_digits[:7] + "g"])
def test_a_stated_checksum_not_written_as_dshkit_writes_it_is_not_a_sealed_line(digits):
    record = turn_records(1)[0]
    line = seal_line(record)
    stated = line[-11:-3].decode()
    if digits(stated) == stated:
        pytest.skip("the checksum has no hex letter to change case")
    changed = line[:-11] + digits(stated).encode() + line[-3:]
    assert split_records(changed, 0, len(changed), True, defer_checks=True) == (None, 0)


def test_checked_records_are_not_checked_again_and_read_as_before():
    content = sealed(turn_records(4))
    records, _ = split_records(content, 0, len(content), True, defer_checks=True)
    assert records.check() == -1
    assert [records[index] for index in range(4)] == [record.encode() for record in turn_records(4)]
    columns = decode_records(records, Event)
    assert isinstance(columns, tuple) and len(columns[0]) == 4


def write_long_log(path: Path, prompts: int) -> None:
    """A log of more records than `decode_records` sorts inline (its thread ahead runs)."""
    with Session.create(path, durability="none") as session:
        for index in range(prompts):
            session.append("user/message", dshkit.create_user_message(f"prompt {index}", source={"kind": "user"}))


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("damaged_line", [2, 1500, 4999])
def test_a_damaged_line_of_a_long_log_is_named_whichever_thread_checks_it(tmp_path: Path, read_only: bool, damaged_line: int):
    path = tmp_path / "long.jsonl"
    write_long_log(path, 5000)
    assert path.stat().st_size > 1 << 20  # split in two halves, checked ahead of the decode
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 5001  # the header and 5,000 events
    intact = b"".join(lines)
    lines[damaged_line - 1] = damage_checksum(lines[damaged_line - 1])
    path.write_bytes(b"".join(lines))
    with pytest.raises(SessionCorruptError, match=rf"long.jsonl: line {damaged_line}: checksum mismatch"):
        Session.open(path, read_only=read_only)
    assert path.read_bytes() != intact  # nothing repaired or cut
    with pytest.raises(SessionCorruptError, match=rf"line {damaged_line}: checksum mismatch"):
        list_sessions(tmp_path)  # the catalog reads only the last record, but checks every one
    path.write_bytes(intact)
    with Session.open(path, read_only=True) as session:
        assert len(session.messages()) == 5000


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ({900: "checksum", 3500: "checksum"}, "line 901: checksum mismatch"),
        ({900: "checksum", 3500: "unsealed"}, "line 901: checksum mismatch"),  # the second half fails first
        ({900: "unsealed", 3500: "unsealed"}, "line 901: checksum mismatch"),
        ({3500: "unsealed", 3900: "checksum"}, "line 3501: checksum mismatch"),
    ],
)
def test_the_first_of_two_damaged_lines_is_named(tmp_path: Path, damage: dict[int, str], named: str):
    path = tmp_path / "long.jsonl"
    write_long_log(path, 5000)
    lines = path.read_bytes().splitlines(keepends=True)
    for index, how in damage.items():
        lines[index] = damage_checksum(lines[index]) if how == "checksum" else lines[index][:-19] + b"}\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(SessionCorruptError, match=named):
        Session.open(path)


def joined_outcome(bodies, crcs: str):
    records, bad = verified_joined(bodies, crcs)
    return (None, bad) if records is None else ([records[index] for index in range(len(records))], bad)


@pytest.mark.parametrize(
    "parts",
    [
        [b'{"seq":0}\n{"seq":1}', b'{"seq":2}'],
        [b'{"seq":0}', b"", b'{"seq":2}'],  # an empty part is an empty record, as in the join
        [b'{"seq":0}\n', b'{"seq":2}'],  # a part ending in a newline: an empty record between
        [b""],
        [],
        [b'{"a":1}\n{"b":2}\n{"c":3}', b'{"d":4}\n{"e":5}', b'{"f":6}'],
    ],
)
def test_parts_read_as_their_join_reads(parts: list[bytes]):
    joined = b"\n".join(parts)
    texts = joined.split(b"\n") if parts else []
    good = ",".join(str(checksum(text)) for text in texts)
    variants = {
        "every checksum": good,
        "one too few": ",".join(good.split(",")[:-1]),
        "one too many": good + ",1" if good else "1",
        "the second fails": ",".join(c if i != 1 else str(int(c) ^ 1) for i, c in enumerate(good.split(","))) if good else "",
        "the last is no integer": ",".join([*good.split(",")[:-1], "x"]) if good else "x",
    }
    for name, crcs in variants.items():
        as_join = joined_outcome(joined, crcs)
        assert joined_outcome([*parts], crcs) == as_join, name
        assert joined_outcome(tuple(memoryview(part) for part in parts), crcs) == as_join, name


def test_parts_must_be_read_only_buffers():
    with pytest.raises(TypeError, match="read-only contiguous buffer, not of a writable bytearray"):
        verified_joined([b'{"seq":0}', bytearray(b'{"seq":1}')], "1,2")


def checksums_of(part: bytes) -> str:
    return ",".join(str(checksum(text)) for text in part.split(b"\n"))


@pytest.mark.parametrize("copies", [1, 40])  # 40: over a megabyte, the later parts on a second thread
def test_parts_paired_each_with_its_own_checksums_read_as_their_join_reads(copies: int):
    parts = [b"\n".join(b'{"seq":%d,"part":%d}' % (seq, part) for seq in range(400 * copies)) for part in range(9)]
    lists = [checksums_of(part) for part in parts]
    whole = joined_outcome(b"\n".join(parts), ",".join(lists))
    assert whole[1] == -1 and len(whole[0]) == 9 * 400 * copies
    assert joined_outcome(parts, lists) == whole
    per_part = 400 * copies
    damaged = [*lists]
    damaged[6] = ",".join([*lists[6].split(",")[:-1], "1"])  # the last record of part 6
    records, _ = verified_joined(parts, damaged, defer_checks=True)
    assert records is not None and records.check() == 7 * per_part - 1
    assert verified_joined(parts, damaged) == (None, 7 * per_part - 1)
    short = [*lists]
    short[2] = ",".join(lists[2].split(",")[:-1])  # part 2: one checksum fewer than records
    assert verified_joined(parts, short) == (None, 3 * per_part - 1)
    with pytest.raises(ValueError, match="9 parts and 8 lists of checksums: one list per part"):
        verified_joined(parts, lists[:8])
