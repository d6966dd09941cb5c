"""`CancelToken`: the cancellation signal of one agent run, shared by the model and tools."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING


class CancelToken:
    """A one-shot cancellation signal; the first cause wins.

    Readers (models, tools, hooks) see `cancelled` and `cause` and may ``await wait()``; the
    agent registers callbacks (`on_cancel`) that run synchronously when `cancel` is first called,
    which is how a stream being read is interrupted at once.
    """

    __slots__ = ("_callbacks", "_cause", "_cancelled", "_event")

    def __init__(self) -> None:
        self._cancelled = False
        self._cause: str | None = None
        self._callbacks: list[Callable[[], object]] = []
        self._event: asyncio.Event | None = None

    if TYPE_CHECKING:

        @property
        def cancelled(self) -> bool:
            """True once `cancel` was called."""

    else:
        # Read about a dozen times a step: a getter in C (`attrgetter`) runs without a Python frame.
        cancelled = property(attrgetter("_cancelled"), doc="True once `cancel` was called.")

    @property
    def cause(self) -> str | None:
        """The cause given to the first `cancel` call, else ``None``."""
        return self._cause

    def cancel(self, cause: str = "user") -> bool:
        """Request cancellation; returns False (and changes nothing) if already cancelled."""
        if self._cancelled:
            return False
        self._cancelled = True
        self._cause = cause
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()
        if self._event is not None:
            self._event.set()
        return True

    def on_cancel(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Run `callback` on cancellation (at once if already cancelled); returns an unregister."""
        if self._cancelled:
            callback()
            return _nothing
        self._callbacks.append(callback)

        def unregister() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return unregister

    async def wait(self) -> None:
        """Return once cancellation was requested (immediately if it already was)."""
        if self._cancelled:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()

    def __repr__(self) -> str:
        state = f"cancelled, cause={self._cause!r}" if self._cancelled else "active"
        return f"<CancelToken {state}>"


def _nothing() -> None:
    return None


__all__ = ["CancelToken"]
