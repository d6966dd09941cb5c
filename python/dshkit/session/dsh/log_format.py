"""`ORIGINAL_FORMAT`: the original harness's log format, as a `Session` reads, writes and repairs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dshkit import FrozenDict, to_json
from dshkit.session.dsh import codec, repair
from dshkit.session._log.event_codec import StoredRecords
from dshkit.session._log.event_log import EventLog
from dshkit.session.events import Event
from dshkit.session._log.formats import Closer, LogFormat
from dshkit.session._surface import Surface


class OriginalFormat:
    """The original's format: its header, its event records, its crash repair (stateless)."""

    name = "dsh"

    @staticmethod
    def new_header(created_at: int, session_id: str | None = None, fields: dict[str, Any] | None = None) -> tuple[str, str]:
        """The session id (default: a new UUID, as the original mints) and its header."""
        if fields:
            raise ValueError(f"an original-format log's header takes no added fields ({sorted(fields)})")
        header = codec.new_header(created_at, session_id=session_id)
        return header["id"], to_json(header)

    @staticmethod
    def read_header(text: str | bytes, where: str) -> tuple[str, int, FrozenDict[Any]]:
        """The checked original header (`createdAt`, `delegationDepth`, ...)."""
        header = codec.decode_header(text, where)
        return header["id"], header["createdAt"], header

    @staticmethod
    def decode_events(
        lines: StoredRecords,
        describe: Callable[[int], str],
        fold: Callable[[Event], object],
        *,
        into: EventLog | None = None,
    ) -> EventLog:
        """dshkit events of the original's lines (packed rows expanded), folded as they come."""
        return codec.decode_records(lines, describe, fold, into=into)

    @staticmethod
    def load_events(
        lines: StoredRecords,
        describe: Callable[[int], str],
        fold: Callable[[Event], object],
        fold_appends: Callable[[list[int], list[Any], list[Any], int], int],
        *,
        into: EventLog | None = None,
    ) -> EventLog:
        """`decode_events` for opening a log: runs of appends read natively go to `fold_appends`."""
        return codec.decode_records(lines, describe, fold, into=into, fold_appends=fold_appends)

    @staticmethod
    def encode_event(event: Event, surface: Surface) -> str:
        """The original's line for an event about to be appended."""
        return codec.encode_event(event, surface)

    @staticmethod
    def plan_closers(events: Sequence[Event], surface: Surface) -> list[Closer]:
        """The closers of a crashed turn, by the original's rules."""
        return repair.plan_closers(events)


ORIGINAL_FORMAT: LogFormat = OriginalFormat()
