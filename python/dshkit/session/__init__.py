"""`dshkit.session`: the durable, append-only log behind every model request.

The log is the authority for every model-visible input: `Session.messages()` folds its message
events into the history, and `project_request` turns that history plus the latest
`request/header` into the frozen `ModelRequest`, so any request can be rebuilt from the log alone.
See DESIGN section 3 and `docs/session.md`.
"""

from __future__ import annotations

from dshkit.session.attachments import Attachments
from dshkit.session.catalog import SessionInfo, list_sessions
from dshkit.session.errors import (
    AttachmentError,
    SessionClosedError,
    SessionConflictError,
    SessionCorruptError,
    SessionError,
    SessionIntegrityWarning,
    SessionRecoveryWarning,
    UnknownEventError,
)
from dshkit.session.dsh.convert import convert_log
from dshkit.session.delegation import Delegation, children_of, create_child_session, delegation_depth, delegation_of
from dshkit.session.events import (
    KNOWN_EVENT_TYPES,
    MESSAGE_EVENT_TYPES,
    Event,
    is_ignorable,
    replace_op,
)
from dshkit.session.history import History
from dshkit.session._repair import closer_message_id
from dshkit.session.request import ModelRequest, derive_messages, project_request
from dshkit.session._log.events_view import EventsView
from dshkit.session.session import Session
from dshkit.session.stores import DURABILITY_MODES, SessionStore, open_store
from dshkit.session.stores.jsonl import JsonlStore
from dshkit.session.dsh.sqlite_store import list_original_sessions
from dshkit.session.stores.postgres import PostgresStore
from dshkit.session.stores.sqlite import SqliteStore

__all__ = [
    "AttachmentError",
    "Attachments",
    "DURABILITY_MODES",
    "Delegation",
    "Event",
    "EventsView",
    "History",
    "JsonlStore",
    "KNOWN_EVENT_TYPES",
    "MESSAGE_EVENT_TYPES",
    "ModelRequest",
    "PostgresStore",
    "Session",
    "SessionClosedError",
    "SessionConflictError",
    "SessionCorruptError",
    "SessionError",
    "SessionInfo",
    "SessionIntegrityWarning",
    "SessionRecoveryWarning",
    "SessionStore",
    "SqliteStore",
    "UnknownEventError",
    "children_of",
    "closer_message_id",
    "convert_log",
    "create_child_session",
    "delegation_depth",
    "delegation_of",
    "derive_messages",
    "is_ignorable",
    "list_original_sessions",
    "list_sessions",
    "open_store",
    "project_request",
    "replace_op",
]
