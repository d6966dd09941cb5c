"""`load_events`: a stored log's records as events, each held to the append rules it was written under."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

from dshkit.session.codec import decode_stored
from dshkit.session.errors import SessionIntegrityWarning
from dshkit.session.event_log import EventLog
from dshkit.session.events import KNOWN_EVENT_TYPES, Event
from dshkit.session.log_format import LogFormat
from dshkit.session.surface import Surface


def load_events(
    log_format: LogFormat,
    records: Sequence[str | bytes],
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

    # dshkit's own format is decoded natively; it folds only the events that can matter.
    if seq_is_index:
        decode_stored(records, describe, load, surface.fold_appends, into=events)
    else:
        log_format.decode_events(records, describe, load, into=events)
    if broken:
        warnings.warn(
            SessionIntegrityWarning(
                f"{len(broken)} record(s) break the append rules (opened read-only for inspection; "
                f"`dshkit log verify` lists them); first: {broken[0]}"
            ),
            stacklevel=3,
        )
    return events
