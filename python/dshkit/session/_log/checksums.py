"""Checksummed records: the one place a stored record's CRC-32C is computed and checked.

Since format version 2 every stored record (the header and each event) carries the CRC-32C of
its JSON text exactly as `dshkit.session._log.event_codec` wrote it, as LevelDB/RocksDB log records and
Kafka batches do. A store with columns keeps it beside the text (SQLite: column `crc`, an
integer); the JSON Lines store embeds it as the line's last key, fixed width, so every line stays
one JSON object and checking it takes byte slicing only, never re-serialisation:

    record  {"seq":4,"time":1764520000000,"type":"turn/start","data":{"turn":1}}
    line    {"seq":4,"time":1764520000000,"type":"turn/start","data":{"turn":1},"crc":"1a2b3c4d"}

The line is the record with its closing brace replaced by the 18-byte suffix `,"crc":"%08x"}`
(lower-case hex of the record's checksum). A line whose suffix reads `,"crc":"--void--"}` is an
append that failed and could not be cut back (`void_suffix_at`): only a last line may be one.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dshkit._core import Records, crc32c, split_records, verified_joined, verified_rows

from dshkit.session._log.event_codec import decode_header
from dshkit.session.errors import SessionCorruptError, checksum_mismatch

CHECKSUM_SINCE_VERSION = 2
"""The first format version whose records carry checksums (version 1 logs still open)."""

SUFFIX_LENGTH = 18  # len(',"crc":"') + 8 hex digits + len('"}')
VOID_SUFFIX = b',"crc":"--void--"}'


def checksum(record: str | bytes) -> int:
    """The CRC-32C of a record's text (of its UTF-8 bytes for a `str`): what every store keeps."""
    return crc32c(record)


def check(record: str | bytes, stored: object, where: str) -> None:
    """`SessionCorruptError` naming `where` unless `stored` is the checksum of `record`."""
    if type(stored) is not int or crc32c(record) != stored:
        raise checksum_mismatch(where)


def verified(rows: Iterable[tuple[Any, Any]], describe: Callable[[int], str]) -> list[Any]:
    """The record texts of `(text, stored checksum)` rows, each checked; for stores with a column.

    `describe(index)` names where row `index` lives; the first bad row is a `SessionCorruptError`.
    """
    records, bad = verified_rows(rows)
    if records is None:
        raise checksum_mismatch(describe(bad))
    return records


def verified_join(bodies: bytes | Sequence[bytes | memoryview], crcs: str | Sequence[str]) -> Records | None:
    """The records of a table read in one query, or `None` if a stored checksum is not an
    integer or records and checksums do not pair up (its caller then checks row by row with
    `verified`, which names the row): `bodies`, every record's text joined by newlines (or a list
    of such parts, read as if joined by newlines: no copy of them all); `crcs`, each row's stored
    checksum, comma-separated (or such a list per part: each part is then paired with its own,
    and a large read's parts on two threads). Each checksum is compared where its record is
    first read (`decode_records` on the thread ahead of it, `Records.check` otherwise), whose
    error names the record by the store's `describe`."""
    return verified_joined(bodies, crcs, defer_checks=True)[0]


def seal_line(record: str) -> bytes:
    """The JSON Lines form of a record: its checksum as the last key, then a newline."""
    data = record.encode()
    if not data.endswith(b"}"):
        raise ValueError("a sealed record must be a JSON object")
    return b'%s,"crc":"%08x"}\n' % (data[:-1], crc32c(data))


def unseal_line(line: bytes) -> bytes | None:
    """The record text of a line (without its newline), `None` if its checksum does not match."""
    record = line[:-SUFFIX_LENGTH] + b"}"
    if line[-SUFFIX_LENGTH:] != b',"crc":"%08x"}' % crc32c(record) or len(line) <= SUFFIX_LENGTH:
        return None
    return record


def unseal_body(content: bytes | mmap.mmap, start: int, end: int, describe: Callable[[int], str]) -> Records:
    """The records of the complete lines in `content[start:end]`, their checksums checked where
    they are first read (`decode_records` checks them on the thread that sorts records ahead of
    it; `Records.check` checks what is left): a line that is not sealed at all is a
    `SessionCorruptError` here (`describe(index)` names where line `index` lives)."""
    records, bad = split_records(content, start, end, True, defer_checks=True)
    if records is None:
        raise checksum_mismatch(describe(bad))
    return records


def void_suffix_at(line_length: int) -> int:
    """Where, in a line of `line_length` bytes with its newline, `VOID_SUFFIX` is written to void it."""
    return max(0, line_length - 1 - SUFFIX_LENGTH)


def check_header(record: str | bytes, sealed: bool, where: str) -> None:
    """`SessionCorruptError` unless `record` is a dshkit header whose version matches `sealed`.

    `sealed`: whether the store found checksums on the log's records (version 2 on), so a
    version 2 header never vouches for unchecked records, nor version 1 for checked ones.
    """
    version = decode_header(record, where)["version"]
    if sealed != (version >= CHECKSUM_SINCE_VERSION):
        raise SessionCorruptError(f"{where}: a version {version} header on records {'with' if sealed else 'without'} checksums")
