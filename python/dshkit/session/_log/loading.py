"""`load_log`: a stored log's header and records as the parts of a session (`load_events`: each
event held to the append rules it was written under)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from dshkit.session._log.event_codec import StoredRecords
from dshkit.session.errors import SessionIntegrityWarning
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import KNOWN_EVENT_TYPES, Event
from dshkit.session._log.formats import LogFormat
from dshkit.session.stores.protocol import SessionStore, log_format_of
from dshkit.session._surface import Surface


class LoadedLog(NamedTuple):
    """What `Session.open` starts from: the header's facts, the events and their fold."""

    session_id: str
    created_at: int
    header: Any
    events: EventLog
    surface: Surface


def load_log(
    store: SessionStore, header_text: str | bytes, records: StoredRecords, *, read_only: bool, session_id: str | None
) -> LoadedLog:
    """The log `store.load` returned, in the store's format; `ValueError` if `session_id` is given
    and the header names another session."""
    log_format = log_format_of(store)
    log_id, created_at, header = log_format.read_header(header_text, store.describe(-1))
    if session_id is not None and log_id != session_id:
        raise ValueError(f"{store.describe(-1)}: the log holds session {log_id}, not {session_id}")
    surface = Surface()
    events = load_events(log_format, records, store.describe, surface, read_only=read_only)
    return LoadedLog(log_id, created_at, header, events, surface)


def load_events(
    log_format: LogFormat,
    records: StoredRecords,
    describe: Callable[[int], str],
    surface: Surface,
    *,
    read_only: bool,
) -> EventLog:
    """The events of `records`, folded into `surface`, every event the format folds passed through `Surface.admit`.

    A record that breaks a rule is a `SessionCorruptError` (from the format's decoder); read-only,
    it is kept and reported once as a `SessionIntegrityWarning`, so a broken log can be inspected.
    """
    events = EventLog()
    broken: list[str] = []
    admit, fold, known = surface.admit, surface.fold, KNOWN_EVENT_TYPES
    seq_is_index = log_format.name == "dshkit"  # the original packs several chunk events into one record

    def load(event: Event) -> None:
        if event.type in known:  # an unknown type is a newer writer's: it may exist, it blocks derivation
            try:
                admit(event.type, event.data, event.surface_op, event.source_event_seqs, events)
            except (TypeError, ValueError) as error:
                if not read_only:
                    raise
                broken.append(f"{describe(event.seq) if seq_is_index else f'{describe(-1)}: event {event.seq}'}: {error}")
        fold(event)

    # Decoded natively where the format can be; only the events that can matter are folded.
    log_format.load_events(records, describe, load, surface.fold_appends, into=events)
    if broken:
        warnings.warn(
            SessionIntegrityWarning(
                f"{len(broken)} record(s) break the append rules (opened read-only for inspection; "
                f"`dshkit log verify` lists them); first: {broken[0]}"
            ),
            stacklevel=3,
        )
    return events
