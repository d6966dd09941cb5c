"""`DshkitSession`: an OpenAI Agents SDK session (``agents.memory.Session``) over a dshkit log.

The SDK hands a session Responses input items; they are stored as dshkit messages through
`dshkit.interop.openai_responses` (so every item comes back as it was given, its ``msg_…``,
``fc_…``, ``rs_…`` ids and encrypted reasoning included) and logged with the ordinary
``user/message``, ``assistant/message`` and ``tool/result`` events: the log is a normal dshkit log
that ``dshkit log verify`` checks and any dshkit tool can read.

- ids: a message made from items takes the id of its first item that has one, else a new ULID
  (a fresh ULID too when that id is already in the log, e.g. an item added again after a pop).
- a retried ``add_items``: items whose id is already stored are skipped, and a call whose items
  all equal the latest stored items adds nothing.
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
import os
from collections.abc import Sequence
from typing import Any

from dshkit.interop.openai_responses import from_response_items, to_response_items
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

    def _messages(self) -> list[Message]:
        return [message for message in self._session.messages() if not _is_marker(message)]

    def items(self) -> list[dict[str, Any]]:
        """Every stored item, oldest first (what `get_items()` returns, without the event loop)."""
        return to_response_items(self._messages(), attachments=self._session.attachments)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest `limit` items (all when `None`), oldest first."""
        async with self._lock:
            items = self.items()
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    # -- writing -------------------------------------------------------------------------------

    async def add_items(self, items: list[Any]) -> None:
        """Store `items` after the others; a retried call of stored items adds nothing."""
        batch = [item if isinstance(item, dict) else _as_item(item) for item in items]
        async with self._lock:
            stored = self.items()
            if batch and stored[-len(batch):] == batch:
                return
            known = {item.get("id") for item in stored if isinstance(item.get("id"), str)}
            fresh = [item for item in batch if not (isinstance(item.get("id"), str) and item["id"] in known)]
            self._append_items(fresh)
            self._session.sync()

    def _append_items(self, items: Sequence[dict[str, Any]]) -> None:
        session = self._session
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

    async def pop_item(self) -> Any:
        """Remove and return the latest item (`None` when there is none); the log keeps it."""
        async with self._lock:
            surface = self._session.messages()
            last = next((p for p in range(len(surface) - 1, -1, -1) if not _is_marker(surface[p])), None)
            if last is None:
                return None
            start = last
            message = surface[last]
            if message.source.get("kind") == "tool":
                call_id = message.source.get("call_id")
                start = next(p for p in range(last, -1, -1) if any(c.get("id") == call_id for c in surface[p].tool_calls))
            kept = to_response_items([m for m in surface[start:] if not _is_marker(m)])
            popped = kept.pop()
            self._replace_tail(start, len(surface), f"removed the latest item ({popped.get('type', 'message')})")
            self._append_items(kept)
            self._session.sync()
            return popped

    async def clear_session(self) -> None:
        """Remove every item (the log keeps them: one replacement of the whole surface)."""
        async with self._lock:
            size = len(self._session.messages())
            if size:
                self._replace_tail(0, size, "cleared the session")
                self._session.sync()

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
