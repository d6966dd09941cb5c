"""A session's observers: the callbacks `Session.append` calls after every append, on its thread.

An observer sees each event once it is stored; a failing observer is reported (to its own
`on_error`, else on the `dshkit.session` logger) and never undoes the append nor stops the
others. While observers run, `publishing` holds the thread's ident: an append from an observer
(re-entrant, on that thread) is refused by `Session.append`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from dshkit.session.events import Event

logger = logging.getLogger("dshkit.session")

Observer = Callable[[Event], object]
ErrorHandler = Callable[[BaseException, Event], object]


class Observers:
    """The observers of one session (held by it as a part), and who is publishing now."""

    __slots__ = ("entries", "publishing", "_lock")

    def __init__(self, lock: threading.RLock) -> None:
        """`lock`: the session's, held by every append, so a subscription never lands inside one."""
        self.entries: tuple[tuple[Observer, ErrorHandler | None], ...] = ()  # replaced whole: appends read it once
        self.publishing: int | None = None  # the ident of the thread running the observers
        self._lock = lock

    def subscribe(self, callback: Observer, on_error: ErrorHandler | None) -> Callable[[], None]:
        """Add `callback`; returns a function that removes it."""
        entry = (callback, on_error)
        with self._lock:
            self.entries = (*self.entries, entry)

        def unsubscribe() -> None:
            with self._lock:
                self.entries = tuple(other for other in self.entries if other is not entry)

        return unsubscribe

    def publish(self, event: Event, entries: tuple[tuple[Observer, ErrorHandler | None], ...]) -> None:
        """Call the observers `entries` (`self.entries` as the append read it) with `event`,
        containing each one's failure."""
        self.publishing = threading.get_ident()
        try:
            for observer, on_error in entries:
                try:
                    observer(event)
                except Exception as error:  # contained: an observer never undoes an append
                    _report(observer, on_error, error, event)
        finally:
            self.publishing = None


def _report(observer: Observer, on_error: Any, error: Exception, event: Event) -> None:
    if on_error is not None:
        try:
            on_error(error, event)
            return
        except Exception:
            logger.exception("session observer error handler %r failed", on_error)
    logger.error("session observer %r failed on event %d (%s)", observer, event.seq, event.type, exc_info=error)
