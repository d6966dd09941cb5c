"""`DshkitSession`: an OpenAI Agents SDK session (``agents.memory.Session``) over a dshkit log.

The SDK hands a session Responses input items; they are stored as dshkit messages through
`dshkit.interop.openai_responses` (so every item comes back as it was given, its ``msg_…``,
``fc_…``, ``rs_…`` ids and encrypted reasoning included) and logged with the ordinary
``user/message``, ``assistant/message`` and ``tool/result`` events: the log is a normal dshkit log
that ``dshkit log verify`` checks and any dshkit tool can read.

- ids: a message made from items takes the id of its first item that has one, else a new ULID
  (a fresh ULID too when that id is already in the log, e.g. an item added again after a pop).
- a retried ``add_items`` adds nothing (`StoredItems.split_batch`): an item stored under its
  identity (its id, else its call id) equal to the given one is skipped, and so is an id-less item
  next to one so skipped that equals its stored neighbour, or a call whose items all equal the
  latest stored items; a different item under a stored identity, or a new item before a stored
  one, raises `ValueError`. Only the batch is converted: the stored items are kept in memory
  beside the log, read from it once.
- ``pop_item`` and ``clear_session`` never delete: they log a surface replacement (a marker
  message, source ``{"kind": "plugin", "plugin": "openai_agents", "form": "notice"}``, in place
  of the removed range; items of that range that stay are logged again after it). The marker is
  no item: `get_items` skips it. A function call still waiting for its output cannot be popped
  or cleared (the log keeps a call until it is answered): that raises `ValueError`.
- system/developer items are logged as user-role messages (a ``user/message`` holds only user
  messages) whose blocks keep the item's role, so they come back unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Sequence
from typing import Any

from dshkit.interop.openai_responses import from_response_items, to_response_items
from dshkit.interop.stored_items import StoredItems
from dshkit.llm import Message, freeze_message, new_message_id
from dshkit.session import Session, replace_op
from dshkit.session.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE

__all__ = ["MARKER_PLUGIN", "DshkitSession"]

MARKER_PLUGIN = "openai_agents"


def _is_marker(message: Message) -> bool:
    source = message.source
    return source.get("kind") == "plugin" and source.get("plugin") == MARKER_PLUGIN and source.get("form") == "notice"


class DshkitSession:
    """The Agents SDK ``Session`` protocol over the dshkit log at `location`.

    `location` is a log file (``.jsonl``, ``.sqlite``, ``.db``: opened if it exists, else
    created), a directory (the log is ``<location>/<session_id>.jsonl``), or a dshkit
    ``SessionStore``.
    """

    session_settings: Any = None

    def __init__(self, session_id: str, location: Any, *, session_settings: Any = None) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty str")
        self.session_id = session_id
        self.session_settings = session_settings
        self._lock = asyncio.Lock()
        self._session = self._open(location)
        self._stored: StoredItems | None = None  # read from the log on first use, then kept in step

    def _open(self, location: Any) -> Session:
        if isinstance(location, (str, os.PathLike)):
            path = os.fspath(location)
            if os.path.isdir(path):
                path = os.path.join(path, f"{self.session_id}.jsonl")
            return Session.open(path) if os.path.exists(path) else Session.create(path)
        store = location
        try:
            return Session.open(store=store)
        except FileNotFoundError:
            return Session.create(store=store)

    @property
    def log(self) -> Session:
        """The dshkit session holding the items (read it, verify it; write through this object)."""
        return self._session

    def close(self) -> None:
        """Sync and close the log."""
        self._session.close()

    # -- reading -------------------------------------------------------------------------------

    def _stored_items(self) -> StoredItems:
        if self._stored is None:
            self._stored = StoredItems(
                to_response_items((m for m in self._session.messages() if not _is_marker(m)), attachments=self._session.attachments)
            )
        return self._stored

    def items(self) -> list[dict[str, Any]]:
        """Every stored item, oldest first (what `get_items()` returns, without the event loop)."""
        return copy.deepcopy(self._stored_items().tail())

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest `limit` items (all when `None`), oldest first."""
        async with self._lock:
            return copy.deepcopy(self._stored_items().tail(limit))

    # -- writing -------------------------------------------------------------------------------

    async def add_items(self, items: list[Any]) -> None:
        """Store `items` after the others; re-added stored items (a retry) add nothing.

        Converts only `items`. `ValueError` if the batch contradicts the stored items (another
        item under a stored id or call, or a stored item after a new one); nothing is added then.
        """
        batch = [item if isinstance(item, dict) else _as_item(item) for item in items]
        async with self._lock:
            stored = self._stored_items()
            fresh = batch[stored.split_batch(batch):]
            if fresh:
                stored.extend(to_response_items(self._append_items(fresh), attachments=self._session.attachments))
                self._session.sync()

    def _append_items(self, items: Sequence[dict[str, Any]]) -> list[Message]:
        """Log `items`; returns the messages logged (not yet in `_stored`)."""
        session = self._session
        logged = []
        for message in from_response_items(items):
            if message.role == "system" or session.has_message(message.id):
                data = message.to_dict()
                data["role"] = "user" if message.role == "system" else message.role
                if session.has_message(message.id):
                    data["id"] = new_message_id()
                message = freeze_message(data)
            if message.role == "assistant":
                session.append(ASSISTANT_MESSAGE, {"message": message})
            elif message.source.get("kind") == "tool":
                session.append(TOOL_RESULT, {"message": message})
            else:
                session.append(USER_MESSAGE, message)
            logged.append(message)
        return logged

    async def pop_item(self) -> Any:
        """Remove and return the latest item (`None` when there is none); the log keeps it."""
        async with self._lock:
            stored = self._stored_items()  # read before the log changes
            surface = self._session.messages()
            last = next((p for p in range(len(surface) - 1, -1, -1) if not _is_marker(surface[p])), None)
            if last is None:
                return None
            start = last
            message = surface[last]
            if message.source.get("kind") == "tool":
                call_id = message.source.get("call_id")
                start = next(p for p in range(last, -1, -1) if any(c.get("id") == call_id for c in surface[p].tool_calls))
            kept = to_response_items([m for m in surface[start:] if not _is_marker(m)], attachments=self._session.attachments)
            popped = kept.pop()
            self._replace_tail(start, len(surface), f"removed the latest item ({popped.get('type', 'message')})")
            self._append_items(kept)
            self._session.sync()
            stored.pop()
            return popped

    async def clear_session(self) -> None:
        """Remove every item (the log keeps them: one replacement of the whole surface)."""
        async with self._lock:
            size = len(self._session.messages())
            if size:
                self._replace_tail(0, size, "cleared the session")
                self._session.sync()
            self._stored_items().clear()

    def _replace_tail(self, start: int, end: int, why: str) -> None:
        pending = self._session.pending_tool_calls()
        if pending:
            raise ValueError(
                f"session {self.session_id}: function call(s) {', '.join(map(repr, pending))} still wait for their "
                "output; the dshkit log keeps a call until it is answered, so it cannot be popped or cleared"
            )
        marker = freeze_message({
            "id": new_message_id(),
            "role": "user",
            "content": [],
            "source": {"kind": "plugin", "plugin": MARKER_PLUGIN, "form": "notice", "note": why},
        })
        self._session.append(USER_MESSAGE, marker, surface_op=replace_op(start, end))


def _as_item(item: Any) -> dict[str, Any]:
    dump = getattr(item, "model_dump", None)
    if dump is None:
        raise TypeError(f"an Agents SDK item must be a dict (or a pydantic model), not {type(item).__name__}")
    return dump(exclude_unset=True)  # type: ignore[no-any-return]
