"""The original harness's log records: its header, its event lines, and dshkit `Event` values.

Reading folds the surface the way the original does: a message event is on the surface only if it
carries `surfaceOp`, and a replace names the **seqs** of the first and last surface node it
shadows. dshkit's surface ops are positions with an exclusive end, so a replace is translated
while folding (and back again when writing, from the surface as it was before the event).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from dshkit import FrozenDict, from_json, thaw, to_json
from dshkit._core import decode_original_records
from dshkit.session._log.event_codec import StoredRecords
from dshkit.session.errors import SessionCorruptError
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import MESSAGE_EVENT_TYPES, REQUEST_HEADER, USER_MESSAGE, Event, replace_op
from dshkit.session._surface import Surface, is_model_visible
from dshkit.session.dsh.chunk_rows import ROW_TYPES, expand_row
from dshkit.session.dsh.detect import is_original_header
from dshkit.session.dsh.vocabulary import (
    IGNORABLE_TYPES,
    ORIGINAL_EVENT_TYPES,
    VERBATIM_TYPES,
    data_to_dshkit,
    data_to_original,
)

FORMAT_VERSION = 0
_RETIRED_HEADER_KEYS = ("sandboxMode", "approvalPolicy")


def decode_header(text: str | bytes, where: str) -> FrozenDict[Any]:
    """Parse and check the original's header line; `SessionCorruptError` naming what is wrong."""
    try:
        header = from_json(text)
    except Exception:
        header = None
    if not is_original_header(header):
        raise SessionCorruptError(f"{where}: not an original-harness session log (no session header)")
    if header.get("version") != FORMAT_VERSION:
        raise SessionCorruptError(f"{where}: original log format version {header.get('version')!r} is not supported (version 0 is)")
    for key in _RETIRED_HEADER_KEYS:
        if key in header:
            raise SessionCorruptError(f"{where}: session header carries the retired field {key!r}")
    created, depth = header.get("createdAt"), header.get("delegationDepth")
    if not isinstance(header.get("id"), str) or type(created) is not int or created < 0:
        raise SessionCorruptError(f"{where}: session header needs a str 'id' and an int 'createdAt' >= 0")
    if type(depth) is not int or depth < 0:
        raise SessionCorruptError(f"{where}: session header needs an int 'delegationDepth' >= 0")
    return cast("FrozenDict[Any]", header)


def new_header(created_at: int, *, session_id: str | None = None, cwd: str | None = None) -> dict[str, Any]:
    """The header of a new original-format log (a UUID id, like the original mints)."""
    header: dict[str, Any] = {"type": "session", "version": FORMAT_VERSION, "id": session_id or str(uuid.uuid4())}
    header["createdAt"] = created_at
    if cwd is not None:
        header["cwd"] = cwd
    header["delegationDepth"] = 0
    return header


class _OriginalNodes:
    """The original's surface node list (seqs), which also holds messages dshkit hides."""

    __slots__ = ("seqs", "hidden")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.hidden: set[int] = set()

    def position(self, index: int) -> int:
        if not self.hidden:
            return index
        return index - sum(1 for seq in self.seqs[:index] if seq in self.hidden)

    def replace_positions(self, start_seq: Any, end_seq: Any) -> tuple[int, int, int, int]:
        try:
            start, end = self.seqs.index(start_seq), self.seqs.index(end_seq)
        except ValueError:
            raise ValueError(f"replace range {start_seq}..{end_seq} names a seq that is not on the surface") from None
        if start > end:
            raise ValueError(f"replace start seq {start_seq} comes after end seq {end_seq} on the surface")
        return start, end, self.position(start), self.position(end + 1)


def decode_records(
    records: StoredRecords,
    describe: Callable[[int], str],
    fold: Callable[[Event], object],
    *,
    into: EventLog | None = None,
    fold_appends: Callable[[list[int], list[Any], list[Any], int], int] | None = None,
) -> EventLog:
    """The original's stored lines as dshkit events (packed rows expanded), `fold` called on the
    message events on its surface and on unknown types, in seq order.

    The hot path of opening an original log: one native pass (`dshkit._core.decode_original_records`)
    reads the records whose events are plain (boundaries, chunks, packed rows, the original's
    own types presented ignorable, `tool/call`, most `turn/end`s) straight into the log's
    columns, and the message appends it vouches for into `Message`s, each run of them folded by
    `fold_appends` (`Surface.fold_appends`; without one, `fold` on each); every other record is
    translated here (`_translate`), as `decode_records_in_python` does. A log the native pass is
    not sure of as a whole (a packed row it does not read) takes `decode_records_in_python`.
    """
    if into is None or not len(into):
        columns = decode_original_records(records, VERBATIM_TYPES, IGNORABLE_TYPES, ROW_TYPES)
        if columns is not None:
            events = EventLog() if into is None else into
            return _decode_columns(columns, _Reader(records, describe, fold, events), fold_appends)
    return decode_records_in_python(records, describe, fold, into=into)


class _Reader:
    """What `_decode_columns` reads the records it is left with by: the records, their names,
    the fold, the log being filled and the original's surface nodes."""

    __slots__ = ("records", "describe", "fold", "events", "nodes")

    def __init__(self, records: StoredRecords, describe: Callable[[int], str], fold: Callable[[Event], object], events: EventLog) -> None:
        self.records, self.describe, self.fold, self.events = records, describe, fold, events
        self.nodes = _OriginalNodes()

    def translate(self, index: int, seq: int) -> None:
        """Record `index` (event `seq`) translated in Python, folded with the events before it."""
        events = self.events
        events.reveal(seq)
        record: Any = None
        try:
            record = from_json(self.records[index])
            event = _translate(record, record["type"], seq, self.nodes, events, self.fold)
        except SessionCorruptError:
            raise
        except Exception as error:
            raise _corrupt(self.describe(index), record, error) from None
        events.keep(seq, event)

    def appended(self, seqs: list[int], hidden: list[int]) -> None:
        """Appends folded natively, noted on the original's surface nodes (`hidden`: the seqs of
        its run without model-visible content, those among `seqs` noted as such)."""
        self.nodes.seqs += seqs
        if hidden and seqs:
            self.nodes.hidden.update(seq for seq in hidden if seqs[0] <= seq <= seqs[-1])


def _decode_columns(columns: Any, reader: _Reader, fold_appends: Callable[[list[int], list[Any], list[Any], int], int] | None) -> EventLog:
    """`decode_records` from the native pass's columns: the records it left translated in order,
    its runs of appends folded. While an event is folded, the log holds exactly the events before it."""
    types, times, messages, blob, ends, pending = columns
    events = reader.events
    events.adopt(types, times, messages, blob, ends)
    for item in pending:
        if len(item) == 2:
            reader.translate(*item)
            continue
        seqs, tags, indexes, hidden = item
        if fold_appends is None:
            for seq in seqs:
                events.reveal(seq + 1)
                event = events[seq]
                events.reveal(seq)
                reader.fold(event)
            reader.appended(seqs, hidden)
            continue
        done = start = 0
        while start <= len(seqs):
            done = fold_appends(seqs, tags, messages, start)
            reader.appended(seqs[start:done], hidden)
            if done < len(seqs):  # a rule it breaks: the full way names it
                reader.translate(indexes[done], seqs[done])
            start = done + 1
    events.reveal(len(types))
    return events


def decode_records_in_python(
    records: StoredRecords,
    describe: Callable[[int], str],
    fold: Callable[[Event], object],
    *,
    into: EventLog | None = None,
) -> EventLog:
    """`decode_records` one record at a time in Python: one native parse per line, data mapped
    only where the vocabularies differ (the reference the native pass is held to)."""
    make = tuple.__new__
    event_class = Event
    events = EventLog() if into is None else into
    add = events.append
    nodes = _OriginalNodes()
    next_seq = 0
    for index in range(len(records)):
        text = records[index]
        record: Any = None
        try:
            record = from_json(text)
            event_type = record["type"]
            if event_type in ROW_TYPES:
                seq0 = record.get("seq0")
                if seq0 != next_seq or type(seq0) is not int:  # by type too: true == 1, 1.0 == 1
                    raise ValueError(f"seq0 {seq0!r} where {next_seq} was expected (seqs are contiguous from 0)")
                for seq, time, data in expand_row(record):
                    add(make(event_class, ("assistant/chunk", seq, time, data, None, ())))
                next_seq = len(events)
                continue
            add(_translate(record, event_type, next_seq, nodes, events, fold))
            next_seq += 1
        except SessionCorruptError:
            raise
        except Exception as error:
            raise _corrupt(describe(index), record, error) from None
    return events


def _translate(record: Any, event_type: Any, seq: int, nodes: _OriginalNodes, events: EventLog, fold: Callable[[Event], object]) -> Event:
    """The dshkit event of a record that is one event (`seq`: the one expected), folded when the
    original's rules say so (`events` holds the events before it)."""
    stored_seq, time, raw = record["seq"], record["time"], record["data"]
    if stored_seq != seq or type(stored_seq) is not int:  # by type too: true == 1, 1.0 == 1
        raise ValueError(f"seq {stored_seq!r} where {seq} was expected (seqs are contiguous from 0)")
    if type(time) is not int:
        raise ValueError("'time' must be an int")
    if event_type in VERBATIM_TYPES:
        return tuple.__new__(Event, (event_type, seq, time, raw, None, ()))
    if event_type not in ORIGINAL_EVENT_TYPES:
        event = _unknown_event(record, event_type, seq, time, raw)
        fold(event)  # an unknown type not marked ignorable blocks derivation
        return event
    if event_type not in MESSAGE_EVENT_TYPES:
        if event_type == REQUEST_HEADER:
            events.header_seq = seq
        return tuple.__new__(Event, (event_type, seq, time, data_to_dshkit(event_type, raw), None, ()))
    event = _message_event(nodes, record, event_type, seq, time, raw)
    if event.surface_op is not None:  # one off the original's surface is logged, never folded
        fold(event)
    return event


def _corrupt(where: str, record: Any, error: Exception) -> SessionCorruptError:
    reason = "not valid JSON" if record is None else f"bad {_type_of(record)} record: {error}"
    return SessionCorruptError(f"{where}: {reason}")


def _unknown_event(record: Any, event_type: Any, seq: int, time: int, raw: Any) -> Event:
    """An event of a type neither harness knows, kept as read (marked ignorable when the record says so)."""
    if type(event_type) is not str:
        raise ValueError("'type' must be a str")
    if record.get("ignorable") is True and type(raw) is FrozenDict:
        raw = raw | {"ignorable": True}
    return tuple.__new__(Event, (event_type, seq, time, raw, None, ()))


def _message_event(nodes: _OriginalNodes, record: Any, event_type: str, seq: int, time: int, raw: Any) -> Event:
    """A message event, its surface op presented in dshkit's terms (None when off the original's surface)."""
    data = data_to_dshkit(event_type, raw)
    sources = record.get("sourceEventSeqs", ())
    if type(sources) is not tuple:
        raise ValueError("'sourceEventSeqs' must be a list")
    op = record.get("surfaceOp")
    if op is not None:
        message = data if event_type == USER_MESSAGE else data["message"]
        op = _presented_op(nodes, message, seq, op)
    return tuple.__new__(Event, (event_type, seq, time, data, op, sources))


def _type_of(record: Any) -> str:
    return record.get("type", "untyped") if isinstance(record, Mapping) else "non-object"


def _presented_op(nodes: _OriginalNodes, message: Any, seq: int, op: Any) -> Any:
    """dshkit's surface op for the original's `surfaceOp`, tracking the original's node list."""
    if op == "append":
        nodes.seqs.append(seq)
        if message.role == "assistant" and not is_model_visible(message):
            nodes.hidden.add(seq)
        return "append"
    if not isinstance(op, Mapping) or op.get("op") != "replace" or set(op) != {"op", "start", "end"}:
        raise ValueError(f"surfaceOp must be 'append' or {{op: 'replace', start, end}}, not {thaw(op)!r}")
    start, end, start_position, end_position = nodes.replace_positions(op["start"], op["end"])
    nodes.seqs[start : end + 1] = [seq]
    if not is_model_visible(message):
        nodes.hidden.add(seq)
    if start_position == end_position:
        raise ValueError(f"replace range {op['start']}..{op['end']} covers only messages without model-visible content")
    return replace_op(start_position, end_position)


def encode_record(event: Event, surface: Surface) -> dict[str, Any]:
    """The original's record for a dshkit event; `surface` is the fold *before* the event."""
    record: dict[str, Any] = {"type": event.type, "seq": event.seq, "time": event.time}
    event_type, data = event.type, event.data
    if event_type not in ORIGINAL_EVENT_TYPES and isinstance(data, Mapping) and data.get("ignorable") is True:
        record["data"] = {key: value for key, value in data.items() if key != "ignorable"}
        record["ignorable"] = True
        return record
    record["data"] = data_to_original(event_type, data)
    if event_type in MESSAGE_EVENT_TYPES:
        # The original always cites an assistant message's chunk seqs (possibly none) and omits
        # an empty list everywhere else, so the list is written exactly when it said so.
        if event.source_event_seqs or event_type == "assistant/message":
            record["sourceEventSeqs"] = event.source_event_seqs
        op = event.surface_op
        if op is not None and op != "append":
            start, end = op["start"], op["end"]
            op = {"op": "replace", "start": surface.event_seqs(start, start + 1)[0], "end": surface.event_seqs(end - 1, end)[0]}
        if op is not None:
            record["surfaceOp"] = op
    return record


def encode_event(event: Event, surface: Surface) -> str:
    """The original's JSON line (no newline) for a dshkit event about to be appended."""
    return to_json(encode_record(event, surface))
