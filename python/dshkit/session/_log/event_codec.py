"""The durable encoding of events: one compact JSON object per event, shared by every store.

    {"seq": 4, "time": 1764520000000, "type": "assistant/message",
     "data": {"turn": 1, "step": 1, "message": {"id": ..., "role": ..., "content": [...], "source": {...}}},
     "surface_op": "append", "source_event_seqs": [3]}

`surface_op` and `source_event_seqs` are written for the three message-carrying types only. A
`user/message` event's data is the message mapping itself; `assistant/message` and `tool/result`
hold it under `"message"` beside the envelope facts; `agent/inbox/spliced` holds a list of them
under `"inserted"`. Messages are written as their `{"id", "role", "content", "source"}` mapping
and come back as `Message` values with the same ids. Decoding is the hot path of opening a log:
it parses each record straight into frozen values, rebuilds each `Message` with its stored id,
and hands each event to the caller's fold as it goes (so a record the fold refuses is reported at
its own line), with no per-event validation beyond what keeps the fold sound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Union

from dshkit import FrozenDict, freeze_message, from_json, to_json
from dshkit._core import Records, decode_records

from dshkit.session.errors import SessionCorruptError, checksum_mismatch
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import (
    ASSISTANT_MESSAGE,
    INBOX_SPLICED,
    MESSAGE_EVENT_TYPES,
    REQUEST_HEADER,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
)

# What a store's `load` hands back: the native scan's `Records`, or the records one by one.
StoredRecords = Union[Records, Sequence[Union[str, bytes]]]

HEADER_TYPE = "session"
FORMAT_VERSION = 2
"""The version `Session.create` writes: 2 adds a checksum to every record (`dshkit.session._log.checksums`)."""
READABLE_VERSIONS = (1, 2)


def encode_event(event: Event) -> str:
    """The JSON text of one event (no newline)."""
    record: dict[str, Any] = {"seq": event.seq, "time": event.time, "type": event.type, "data": event.data}
    if event.surface_op is not None:
        record["surface_op"] = event.surface_op
        record["source_event_seqs"] = event.source_event_seqs
    return to_json(record)


def encode_header(
    session_id: str, created_at: int, *, parent_id: str | None = None, seed_length: int = 0, extra: dict[str, Any] | None = None
) -> str:
    """The JSON text of a log's header record (a fork also names its parent and seed length; a
    subagent's log adds its delegation fields in `extra`)."""
    header: dict[str, Any] = {"type": HEADER_TYPE, "version": FORMAT_VERSION, "id": session_id, "created_at": created_at}
    if parent_id is not None:
        header["parent_id"] = parent_id
        header["seed_length"] = seed_length
    if extra:
        taken = sorted(set(extra) & set(header))
        if taken:
            raise ValueError(f"a log header's own fields cannot be given again: {taken}")
        header.update(extra)
    return to_json(header)


def decode_header(text: str | bytes, where: str) -> FrozenDict[Any]:
    """Parse and check a header record; `SessionCorruptError` if it is not a dshkit log header."""
    try:
        header = from_json(text)
    except Exception:  # the parser's own error type is an implementation detail
        header = None
    if not isinstance(header, FrozenDict) or header.get("type") != HEADER_TYPE:
        raise SessionCorruptError(f"{where}: not a dshkit session log (no session header)")
    version = header.get("version")
    if type(version) is not int:
        raise SessionCorruptError(f"{where}: session header has no int 'version'")
    if version not in READABLE_VERSIONS:
        raise SessionCorruptError(
            f"{where}: log format version {version} is not supported (this dshkit reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))})"
        )
    if not isinstance(header.get("id"), str) or type(header.get("created_at")) is not int:
        raise SessionCorruptError(f"{where}: session header needs a str 'id' and an int 'created_at'")
    return header


def _reason(record: object, seq: int) -> str:
    """Why a record failed to decode: a precise message for the slow (error) path."""
    if not isinstance(record, FrozenDict):
        return "not a JSON object"
    for key, kind in (("seq", int), ("time", int), ("type", str)):
        if type(record.get(key)) is not kind:
            return f"{key!r} must be {'an int' if kind is int else 'a str'}"
    if record["seq"] != seq:
        return f"seq {record['seq']} where {seq} was expected (seqs are contiguous from 0)"
    if "data" not in record:
        return "no 'data'"
    if record["type"] in MESSAGE_EVENT_TYPES:
        if "surface_op" not in record or "source_event_seqs" not in record:
            return "a message event needs 'surface_op' and 'source_event_seqs'"
        if type(record["source_event_seqs"]) is not tuple:
            return "'source_event_seqs' must be a list"
    return ""


def decode_record(text: str | bytes, seq: int, describe: Callable[[int], str]) -> tuple[Event, bool]:
    """The event stored as record `seq`, and whether it may be kept as that record (see `decode_events`).

    A record that is no event (or not event `seq`) is a `SessionCorruptError` naming `describe(seq)`.
    """
    record: Any = None
    try:
        record = from_json(text)
        event_type = record["type"]
        time = record["time"]
        data = record["data"]
        stored_seq = record["seq"]
        # By type too: 4.0 and true equal 4 and 1, and no writer of this format writes them.
        if stored_seq != seq or type(stored_seq) is not int or type(time) is not int:
            raise ValueError
        if event_type == USER_MESSAGE:
            data = freeze_message(data)
        elif event_type == ASSISTANT_MESSAGE or event_type == TOOL_RESULT:
            data = data | {"message": freeze_message(data["message"])}
        else:
            if type(event_type) is not str:
                raise ValueError
            if event_type == INBOX_SPLICED and data.get("inserted"):
                data = data | {"inserted": tuple(map(freeze_message, data["inserted"]))}
            if len(record) == 4:
                return tuple.__new__(Event, (event_type, seq, time, data, None, ())), True
            # keys a message event has: kept, so the append rules can refuse them
            extra = (record.get("surface_op"), record.get("source_event_seqs", ()))
            return tuple.__new__(Event, (event_type, seq, time, data, *extra)), False
        source_seqs = record["source_event_seqs"]
        if type(source_seqs) is not tuple:
            raise ValueError
        return tuple.__new__(Event, (event_type, seq, time, data, record["surface_op"], source_seqs)), True
    except Exception as error:
        raise _corrupt(describe(seq), record, seq, error) from None


def _corrupt(where: str, record: Any, seq: int, error: Exception) -> SessionCorruptError:
    """The error for a record that does not decode (`record`: what it parsed to, if anything)."""
    reason = _reason(record, seq) if record is not None else "not valid JSON"
    return SessionCorruptError(f"{where}: {reason or _refused(record.get('type'), error)}")


def _refused(event_type: object, error: Exception) -> str:
    return f"bad {event_type} event: {error}" if str(error) else f"bad {event_type} event"


def checked_records(records: StoredRecords, describe: Callable[[int], str]) -> StoredRecords:
    """`records` with every checksum a store left to check checked (`Records.check`): the first
    record that fails is a `SessionCorruptError` naming it (`describe(index)`)."""
    if type(records) is Records and (damaged := records.check()) >= 0:
        raise checksum_mismatch(describe(damaged))
    return records


def decode_events(
    records: StoredRecords,
    describe: Callable[[int], str],
    fold: Callable[[Event], object],
    *,
    into: EventLog | None = None,
) -> EventLog:
    """Decode stored records into events, calling `fold(event)` on each in seq order.

    `describe(index)` names where record `index` lives (`"/x/log.jsonl: line 7"`); every error,
    including one from `fold`, is a `SessionCorruptError` carrying that name. Events are added
    to `into` (a new `EventLog` by default) as they are folded, so `fold` sees the events before;
    an event is kept as the record it was read from (`EventLog.add_record`) unless it is a plain
    event carrying keys of a message event.
    """
    log = EventLog() if into is None else into
    records = checked_records(records, describe)
    for seq in range(len(records)):  # seqs are contiguous from 0: record `seq` holds event `seq`
        text = records[seq]
        event, as_record = decode_record(text, seq, describe)
        if event.type == REQUEST_HEADER:
            log.header_seq = seq
        try:
            fold(event)
        except Exception as error:
            raise SessionCorruptError(f"{describe(seq)}: {_refused(event.type, error)}") from None
        if as_record:
            log.add_record(event, text)
        else:
            log.append(event)
    return log


def decode_stored(
    records: StoredRecords,
    describe: Callable[[int], str],
    fold: Callable[[Event], object],
    fold_appends: Callable[[list[int], list[Any], list[Any], int], int],
    *,
    into: EventLog | None = None,
) -> EventLog:
    """`decode_events` for opening a log, in one native pass (`dshkit._core.decode_records`).

    The same events and errors, but `fold` is called only on the events that can matter to it:
    message events and whatever the native pass did not vouch for. Every other event is of a
    known type without a message, its data proven to pass that type's rules
    (`check_plain_data`), so folding it into a surface, or admitting it, changes nothing. A run
    of appends proven to pass every rule that does not depend on the log before them goes to
    `fold_appends` (`Surface.fold_appends`) instead; one it stops at takes the full way. While
    `fold` runs on event `seq`, `into` holds exactly the events before it.
    """
    log = EventLog() if into is None else into
    decoded = decode_records(records, Event)
    if isinstance(decoded, int):  # the first record whose text does not match its checksum
        raise checksum_mismatch(describe(decoded))
    types, times, messages, blob, ends, pending = decoded
    log.adopt(types, times, messages, blob, ends)
    reveal = log.reveal
    for item in pending:
        if type(item) is tuple:  # a run of vouched appends: (seqs, tags)
            seqs, tags = item
            done = fold_appends(seqs, tags, messages, 0)
            while done < len(seqs):
                seq = seqs[done]
                _fold_record(log, records, seq, describe, fold)
                done = fold_appends(seqs, tags, messages, done + 1)
            continue
        if type(item) is int:
            _fold_record(log, records, item, describe, fold)
            continue
        event = item
        reveal(event.seq)
        try:
            fold(event)
        except Exception as error:
            raise SessionCorruptError(f"{describe(event.seq)}: {_refused(event.type, error)}") from None
    reveal(len(types))
    return log


def _fold_record(
    log: EventLog, records: StoredRecords, seq: int, describe: Callable[[int], str], fold: Callable[[Event], object]
) -> None:
    """Decode record `seq` in Python, put it in `log` and `fold` it (the full way, naming what is wrong)."""
    event, _ = decode_record(records[seq], seq, describe)
    log.settle(seq, event)
    if event.type == REQUEST_HEADER:
        log.header_seq = seq
    log.reveal(seq)
    try:
        fold(event)
    except Exception as error:
        raise SessionCorruptError(f"{describe(seq)}: {_refused(event.type, error)}") from None
