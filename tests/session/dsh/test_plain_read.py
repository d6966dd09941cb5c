"""Reading an original plain log at open (`dsh/plain_read.py`): a large log is mapped, not copied.

What must hold whichever way a log is read: the same header, lines, crash-tail cuts and events as
a whole read; and the mapping never reaches a byte a writer may cut (the crash tail after the last
`turn/end`, the line of a failed append), so a reader keeps its lines when a writer cuts the log
while it opens (a page past the end of a file would kill the reader with SIGBUS).
"""

from __future__ import annotations

import gc
import mmap
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from dshkit._core import OriginalLines, decode_original_records, split_original_lines
from dshkit.session import Session, SessionRecoveryWarning
from dshkit.session.dsh import jsonl_store, plain_read
from dshkit.session.dsh.chunk_rows import ROW_TYPES
from dshkit.session.dsh.jsonl_store import DshJsonlStore
from dshkit.session.dsh.plain_read import PlainContent, crash_tail_start, read_plain_log
from dshkit.session.dsh.vocabulary import IGNORABLE_TYPES, VERBATIM_TYPES
from dshkit.session.stores.jsonl_read import MAP_FROM, TAIL_READ
from tests.session.dsh.original_logs import OriginalLog, user
from tests.session.dsh.test_native_read import _agent_log, _line, _open, assert_same_both_ways

T = 1_783_600_629_539
TURN_END_LINE = b'{"type":"turn/end","seq":%d,"time":1,"data":{"turn":9,"reason":{"kind":"completed"}}}'


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A log of over `MAP_FROM` bytes, ending with a turn/end, and its number of events."""
    log = _agent_log(500)
    path = log.write(tmp_path_factory.mktemp("mapped") / "large.jsonl")
    assert path.stat().st_size >= MAP_FROM
    return path, log.seq


def copy_of(large_log: Path, tmp_path: Path, extra: bytes = b"") -> Path:
    path = tmp_path / "session.jsonl"
    path.write_bytes(large_log.read_bytes() + extra)
    return path


def is_turn_end(line: bytes) -> bool:
    return line.startswith(b'{"type":"turn/end"')


def read(path: Path) -> tuple[PlainContent, bytes]:
    fd = os.open(path, os.O_RDONLY)
    try:
        return read_plain_log(fd)
    finally:
        os.close(fd)


def load_lines(path: Path, **options: Any) -> list[bytes]:
    store = DshJsonlStore(path)
    try:
        return list(store.load("none", **{"read_only": True, **options})[1])
    finally:
        store.close()


def test_a_large_log_is_mapped_up_to_a_settled_turn_end_and_reads_as_a_whole_read_does(large: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    large_log = large[0]
    content, rest = read(large_log)
    whole = large_log.read_bytes()
    assert isinstance(content, mmap.mmap) and content[:] + rest == whole
    # The last line is a turn/end a failed append could still cut: the mapping ends at the one before.
    assert is_turn_end(whole.split(b"\n")[-2]) and is_turn_end(content[:].split(b"\n")[-2]) and rest.count(b"\n") > 1
    mapped = _open(large_log, read_only=True), load_lines(large_log)
    monkeypatch.setattr(plain_read, "MAP_FROM", 1 << 40)  # read whole, as before
    assert type(read(large_log)[0]) is bytes
    assert (_open(large_log, read_only=True), load_lines(large_log)) == mapped
    assert mapped[1] == whole.split(b"\n")[1:-1]


def test_a_small_log_or_one_without_a_settled_turn_end_near_its_end_is_read_whole(large: tuple[Path, int], tmp_path: Path) -> None:
    large_log, seq = large
    small = _agent_log(3).write(tmp_path / "small.jsonl")
    assert read(small) == (small.read_bytes(), b"")
    # A last turn far from the end (its lines then longer than the tail read), and a mention of
    # "turn/end" in a message's text, which is no turn/end record.
    text = "a prompt naming \"turn/end\" " + "x" * (TAIL_READ // 4)
    extra = b"".join(_line({"type": "user/message", "seq": seq + k, "time": T, "data": user(text), "surfaceOp": "append"}) + b"\n" for k in range(5))
    path = copy_of(large_log, tmp_path, extra)
    content, rest = read(path)
    assert type(content) is bytes and content == path.read_bytes() and rest == b""
    assert len(load_lines(path)) == len(path.read_bytes().split(b"\n")) - 2


def test_a_log_on_a_file_system_that_cannot_map_it_is_read_whole(large: tuple[Path, int], monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> mmap.mmap:
        raise OSError(19, "No such device")

    monkeypatch.setattr(plain_read.mmap, "mmap", refuse)
    assert read(large[0]) == (large[0].read_bytes(), b"")
    assert len(load_lines(large[0])) == len(large[0].read_bytes().split(b"\n")) - 2


def test_the_settled_turn_end_is_the_last_turn_end_followed_by_a_complete_line() -> None:
    after = plain_read._after_settled_turn_end
    first, second = TURN_END_LINE % 1, TURN_END_LINE % 2
    other = b'{"type":"step/end","seq":3,"time":1,"data":{"turn":9,"step":1}}'
    mention = b'{"type":"note","seq":4,"time":1,"data":{"text":"\\"turn/end\\"","t":"turn/end"}}'
    assert after(b"x\n" + first + b"\n" + other + b"\n") == len(b"x\n" + first + b"\n")
    assert after(b"x\n" + first + b"\n" + second + b"\n") == len(b"x\n" + first + b"\n")  # not the last line
    assert after(b"x\n" + first + b"\n" + mention + b"\n" + other + b"\n" + b'{"torn') == len(b"x\n" + first + b"\n")
    assert after(b"x\n" + first + b"\nnot json \"turn/end\"\n" + other + b"\n") == len(b"x\n" + first + b"\n")
    assert after(first + b"\n" + other + b"\n") is None  # may begin before the bytes read
    assert after(b"x\n" + first + b"\n" + b'{"torn') is None and after(b"x\n" + other + b"\n" + other + b"\n") is None
    assert after(b"") is None and after(b"\n") is None


def test_the_crash_tail_starts_at_the_first_unparsable_line_after_the_last_turn_end() -> None:
    turn_end, other = TURN_END_LINE % 1, b'{"type":"step/end"}'
    assert crash_tail_start([other, b"{", turn_end, other, b"{", other, b"[1,"]) == 4
    assert crash_tail_start([other, b"{", turn_end, other]) == 4
    assert crash_tail_start([b"{", other]) == 0 and crash_tail_start([]) == 0


@pytest.mark.parametrize("read_only", [True, False])
def test_a_crash_tail_of_a_mapped_log_is_cut_as_before(large: tuple[Path, int], tmp_path: Path, read_only: bool) -> None:
    large_log, seq = large
    extra = b"{not json " + b"z" * 9000 + b"\n" + b'{"type":"turn/st'
    path = copy_of(large_log, tmp_path, extra)
    assert isinstance(read(path)[0], mmap.mmap)
    with pytest.warns(SessionRecoveryWarning, match="not JSON"):
        events, _messages = _open(path, read_only=read_only)
    assert len(events) == seq and events[-1].type == "turn/end"
    assert path.read_bytes() == large_log.read_bytes() + (extra if read_only else b"")


@pytest.mark.parametrize("cut", ["crash tail", "failed append"])
def test_a_reader_survives_a_writer_cutting_the_log_while_it_opens(large: tuple[Path, int], tmp_path: Path, cut: str, monkeypatch: pytest.MonkeyPatch) -> None:
    large_log, seq = large
    big = "w" * 9000  # the cut spans whole pages, which a read through a mapping would fault on
    if cut == "crash tail":  # a writer opening the log cuts the unparsable line after the last turn/end
        extra = b"{not json " + big.encode() + b"\n"
    else:  # a writer whose append (complete, its fsync failed) is cut back
        extra = _line({"type": "user/message", "seq": seq, "time": T, "data": user(big), "surfaceOp": "append"}) + b"\n"
    path = copy_of(large_log, tmp_path, extra)
    intact_size = large_log.stat().st_size

    def read_then_cut(fd: int) -> tuple[PlainContent, bytes]:
        log = plain_read.read_plain_log(fd)
        os.truncate(path, intact_size)
        return log

    monkeypatch.setattr(jsonl_store, "read_plain_log", read_then_cut)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with Session.open(path, read_only=True) as session:  # the log as this reader read it
            events = list(session.events)
            texts = [message.text for message in session.messages()]
    assert [type(warning.message) for warning in seen] == ([SessionRecoveryWarning] if cut == "crash tail" else [])
    assert len(events) == seq + (cut == "failed append") and is_turn_end(large_log.read_bytes().split(b"\n")[-2])
    assert (texts[-1] == big) is (cut == "failed append")
    assert path.stat().st_size == intact_size


def test_lines_of_a_mapping_and_a_tail_split_as_their_joining_does(tmp_path: Path) -> None:
    text = b"h\nfirst\n\nthird \xc3\xa9\n"
    path = tmp_path / "mapped"
    path.write_bytes(text)
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), len(text), access=mmap.ACCESS_READ)
    for tail in [b"", b"x", b"\n", b"fourth\nfifth", b"fourth\n"]:
        for start in range(len(text) + len(tail) + 2):
            lines, expected = split_original_lines(mapped, start, tail), (text + tail)[start:].split(b"\n")
            assert isinstance(lines, OriginalLines) and list(lines) == expected
            for first, stop in [(0, -1), (1, None), (-2, None)]:
                assert list(lines[first:stop]) == expected[first:stop]
            assert [lines[index] for index in range(-len(expected), len(expected))] == expected * 2
    del lines
    mapped.close()  # no buffer left exported: the lines are gone


@pytest.mark.parametrize("parts", [[b"", b"a\n", b"", b"b\nc\n", b"d"], [b"", b""], [b"", b"x"], [b"h\n", b"a\nb\n", b"\n", b"c\n"], [b"h\n", b""]])
def test_lines_of_several_parts_split_as_their_joining_does(parts: list[bytes]) -> None:
    joined = b"".join(parts)
    for start in range(len(joined) + 2):
        lines, expected = split_original_lines(*parts[:1], start, *parts[1:]), joined[start:].split(b"\n")
        assert list(lines) == expected and list(lines[1:]) == expected[1:]
        assert [lines[index] for index in range(-len(expected), len(expected))] == expected * 2


def test_lines_of_a_content_not_ending_its_line_or_of_a_writable_buffer_are_refused() -> None:
    with pytest.raises(ValueError, match="must end with a newline"):
        split_original_lines(b"h\nfirst", 0, b"second\n")
    with pytest.raises(ValueError, match="must end with a newline"):
        split_original_lines(b"h\n", 0, b"", b"first", b"", b"second\n")
    with pytest.raises(TypeError, match="read-only"):
        split_original_lines(bytearray(b"h\nfirst\n"), 0)
    with pytest.raises(TypeError):
        split_original_lines(b"h\n", 0, "second")  # type: ignore[arg-type]


def test_the_columns_lists_are_not_tracked_by_the_garbage_collector() -> None:
    records = [line.encode() for line in _agent_log(4).lines()]
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None
    types, _times, messages, blob, _ends, _pending = columns
    assert any(message is not None for message in messages) and type(blob) is bytearray
    assert not gc.is_tracked(types) and not gc.is_tracked(messages)
    assert not any(gc.is_tracked(item) for item in [*types, *messages])  # nothing that could lead back


def test_packed_rows_whose_events_outgrow_their_records_read_the_same_both_ways() -> None:
    # The blob starts at the records' size; a row of one-character chunks expands many times over.
    log = OriginalLog()
    log.event("turn/start", {"turn": 1})
    for index in range(40):
        log.packed("text-chunks", 1, 1, index, ["a"] * 200)
    log.event("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    records = [line.encode() for line in log.lines()]
    kind, (events, *_rest) = assert_same_both_ways(records)
    columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
    assert columns is not None and len(columns[3]) > 4 * sum(map(len, records))
    assert kind == "events" and len(events) == 2 + 40 * 200
