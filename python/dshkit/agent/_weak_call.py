"""`WeakCall`: a bound method called through a weak reference to its object."""

from __future__ import annotations

import weakref
from collections.abc import Callable


class WeakCall:
    """`method()` while its object lives: no reference cycle (a dropped agent is freed at once).

    Two objects the cyclic GC tracks for the owner's life (this one and the weak reference),
    where a closure over a `weakref.WeakMethod` is eight: with thousands of agents, each is
    walked again by every full collection (issue 37)."""

    __slots__ = ("_owner", "_function")

    def __init__(self, method: Callable[[], None]) -> None:
        self._owner = weakref.ref(method.__self__)  # type: ignore[attr-defined]
        self._function = method.__func__  # type: ignore[attr-defined]

    def __call__(self) -> None:
        owner = self._owner()
        if owner is not None:
            self._function(owner)


__all__ = ["WeakCall"]
