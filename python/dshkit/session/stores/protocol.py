"""What a session store is: the `SessionStore` protocol and the durability modes.

A store keeps the header and the encoded events of one log. The session validates, encodes and
numbers events; the store only persists them, honouring the durability mode:

- `"always"`: an append returns only once the event is on stable storage (fsync);
- `"checkpoint"`: `sync()` makes everything appended so far durable (the agent calls it before
  each model call and before each tool body);
- `"none"`: never forces anything to disk (the OS writes when it likes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dshkit.session.events import Event

DURABILITY_MODES = ("always", "checkpoint", "none")


def check_durability(durability: object) -> str:
    """`durability` itself if it names a mode, else `ValueError`."""
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability must be one of {', '.join(map(repr, DURABILITY_MODES))}, not {durability!r}")
    return durability


class SessionStore(Protocol):
    """Persistence of one session log (JSON Lines, SQLite and PostgreSQL ship; anything else may implement it).

    Every store passes the contract suite `tests/session/test_store_contract.py`. Two optional
    attributes: `log_format` (a `dshkit.session.log_format.LogFormat`) when the store holds records
    in another format than dshkit's own, and `read_only = True` when it can never be written (a
    session opened from it is read-only, without crash repair). One optional method:
    `attachment_backend()`, where the bytes of the log's attachment blocks live (a
    `dshkit.session.attachments.AttachmentBackend`; without it they are kept in memory).
    """

    def create(self, header: str, durability: str) -> None:
        """Start a new, empty log holding `header` (JSON text); `FileExistsError` if one exists."""

    def load(self, durability: str, *, read_only: bool) -> tuple[str | bytes, Sequence[str | bytes]]:
        """The header text and every stored event record, in seq order (repairing a torn tail)."""

    def describe(self, index: int) -> str:
        """Where event record `index` (0-based; -1: the header) lives: `"/x/log.jsonl: line 7"`."""

    def append(self, event: Event, record: str) -> None:
        """Persist one encoded event; on failure persist nothing of it and raise."""

    def sync(self) -> None:
        """Make every appended event durable (a no-op with durability `"none"`)."""

    def close(self) -> None:
        """Release the storage; idempotent."""

