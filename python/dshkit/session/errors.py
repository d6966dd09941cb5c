"""Exceptions and warnings raised by the session log."""

from __future__ import annotations


class SessionError(Exception):
    """Base class of every error the session log raises on its own account."""


class SessionCorruptError(SessionError):
    """A stored log cannot be read: not a dshkit log, or a bad record before its last line.

    The message names the file and the line (JSON Lines) or row (SQLite) at fault.
    """


def checksum_mismatch(where: str) -> SessionCorruptError:
    """The error for a stored record whose text no longer matches its checksum (`where`: the line or row)."""
    return SessionCorruptError(f"{where}: checksum mismatch: the record changed after it was written")


class SessionConflictError(SessionError):
    """An append reached a seq (or message id) that the store already holds with a different record.

    A retry of an append whose acknowledgement was lost finds the identical record and succeeds;
    a different record means another writer appended to the session: the log is not forked.
    """


class SessionClosedError(SessionError):
    """An append or sync on a session that was closed (or opened read-only)."""


class UnknownEventError(SessionError):
    """Derivation met an event type it does not know and that is not marked ignorable."""


class AttachmentError(SessionError):
    """An attachment a block refers to is missing, or its stored bytes do not match its id.

    The message names the attachment id, where it was looked for, and (when known) the message
    whose block refers to it; `attachment_id` holds the id.
    """

    def __init__(self, message: str, attachment_id: str) -> None:
        super().__init__(message)
        self.attachment_id = attachment_id


class SessionRecoveryWarning(UserWarning):
    """Opening a log repaired its storage: a torn last line (an unfinished write) was cut off."""


class SessionIntegrityWarning(UserWarning):
    """A read-only open loaded records that break the append rules (a writable open refuses them)."""


__all__ = [
    "AttachmentError",
    "SessionClosedError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionError",
    "SessionIntegrityWarning",
    "SessionRecoveryWarning",
    "UnknownEventError",
]
