"""`EventLog`: a session's events in memory, the recent ones as `Event` objects, older ones compact.

An agent's log holds about four events per message (chunks, step boundaries, tool calls), and as
`Event` tuples with frozen data they cost more memory than the messages themselves. So only the
last `HOT`..`2 * HOT` events stay `Event` objects; older ones are moved, a batch at a time, into
columns: their type (a shared `str`), time, the `Message` a message event carries (the very object
on the surface, never copied), and the rest of the event as compact JSON bytes in one buffer
(written natively, `rust/log/event_columns.rs`; an event whose data JSON cannot hold stays whole),
each batch's JSON kept zlib-compressed (a "pack", about an eighth of its size: one agent's events
repeat their keys and values; the pack last read stays inflated, so reading in order inflates each
pack once). An event read from the columns is rebuilt on access: equal to the appended one,
carrying the same `Message`, but a new `Event` object each time. Opening a log stores the records
it read straight into the columns (uncompressed, in `_blob`): the JSON of an event without a
message is the stored record itself, that of a message event the record with `null` in place of
its message (held once, as the `Message`).
"""

from __future__ import annotations

import time
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, overload

from dshkit import Message, freeze, freeze_message, from_json
from dshkit._core import compact_events, new_event

from dshkit.session.events import INBOX_SPLICED, SURFACE_APPEND, USER_MESSAGE, Event

HOT = 64
"""How many of the latest events stay `Event` objects at least (up to twice as many do)."""

_DATA = 0x44  # b"D": the JSON of the event's data
_RECORD = 0x52  # b"R": the stored JSON record of the whole event
_MESSAGE = 0x4D  # b"M": a message event: JSON [envelope without the message or null, source seqs]
_USER = 0x55  # b"U": a user/message appended at the end of the surface, citing nothing
_KEPT = 0x45  # b"E": an event whose data cannot be written as JSON, kept whole in `_kept`
_MESSAGE_RECORD = 0x53  # b"S": the stored JSON record of a message event, its message kept aside (null or whole in the text)
_new_event = new_event  # tuple.__new__, the event untracked by the cyclic GC (rust/log/event_record.rs)


def now_ms() -> int:
    """The time an event made now gets: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


class EventLog(Sequence[Event]):
    """The events of one session, in seq order: `append`, `len`, index, slice, iterate."""

    __slots__ = (
        "_hot", "_cold", "_types", "_times", "_messages", "_ops", "_blob", "_ends", "_kept", "_packs", "_pack_starts", "_unpacked",
        "header_seq",
    )

    def __init__(self) -> None:
        self._hot: list[Event] = []  # events cold..len-1
        self._cold = 0  # how many events live in the columns
        self._types: list[str] = []
        self._times = array("q")
        self._messages: list[Message | None] = []
        self._ops: dict[int, Any] = {}  # seq -> surface_op of a cold message event that is no "append"
        self._blob = bytearray()
        self._ends = array("Q")  # end offset of each cold event's compact form, in _blob or in its pack
        self._packs: list[bytes] = []  # the compact forms of each batch `_compact` moved, zlib-compressed
        self._pack_starts = array("q")  # the first seq of each pack; events before the first are in _blob
        self._unpacked: tuple[int, int, bytes] = (0, 0, b"")  # the seqs of the pack last read, and it inflated
        self._kept: dict[int, Event] = {}  # seq -> a cold event whose data cannot be written as JSON
        self.header_seq: int | None = None  # seq of the latest request/header event (kept by the session)

    def __len__(self) -> int:
        return self._cold + len(self._hot)

    def append(self, event: Event) -> None:
        """Add the next event (its seq is `len(self)`)."""
        hot = self._hot
        hot.append(event)
        if len(hot) >= 2 * HOT:
            self._compact(HOT)

    def add_record(self, event: Event, record: str | bytes) -> None:
        """Add the next event as the stored JSON `record` it was decoded from (opening a log).

        Kept as the record itself (and, for a message event, its `Message` beside it), so opening
        neither re-encodes events nor moves them twice; events appended later stay hot.
        """
        if self._hot:
            self.append(event)
            return
        message = event.message
        self._types.append(event.type)
        self._times.append(event.time)
        self._messages.append(message)
        blob = self._blob
        blob.append(_RECORD if message is None else _MESSAGE_RECORD)
        blob += record.encode() if isinstance(record, str) else record
        self._ends.append(len(blob))
        self._cold += 1

    def adopt(self, types: list[Any], times: bytes, messages: list[Message | None], blob: bytearray, ends: bytes) -> None:
        """Take the columns of a whole stored log, decoded natively (`dshkit._core.decode_records`).

        Only into an empty log. The events stay hidden until `reveal` (so a log being loaded has
        exactly the events before the one being checked); entries left `None` are filled by
        `settle`.
        """
        if len(self):
            raise ValueError("adopt needs an empty EventLog")
        self._types, self._messages, self._blob = types, messages, blob
        self._times.frombytes(times)
        self._ends.frombytes(ends)

    def reveal(self, count: int) -> None:
        """Make the first `count` adopted events part of the log."""
        self._cold = count

    def settle(self, seq: int, event: Event) -> None:
        """Fill in adopted event `seq`, which the Python decoder decoded (`event`) from its record."""
        self._types[seq] = event.type
        self._times[seq] = event.time
        message = event.message
        self._messages[seq] = message
        at = self._ends[seq - 1] if seq else 0
        # A whole record that holds a message event's keys is read as one; an append the native
        # pass vouched for (and the fold then stopped at) is already in its own form (`M`, `U`).
        if self._blob[at] == _RECORD and (message is not None or event.surface_op is not None or event.source_event_seqs):
            self._blob[at] = _MESSAGE_RECORD

    def keep(self, seq: int, event: Event) -> None:
        """Fill in adopted event `seq` with `event`, kept whole (kind `E`): for a format whose
        records are not its events' JSON (the original's, `dshkit.session.dsh.codec`)."""
        self._blob[self._ends[seq - 1] if seq else 0] = _KEPT
        self._types[seq] = event.type
        self._times[seq] = event.time
        self._messages[seq] = event.message
        self._kept[seq] = event

    def _compact(self, count: int) -> None:
        """Move the oldest `count` hot events into the columns (`rust/log/event_columns.rs` writes them)."""
        hot = self._hot
        types, times, messages, blob, ends, ops, kept = compact_events(hot, count, 0)
        del hot[:count]
        self._types += types
        self._times.frombytes(times)
        self._messages += messages
        # Level 1: several times faster than the default, and within a few % of its size here.
        self._packs.append(zlib.compress(blob, 1))
        self._pack_starts.append(self._cold)
        self._ends.frombytes(ends)
        if ops:
            self._ops.update(ops)
        if kept:
            self._kept.update(kept)
        self._cold += count

    def _compact_form(self, seq: int) -> tuple[bytes | bytearray, int, int]:
        """Where cold event `seq`'s compact form is: a buffer, its start and end offsets in it."""
        first, end, text = self._unpacked
        if not first <= seq < end:
            starts = self._pack_starts
            if not starts or seq < starts[0]:
                return self._blob, (self._ends[seq - 1] if seq else 0), self._ends[seq]
            pack = bisect_right(starts, seq) - 1
            first = starts[pack]
            end = starts[pack + 1] if pack + 1 < len(starts) else self._cold
            text = zlib.decompress(self._packs[pack])
            self._unpacked = (first, end, text)
        return text, (self._ends[seq - 1] if seq > first else 0), self._ends[seq]

    def _decode(self, seq: int) -> Event:
        """Rebuild cold event `seq`."""
        buffer, start, end = self._compact_form(seq)
        kind = buffer[start]
        event_type = self._types[seq]
        time = self._times[seq]
        if kind == _USER:
            return _new_event(Event, (event_type, seq, time, self._messages[seq], self._ops.get(seq, SURFACE_APPEND), ()))
        if kind == _KEPT:
            return self._kept[seq]
        text = bytes(buffer[start + 1 : end])
        if kind == _DATA or kind == _RECORD:
            data = from_json(text) if kind == _DATA else from_json(text)["data"]
            if event_type == INBOX_SPLICED and data.get("inserted"):
                # JSON holds the inserted messages as mappings: they come back as the Messages they were
                data = data | {"inserted": tuple(map(freeze_message, data["inserted"]))}
            return _new_event(Event, (event_type, seq, time, data, None, ()))
        message = self._messages[seq]
        if kind == _MESSAGE_RECORD:
            record = from_json(text)
            if message is None:  # a plain event stored with a message event's keys (a log opened read-only)
                extra = (record.get("surface_op"), record.get("source_event_seqs", ()))
                return _new_event(Event, (event_type, seq, time, record["data"], *extra))
            data = message if event_type == USER_MESSAGE else record["data"] | {"message": message}
            return _new_event(Event, (event_type, seq, time, data, record["surface_op"], record["source_event_seqs"]))
        envelope, source_seqs = from_json(text)
        if envelope is None:
            data = message
        else:
            data = freeze({key: (message if key == "message" else value) for key, value in envelope.items()})
        return _new_event(Event, (event_type, seq, time, data, self._ops.get(seq, SURFACE_APPEND), source_seqs))

    def type_at(self, seq: int) -> str:
        """The type of event `seq`, without rebuilding it."""
        cold = self._cold
        return self._types[seq] if seq < cold else self._hot[seq - cold].type

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        if isinstance(index, slice):
            return [self[seq] for seq in range(*index.indices(len(self)))]
        cold = self._cold
        if index < 0:
            index += cold + len(self._hot)
        if index >= cold:
            return self._hot[index - cold]
        if index < 0:
            raise IndexError("event index out of range")
        return self._decode(index)

    def __iter__(self) -> Iterator[Event]:
        seq = 0
        while seq < self._cold:
            yield self._decode(seq)
            seq += 1
        # The hot list may have been compacted meanwhile: go on by seq.
        while seq < len(self):
            yield self[seq]
            seq += 1


__all__ = ["HOT", "EventLog", "now_ms"]
