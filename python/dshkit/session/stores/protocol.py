"""What a session store is: the `SessionStore` protocol, every member of it, and the durability modes.

A store keeps the header and the encoded events of one log. The session validates, encodes and
numbers events; the store only persists them, honouring the durability mode:

- `"always"`: an append returns only once the event is on stable storage (fsync);
- `"checkpoint"`: `sync()` makes everything appended so far durable (the agent calls it before
  each model call and before each tool body);
- `"none"`: never forces anything to disk (the OS writes when it likes).

Every member a caller may use is declared on `SessionStore`: six methods each store defines
(`REQUIRED_MEMBERS`), and the optional ones with their defaults (`OPTIONAL_MEMBERS`), which a
store that subclasses `SessionStore` inherits. Nothing reads a store member with `getattr`:
`check_store` refuses, at the door, an object that lacks one.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol


from dshkit.session._log.event_codec import StoredRecords
from dshkit.session.events import Event
from dshkit.session._log.formats import DSHKIT_FORMAT, LogFormat

DURABILITY_MODES = ("always", "checkpoint", "none")


def check_durability(durability: object) -> str:
    """`durability` itself if it names a mode, else `ValueError`."""
    if durability not in DURABILITY_MODES:
        raise ValueError(f"durability must be one of {', '.join(map(repr, DURABILITY_MODES))}, not {durability!r}")
    return durability


class AttachmentBackend(Protocol):
    """Where a store keeps attachment bytes, by the hex SHA-256 digest of each."""

    def save_attachment(self, digest: str, data: bytes) -> None:
        """Store `data` durably under `digest`: a no-op when those bytes are stored already, and a
        repair when what is stored there does not match `data` (damaged bytes are replaced)."""

    def load_attachment(self, digest: str) -> bytes | None:
        """The bytes stored under `digest`, or `None` when there are none."""

    def attachment_location(self, digest: str) -> str:
        """Where `digest`'s bytes are (or would be) kept, for error messages."""


class SessionStore(Protocol):
    """Persistence of one session log (JSON Lines, SQLite and PostgreSQL ship; anything else may implement it).

    Every store passes the contract suite `tests/session/stores/test_store_contract.py`. Subclass it to
    inherit the optional members' defaults (the shipped stores do); a store that does not must
    define them all (`check_store`).
    """

    # -- optional members, with their defaults ------------------------------------------------

    log_format: LogFormat = DSHKIT_FORMAT
    """The format of the records it holds (the original harness's stores carry `ORIGINAL_FORMAT`)."""

    read_only: bool = False
    """True when it can never be written: a session opened from it is read-only, without crash repair."""

    waits_on_network: bool = False
    """True when `sync()` waits on a server (PostgreSQL): the agent syncs it off the event loop."""

    syncs_beside_appends: bool = False
    """True when `sync()` may run on another thread while appends go on (the agent then fsyncs off
    its loop without holding the session's lock); such a store says whether anything waits for it
    in `pending_sync`."""

    @property
    def pending_sync(self) -> bool:
        """True while an appended event is not yet durable (read only when `syncs_beside_appends`)."""
        return True

    session_id: str | None = None
    """The id of the session it holds, when the store picks it (a database of many); else `None`."""

    path: Path | None = None
    """The local file holding the log, if it is one (`None` for a server store)."""

    url: str | None = None
    """The server URL of the database holding the log, if it is one."""

    def attachment_backend(self) -> AttachmentBackend | None:
        """Where the bytes of the log's attachment blocks live; `None`: the session keeps them in memory."""
        return None

    # -- required members ---------------------------------------------------------------------

    @abstractmethod
    def create(self, header: str, durability: str) -> None:
        """Start a new, empty log holding `header` (JSON text); `FileExistsError` if one exists."""

    @abstractmethod
    def load(self, durability: str, *, read_only: bool) -> tuple[str | bytes, StoredRecords]:
        """The header text and every stored event record, in seq order (repairing a torn tail)."""

    @abstractmethod
    def describe(self, index: int) -> str:
        """Where event record `index` (0-based; -1: the header) lives: `"/x/log.jsonl: line 7"`."""

    @abstractmethod
    def append(self, event: Event, record: str) -> None:
        """Persist one encoded event; on failure persist nothing of it and raise."""

    @abstractmethod
    def sync(self) -> None:
        """Make every appended event durable (a no-op with durability `"none"`)."""

    @abstractmethod
    def close(self) -> None:
        """Release the storage; idempotent."""


def log_format_of(store: SessionStore | None) -> LogFormat:
    """The format of the records `store` holds (dshkit's own for a session in memory)."""
    return DSHKIT_FORMAT if store is None else store.log_format


def check_session_id(session_id: object) -> None:
    """`ValueError` unless `session_id` is None or a non-empty str."""
    if session_id is not None and not (isinstance(session_id, str) and session_id):
        raise ValueError(f"session_id must be a non-empty str, not {session_id!r}")


def checked_log_format(store: SessionStore | None, format: str) -> LogFormat:  # noqa: A002 - the contract's name
    """The format `store` writes (`log_format_of`); `ValueError` unless it is `format`."""
    log_format = log_format_of(store)
    if log_format.name != format:
        if store is None:
            raise ValueError(f"format={format!r} needs a path or a store")
        raise ValueError(f"{store!r} writes the {log_format.name!r} format, not {format!r}")
    return log_format


REQUIRED_MEMBERS = ("create", "load", "describe", "append", "sync", "close")
OPTIONAL_MEMBERS = (
    "log_format", "read_only", "waits_on_network", "syncs_beside_appends", "pending_sync", "session_id", "path", "url",
    "attachment_backend",
)


def check_store(store: object) -> SessionStore:
    """`store` itself if it has every member of `SessionStore`, else `TypeError` naming the missing ones."""
    missing = [name for name in (*REQUIRED_MEMBERS, *OPTIONAL_MEMBERS) if not hasattr(store, name)]
    if missing:
        raise TypeError(
            f"store= {type(store).__name__} lacks the SessionStore member(s) {', '.join(missing)}: subclass "
            "dshkit.session.SessionStore (it supplies the optional members' defaults) or define them"
        )
    return store  # type: ignore[return-value]
