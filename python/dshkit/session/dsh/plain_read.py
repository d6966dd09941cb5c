"""Reading an original plain log at open: mapped up to a `turn/end` no writer can cut, the rest read.

A large log is mapped read-only (`mmap`, its pages faulted in by one call where Linux offers
`MAP_POPULATE`), as dshkit's own logs are (`stores/jsonl_read.py`), rather than read into a new
`bytes`: its lines become spans of the file's own cached pages (`OriginalLines`).

A mapping must never be touched past the end of the file: a page wholly past it raises SIGBUS.
What a writer of this format ever cuts is the crash tail (`crash_tail_start`: from the first
unparsable line after the log's last `turn/end`, cut when a log is opened to write) and the line
of an append that failed, even once complete (its fsync failed). Neither reaches a `turn/end`
line followed by another complete line: every cut starts after it. So the mapping ends with the
last such line found in the log's last `TAIL_READ` bytes, read with `pread`, and what follows it
is that copy, which no writer's cut can touch. A log with no such line there, or on a file
system that cannot map it, is read whole.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping, Sequence
from typing import Union

from dshkit import from_json
from dshkit.session.stores.jsonl_read import MAP_FROM, TAIL_READ, map_start, read_all

_TURN_END = b'"turn/end"'

PlainContent = Union[bytes, mmap.mmap]


def read_plain_log(fd: int) -> tuple[PlainContent, bytes]:
    """The plain log open at `fd` (at offset 0) as `(content, rest)`, which joined are its bytes:
    a mapping ending with a settled `turn/end` line and the bytes after it when the log is large
    and has one in its last `TAIL_READ` bytes, else the whole log read and `b""`."""
    size = os.fstat(fd).st_size
    if size >= MAP_FROM and hasattr(mmap, "PROT_READ"):
        base = size - TAIL_READ
        end = os.pread(fd, TAIL_READ, base)  # (a writer may have cut the tail since `fstat`: then shorter)
        settled = _after_settled_turn_end(end)
        if settled is not None:
            try:
                mapped = map_start(fd, base + settled)
            except OSError:  # a file system that cannot map files: read as before
                return read_all(fd), b""
            return mapped, end[settled:]
    return read_all(fd), b""


def _after_settled_turn_end(end: bytes) -> int | None:
    """Where in `end` (a log's last bytes) its last `turn/end` line followed by another complete
    line ends, just after its newline; `None` when no such line lies wholly inside `end`."""
    last_newline = end.rfind(b"\n")
    limit = end.rfind(b"\n", 0, max(last_newline, 0))  # ends the line before the last complete one
    while limit > 0:
        found = end.rfind(_TURN_END, 0, limit)
        start = end.rfind(b"\n", 0, max(found, 0)) + 1
        if start == 0:  # none, or a line that may begin before `end`
            return None
        stop = end.find(b"\n", found)
        if ends_turn(end[start:stop]):
            return stop + 1
        limit = start - 1
    return None


def ends_turn(line: bytes) -> bool | None:
    """Whether `line` is a `turn/end` record (`None`: it is not JSON), as the crash-tail rule reads it."""
    try:
        record = from_json(line)
    except Exception:
        return None
    return isinstance(record, Mapping) and record.get("type") == "turn/end"


def crash_tail_start(lines: Sequence[bytes]) -> int:
    """Where the crash tail of `lines` starts: the first unparsable line after the last `turn/end`
    (`len(lines)`: none). Only the lines after the last `turn/end` are parsed (walking back from
    the end); an unparsable line before it is corruption, which decoding reports with its line."""
    first_bad = len(lines)
    for index in range(len(lines) - 1, -1, -1):
        verdict = ends_turn(lines[index])
        if verdict is None:
            first_bad = index
        elif verdict:
            break
    return first_bad
