"""Checksummed records (format version 2): one flipped byte anywhere never gives a different history.

The flip campaign flips one bit of every byte of a ~3 KB log, one byte at a time, and opens it
for writing. Every outcome must be the identical history or a `SessionCorruptError` naming where;
the log was written with durability "always", so a recovery that drops an event would drop an
fsynced one and counts as a failure too.
"""

from __future__ import annotations

import sqlite3
import warnings
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from dshkit.session import Session, SessionCorruptError, SessionRecoveryWarning
from dshkit.session._log.checksums import checksum, seal_line, unseal_line


def write_log(path: Path, build) -> tuple[object, ...]:
    """A ~3 KB log (a finished turn and two prompts), fsynced at every append."""
    with Session.create(path, durability="always") as session:
        build.tool_turn(session, 1, ["c1"])
        session.append("user/message", build.user("and one more question"))
        session.append("user/message", build.user("and the last one"))
    return history(path)


def history(path: Path, *, read_only: bool = False) -> tuple[object, ...]:
    with Session.open(path, read_only=read_only) as session:
        return session.id, session.created_at, list(session.events), [m.id for m in session.messages()]


def outcome(path: Path, expected: tuple[object, ...], *, read_only: bool = False) -> str:
    """What opening the (damaged) log gave: "identical", "corrupt", or what went wrong."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            seen = history(path, read_only=read_only)
        except SessionCorruptError:
            return "corrupt"
    if seen == expected:
        return "identical" if not caught else "identical after a warning"
    if caught and any(issubclass(w.category, SessionRecoveryWarning) for w in caught):
        return "recovered with a different history (an fsynced event dropped)"
    return "silently different"


def flip(data: bytes, offset: int) -> bytes:
    damaged = bytearray(data)
    damaged[offset] ^= 1 << (offset % 8)
    return bytes(damaged)


def test_every_jsonl_line_carries_its_checksum_and_stays_json(tmp_path: Path, build):
    path = tmp_path / "log.jsonl"
    write_log(path, build)
    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert lines[0].startswith(b'{"type":"session","version":2,')
    for line in lines:
        record = unseal_line(line)
        assert record is not None and seal_line(record.decode()) == line + b"\n"


def test_flipping_any_byte_of_a_jsonl_log_never_gives_a_different_history(tmp_path: Path, build):
    path = tmp_path / "log.jsonl"
    expected = write_log(path, build)
    intact = path.read_bytes()
    assert 2500 < len(intact) < 4500
    results: Counter[str] = Counter()
    for offset in range(len(intact)):
        path.write_bytes(flip(intact, offset))
        results[outcome(path, expected)] += 1
    assert set(results) <= {"corrupt", "identical"}, results
    assert results["corrupt"] == len(intact)  # CRC-32C catches every single-bit error


@pytest.mark.parametrize("replacement", [b" ", b"}", b"\x00", b"\r"])
def test_a_damaged_last_newline_is_corruption_not_a_torn_tail(tmp_path: Path, build, replacement: bytes):
    path = tmp_path / "log.jsonl"
    expected = write_log(path, build)
    intact = path.read_bytes()
    path.write_bytes(intact[:-1] + replacement)
    last_line = len(intact.splitlines())
    with pytest.raises(SessionCorruptError, match=rf"line {last_line}: a complete record followed by"):
        Session.open(path)
    assert path.read_bytes() == intact[:-1] + replacement  # nothing cut
    path.write_bytes(intact)
    assert history(path) == expected


def test_a_newline_terminated_last_line_that_fails_its_checksum_is_corruption(tmp_path: Path, build):
    path = tmp_path / "log.jsonl"
    write_log(path, build)
    intact = path.read_bytes()
    last_start = intact.rindex(b"\n", 0, len(intact) - 1) + 1
    damaged = intact[:last_start] + b'{"seq":5,"ti\n'
    path.write_bytes(damaged)
    last_line = len(intact.splitlines())
    with pytest.raises(SessionCorruptError, match=rf"line {last_line}: checksum mismatch"):
        Session.open(path)
    assert path.read_bytes() == damaged


def test_a_torn_tail_still_loses_only_the_unfinished_append(tmp_path: Path, build):
    path = tmp_path / "log.jsonl"
    expected = write_log(path, build)
    intact = path.read_bytes()
    unfinished = seal_line('{"seq":99,"time":1,"type":"turn/start","data":{"turn":9}}')
    for length in range(1, len(unfinished)):  # every prefix of an append that did not finish
        path.write_bytes(intact + unfinished[:length])
        with pytest.warns(SessionRecoveryWarning, match="torn last line"):
            assert history(path) == expected
        assert path.read_bytes() == intact


def test_flipping_any_byte_of_a_sqlite_record_never_gives_a_different_history(tmp_path: Path, build):
    path = tmp_path / "log.sqlite"
    expected = write_log(path, build)
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT seq, CAST(body AS BLOB), crc FROM dshkit_events ORDER BY seq").fetchall()
        header, header_crc = db.execute("SELECT CAST(header AS BLOB), crc FROM dshkit_session").fetchone()
    assert 2000 < sum(len(body) for _, body, _ in rows) < 4500
    results: Counter[str] = Counter()
    flips = 0
    # Checksums are checked the same way read-only, which skips the writer's setup: 20x faster here.
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA synchronous=OFF")

    def damage(sql: str, *parameters: object) -> None:
        writer.execute(sql, parameters)

    for seq, body, crc in rows:
        for offset in range(len(body)):
            damaged = flip(body, offset)
            damage("UPDATE dshkit_events SET body = ? WHERE seq = ?", damaged.decode() if _utf8(damaged) else damaged, seq)
            results[outcome(path, expected, read_only=True)] += 1
            flips += 1
        damage("UPDATE dshkit_events SET crc = ? WHERE seq = ?", crc ^ 1, seq)
        results[outcome(path, expected)] += 1  # and once per row for writing
        damage("UPDATE dshkit_events SET body = ?, crc = ? WHERE seq = ?", body.decode(), crc, seq)
        flips += 1
    for offset in range(len(header)):
        damaged = flip(header, offset)
        damage("UPDATE dshkit_session SET header = ?", damaged.decode() if _utf8(damaged) else damaged)
        results[outcome(path, expected, read_only=True)] += 1
        flips += 1
    damage("UPDATE dshkit_session SET header = ?, crc = ?", header.decode(), header_crc)
    writer.close()
    assert history(path) == expected
    assert set(results) <= {"corrupt", "identical"}, results
    assert results["corrupt"] == flips


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_a_version_1_log_still_opens_and_keeps_its_format(legacy_log: Path, build):
    with Session.open(legacy_log) as session:
        assert [m.text for m in session.messages()] == [f"m{n}" for n in range(5)]
        session.append("user/message", build.user("m5"))
    lines = legacy_log.read_bytes().split(b"\n")
    assert lines[0].startswith(b'{"type":"session","version":1,') and b'"crc"' not in legacy_log.read_bytes()
    with Session.open(legacy_log) as session:
        assert [m.text for m in session.messages()][-1] == "m5"


def test_a_header_whose_version_disagrees_with_its_checksums_is_corruption(legacy_log: Path):
    content = legacy_log.read_bytes().replace(b'"version":1', b'"version":2', 1)
    legacy_log.write_bytes(content)
    with pytest.raises(SessionCorruptError, match="line 1: a version 2 header on records without checksums"):
        Session.open(legacy_log)


def test_a_joined_table_read_pairs_every_record_with_its_checksum():
    from dshkit.session._log.checksums import verified_join

    first, second = b'{"seq":0}', b'{"seq":1}'
    crcs = f"{checksum(first)},{checksum(second)}"
    records = verified_join(first + b"\n" + second, crcs)
    assert records is not None and [records[0], records[1]] == [first, second]
    assert len(verified_join(b"", "")) == 0  # no rows: group_concat gives NULL for both
    # A checksum that does not match is found where the record is first read, not by the join.
    unchecked = verified_join(first + b"\n" + second, f"{checksum(first)},{checksum(second) ^ 1}")
    assert unchecked is not None and unchecked.check() == 1
    assert verified_join(first + b"\n" + second + b"\n", crcs) is None  # more records than checksums
    assert verified_join(first, crcs) is None  # more checksums than records
    assert verified_join(first + b"\n" + second, f"{checksum(first)},x") is None  # not an integer
    assert verified_join(first, str(checksum(first) + (1 << 32))) is None  # beyond 32 bits
    assert verified_join(first, f"+{checksum(first)}") is None and verified_join(first, "") is None
