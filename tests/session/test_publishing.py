"""`Session.publishing`: whether the calling thread is inside this session's observers."""

from __future__ import annotations

import threading
from typing import Any

from dshkit.session import Session


def test_publishing_is_true_only_inside_this_sessions_observers_on_this_thread() -> None:
    session, other = Session(), Session()
    seen: list[tuple[bool, bool, bool]] = []

    def observer(event: Any) -> None:
        elsewhere: list[bool] = []
        thread = threading.Thread(target=lambda: elsewhere.append(session.publishing))
        thread.start()
        thread.join()
        seen.append((session.publishing, other.publishing, elsewhere[0]))

    session.subscribe(observer)
    assert not session.publishing
    session.append("app/note", {"ignorable": True})
    assert seen == [(True, False, False)]
    assert not session.publishing
