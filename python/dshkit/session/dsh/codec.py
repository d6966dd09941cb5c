"""`OriginalCodec`: how a `Session` reads, writes and repairs a log in the original's format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dshkit import from_json, to_json
from dshkit.session.events import Event
from dshkit.session.surface import Surface
from dshkit.session.dsh import records, repair


class OriginalCodec:
    """The original harness's format: header, event records, crash repair (stateless)."""

    name = "dsh"

    @staticmethod
    def detects(header_text: str | bytes) -> bool:
        """Whether a log's first line is the original's header."""
        try:
            return records.is_original_header(from_json(header_text))
        except Exception:
            return False

    @staticmethod
    def header(header_text: str | bytes, where: str) -> tuple[str, int, Any]:
        """(session id, created-at ms, the whole header) of a checked header line."""
        header = records.decode_header(header_text, where)
        return header["id"], header["createdAt"], header

    @staticmethod
    def new_header(created_at: int) -> tuple[str, str]:
        """(session id, header JSON text) for a new log."""
        header = records.new_header(created_at)
        return header["id"], to_json(header)

    @staticmethod
    def decode(
        lines: Sequence[str | bytes], describe: Callable[[int], str], events: list[Event], surface: Surface
    ) -> None:
        """Decode stored lines into `events`, folding `surface`."""
        records.decode_records(lines, describe, events, surface)

    @staticmethod
    def encode(event: Event, surface: Surface) -> str:
        """The stored line for an event about to be appended (`surface` not yet folded with it)."""
        return records.encode_event(event, surface)

    @staticmethod
    def closers(events: Sequence[Event], surface: Surface) -> list[tuple[str, Any, tuple[int, ...]]]:
        """The events that close a turn a crash left open, by the original's rules."""
        return repair.plan_closers(events)
