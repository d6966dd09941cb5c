"""Reading a JSON Lines log at open: its complete lines, mapped when the log is large, and its tail.

A large log is mapped read-only (`mmap`, its pages faulted in by one call where Linux offers
`MAP_POPULATE`) rather than read into a new `bytes`: its records become spans of the file's own
cached pages, with no copy of the whole log and no fresh memory to fault in page by page (both
were most of the 1-4 ms a 10,000-message log's read took on a VM, issue 37).

A mapping must never be touched past the end of the file: a page wholly past it raises SIGBUS.
The only bytes a dshkit writer ever cuts from a log are after its last complete line (a torn
tail) or that last line itself when it is void (`VOID_SUFFIX`), and a writer cutting them may run
while a reader opens. So the mapping ends at the last newline, and the last complete line and
the tail are read from a copy taken with `pread`: the reader inspects them there, and reads the
last line through the mapping only once it knows it is a record, which no writer cuts. A log
whose last line is longer than that copy is read whole, as a small log is.
"""

from __future__ import annotations

import mmap
import os
from typing import NamedTuple, Union

MAP_FROM = 1 << 20
"""Logs smaller than this are read: a mapping costs more system calls than it saves below it."""

TAIL_READ = 1 << 16
"""How much of a mapped log's end is read with `pread`: its last complete line and torn tail."""

_POPULATE = getattr(mmap, "MAP_POPULATE", 0)

LogContent = Union[bytes, mmap.mmap]


class LogBytes(NamedTuple):
    """A log as read at open (offsets into the file)."""

    content: LogContent
    """The file's bytes, at least up to `keep` (`bytes`, or a read-only mapping of exactly that)."""
    keep: int
    """Where the last complete line ends (just after its newline; 0 if the file has none)."""
    last_start: int
    """Where the last complete line starts (0 if there is at most one line)."""
    last_line: bytes
    """The last complete line, without its newline."""
    tail: bytes
    """What follows the last newline: empty, or an append that never completed."""


def read_log(fd: int) -> LogBytes:
    """The log open at `fd` (at offset 0), as `LogBytes`: mapped when it is large, else read."""
    size = os.fstat(fd).st_size
    if size >= MAP_FROM and hasattr(mmap, "PROT_READ"):
        end = os.pread(fd, TAIL_READ, size - TAIL_READ)
        last_newline = end.rfind(b"\n")
        line_start = end.rfind(b"\n", 0, max(last_newline, 0)) + 1
        if line_start > 0:  # the last complete line lies wholly inside `end`
            base = size - TAIL_READ  # (a writer may have cut the tail since `fstat`: `end` is then shorter)
            mapped = map_start(fd, base + last_newline + 1)
            return LogBytes(mapped, base + last_newline + 1, base + line_start, end[line_start:last_newline], end[last_newline + 1 :])
    content = read_all(fd)
    keep = content.rfind(b"\n") + 1
    last_start = content.rfind(b"\n", 0, max(keep - 1, 0)) + 1
    return LogBytes(content, keep, last_start, content[last_start : max(keep - 1, 0)], content[keep:])


def map_start(fd: int, length: int) -> mmap.mmap:
    """The first `length` bytes of the file open at `fd`, mapped read-only, their pages faulted in by
    one call where Linux offers `MAP_POPULATE`; the caller keeps every byte it reads inside a part
    no writer cuts."""
    return mmap.mmap(fd, length, flags=mmap.MAP_SHARED | _POPULATE, prot=mmap.PROT_READ)


def read_all(fd: int) -> bytes:
    """Everything from `fd`'s offset to the end of the file."""
    # One read of the whole file (plus one byte, to see it end) saves copying it again to join.
    first = os.read(fd, os.fstat(fd).st_size + 1)
    chunks = [first]
    while chunks[-1]:
        chunks.append(os.read(fd, 1 << 20))
    return first if len(chunks) == 2 else b"".join(chunks)
