"""Reading a JSON Lines log at open (`stores/jsonl_read.py`): a large log is mapped, not copied.

What must hold whichever way a log is read: the same header, records and repairs as a whole read;
and a mapping never reaches a byte a writer may cut (a torn tail, a void last line), so a reader
holding one keeps reading its records after a writer cut the log (a page past the end of a file
would kill the reader with SIGBUS).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

import dshkit
from dshkit.session import Session, SessionCorruptError, SessionRecoveryWarning
from dshkit.session._log.checksums import VOID_SUFFIX, seal_line, void_suffix_at
from dshkit.session.stores import jsonl, jsonl_read
from dshkit.session.stores.jsonl_read import MAP_FROM, TAIL_READ, LogBytes, read_log


def write_log(path: Path, prompts: int, text: str = "a prompt of some length, repeated to fill the log") -> list[str]:
    with Session.create(path, durability="none") as session:
        for index in range(prompts):
            session.append("user/message", dshkit.create_user_message(f"{index}: {text}", source={"kind": "user"}))
        return [message.id for message in session.messages()]


def whole_read(path: Path) -> LogBytes:
    """`LogBytes` as a whole read gives it (the small-log path), to compare a mapping with."""
    content = path.read_bytes()
    keep = content.rfind(b"\n") + 1
    last_start = content.rfind(b"\n", 0, max(keep - 1, 0)) + 1
    return LogBytes(content, keep, last_start, content[last_start : max(keep - 1, 0)], content[keep:])


def read(path: Path) -> LogBytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_log(fd)
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def large_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path = tmp_path_factory.mktemp("mapped") / "large.jsonl"
    ids = write_log(path, 6000)
    assert path.stat().st_size >= MAP_FROM
    return path, ids


def copy_of(large_log: tuple[Path, list[str]], tmp_path: Path, tail: bytes = b"") -> Path:
    path = tmp_path / "log.jsonl"
    path.write_bytes(large_log[0].read_bytes() + tail)
    return path


def test_a_large_log_is_mapped_and_reads_as_a_whole_read_does(large_log):
    path, ids = large_log
    mapped = read(path)
    assert isinstance(mapped.content, mmap.mmap) and len(mapped.content) == mapped.keep
    whole = whole_read(path)
    assert mapped.content[:] == whole.content[: whole.keep]
    assert mapped[1:] == whole[1:]
    with Session.open(path, read_only=True) as session:
        assert [message.id for message in session.messages()] == ids


def test_a_small_log_is_read_whole(tmp_path: Path):
    path = tmp_path / "small.jsonl"
    write_log(path, 20)
    small = read(path)
    assert type(small.content) is bytes and small == whole_read(path)


@pytest.mark.parametrize("length", [1, 200, TAIL_READ + 10])
def test_a_torn_tail_of_a_mapped_log_is_cut_as_before(large_log, tmp_path: Path, length: int):
    unfinished = seal_line('{"seq":6000,"time":1,"type":"turn/start","data":{"turn":1,"note":"' + "x" * length + '"}}')[:length]
    path = copy_of(large_log, tmp_path, unfinished)
    log = read(path)
    assert log.tail == unfinished or type(log.content) is bytes  # a tail longer than the read: read whole
    with pytest.warns(SessionRecoveryWarning, match="torn last line"):
        with Session.open(path) as session:
            assert [message.id for message in session.messages()] == large_log[1]
    assert path.read_bytes() == large_log[0].read_bytes()


def test_a_void_last_line_of_a_mapped_log_is_cut_as_before(large_log, tmp_path: Path):
    line = seal_line('{"seq":6000,"time":1,"type":"turn/start","data":{"turn":1}}')
    at = void_suffix_at(len(line))
    path = copy_of(large_log, tmp_path, line[:at] + VOID_SUFFIX + b"\n")
    with pytest.warns(SessionRecoveryWarning, match="void"):
        with Session.open(path) as session:
            assert len(session.messages()) == 6000
    assert path.read_bytes() == large_log[0].read_bytes()


def test_a_last_line_longer_than_the_tail_read_is_read_whole(tmp_path: Path):
    path = tmp_path / "long-last.jsonl"
    write_log(path, 4000)
    with Session.open(path) as session:
        session.append("user/message", dshkit.create_user_message("y" * (TAIL_READ * 2), source={"kind": "user"}))
    assert path.stat().st_size >= MAP_FROM
    log = read(path)
    assert type(log.content) is bytes and log == whole_read(path)
    with Session.open(path, read_only=True) as session:
        assert len(session.messages()[-1].text) == TAIL_READ * 2


def test_a_damaged_line_of_a_mapped_log_is_named(large_log, tmp_path: Path):
    path = copy_of(large_log, tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3000] = lines[3000].replace(b"prompt", b"prompT", 1)
    path.write_bytes(b"".join(lines))
    assert isinstance(read(path).content, mmap.mmap)
    with pytest.raises(SessionCorruptError, match=r"log\.jsonl: line 3001: checksum mismatch"):
        Session.open(path, read_only=True)


@pytest.mark.parametrize("cut", ["torn tail", "void last line"])
def test_a_reader_survives_a_writer_cutting_the_log_while_it_opens(large_log, tmp_path: Path, cut: str, monkeypatch):
    line = seal_line('{"seq":6000,"time":1,"type":"turn/start","data":{"turn":1,"note":"' + "z" * 9000 + '"}}')
    if cut == "torn tail":
        extra = line[:-100]
    else:
        extra = line[: void_suffix_at(len(line))] + VOID_SUFFIX + b"\n"
    path = copy_of(large_log, tmp_path, extra)
    intact_size = large_log[0].stat().st_size

    def read_then_cut(fd: int) -> LogBytes:
        # A writer opening the log cuts what follows its last record right after this reader
        # read it: the 9 KB cut spans whole pages, which a read through a mapping would fault on.
        log = jsonl_read.read_log(fd)
        os.truncate(path, intact_size)
        return log

    monkeypatch.setattr(jsonl, "read_log", read_then_cut)
    with pytest.warns(SessionRecoveryWarning):
        with Session.open(path, read_only=True) as session:
            assert len(session.messages()) == 6000
    assert path.stat().st_size == intact_size
