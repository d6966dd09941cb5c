"""The session viewer page: a session log as one self-contained HTML page (see docs/viewer.md).

`session_page(session, where=...)` builds it. `dshkit log html` writes it to a file, `dshkit log
serve` serves it live on loopback, and `dshkit.serve` serves it to a session's owner; this package
sits below all three (it reads sessions and models' usage, and imports neither `cli` nor `serve`).
"""

from __future__ import annotations

from dshkit.session.session import Session
from dshkit.viewer.page import render_page
from dshkit.viewer.page_data import page_data

__all__ = ["page_data", "render_page", "session_page"]


def session_page(session: Session, *, where: str) -> str:
    """The viewer page of an open session (`where`: what the page names as the log's place)."""
    data = page_data(session.events, session_id=session.id, created_at=session.created_at, where=where)
    return render_page(data, title=f"dshkit session {session.id}")
