"""Live notifications of the agent (`AgentEvent`): what subscribers and ``agent.events()`` see while the agent works.

Live events carry the very `Message` objects the durable log holds (and the inbox held before),
so a UI can follow one message by identity from queueing to the model request.

Event types (`AgentEvent.type`):

- ``"inserted"``, ``"claimed"``, ``"discarded"``, ``"replaced"``: inbox changes, one event per
  message, after the durable ``agent/inbox/spliced`` event (``data``: ``target``, ``seq``, and
  ``cause`` for discards; ``previous`` for replacements).
- ``"turn_start"``, ``"turn_end"`` (``data["reason"]``), ``"step_start"``, ``"step_end"``.
- ``"message"``: a message was appended to the log (``data``: ``event_type``, ``seq``,
  ``interrupted`` for assistant messages).
- ``"request"``: a request is being sent to the model (``data["request"]``).
- ``"delta"``: a stream chunk (``data["chunk"]``: the protocol mapping).
- ``"tool_call"``: a tool body is starting (``data``: ``call_id``, ``name``, ``seq``).
- ``"approval_asked"``, ``"approval_decided"``: a call waits for a person, or was decided
  (``data``: ``call_id``, ``tool``, ``arguments``, ``reason``, ``id``; ``call_id``, ``outcome``).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dshkit.llm import Message

_log = logging.getLogger("dshkit.agent")

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class AgentEvent:
    """One live event. `message` is set for inbox and message events; `data` is read-only."""

    type: str
    turn: int | None = None
    step: int | None = None
    message: Message | None = None
    data: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


Subscriber = Callable[[AgentEvent], object]


class NotificationHub:
    """Delivers live events to callbacks and to open `EventStream`s; failures are contained."""

    def __init__(self) -> None:
        self._callbacks: list[Subscriber] = []
        # Made by the first `stream()`: a WeakSet is seven objects the cyclic GC tracks, walked by
        # every full collection for each of thousands of agents nobody streams from (issue 37).
        self._streams: weakref.WeakSet[EventStream] | None = None
        # A hint read before each `emit` of a step (an attribute, not a call: `emit` with its
        # keyword arguments costs ~4k instructions even when it returns at once). False only when
        # nobody listens; set by `subscribe` and `stream`, cleared by an `emit` that finds nobody
        # (so a stream dropped by garbage collection costs one more call). `active` is exact.
        self.maybe_listening = False

    @property
    def active(self) -> bool:
        """True when anyone listens (exact; the loop reads the cheaper `maybe_listening` hint)."""
        # The WeakSet's own set of references: `len(WeakSet)` is a Python-level call.
        return bool(self._callbacks) or (self._streams is not None and bool(self._streams.data))  # type: ignore[attr-defined]

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(event)` for every event; returns a function that unsubscribes."""
        if not callable(callback):
            raise TypeError(f"subscribe: expected a callable, got {type(callback).__name__}")
        self._callbacks.append(callback)
        self.maybe_listening = True

        def unsubscribe() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return unsubscribe

    def stream(self) -> EventStream:
        """A new async iterator receiving every event from now on."""
        stream = EventStream(self)
        if self._streams is None:
            self._streams = weakref.WeakSet()
        self._streams.add(stream)
        self.maybe_listening = True
        return stream

    def _drop(self, stream: EventStream) -> None:
        if self._streams is not None:
            self._streams.discard(stream)

    def emit(
        self,
        type: str,
        *,
        turn: int | None = None,
        step: int | None = None,
        message: Message | None = None,
        **data: Any,
    ) -> None:
        """Build one event and deliver it; a failing subscriber is logged and skipped."""
        streams = self._streams
        if not self._callbacks and (streams is None or not streams.data):  # type: ignore[attr-defined]
            self.maybe_listening = False
            return
        event = AgentEvent(type, turn, step, message, MappingProxyType(data) if data else _EMPTY)
        for callback in tuple(self._callbacks):
            try:
                callback(event)
            except Exception:
                # An observer never changes an outcome: report and carry on.
                _log.exception("agent event subscriber %r failed on %s", callback, type)
        if streams is not None:
            for stream in tuple(streams):
                stream._push(event)


class EventStream:
    """``async for event in agent.events()``: every event from creation on, in order.

    Stop with ``break``, `close()` or ``async with``; a stream nobody references any more is
    dropped automatically.
    """

    def __init__(self, hub: NotificationHub) -> None:
        self._hub: NotificationHub | None = hub
        # None is the end marker that wakes a reader blocked in __anext__ when the stream closes.
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()

    def _push(self, event: AgentEvent) -> None:
        self._queue.put_nowait(event)

    def close(self) -> None:
        """Stop receiving events (already queued ones can still be read)."""
        if self._hub is not None:
            self._hub._drop(self)
            self._hub = None
            self._queue.put_nowait(None)

    def pending(self) -> int:
        """How many received events have not been read yet."""
        return self._queue.qsize() - (self._hub is None)

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> AgentEvent:
        event = await self._queue.get()
        if event is None:
            self._queue.put_nowait(None)  # keep the stream ended for later reads
            raise StopAsyncIteration
        return event

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["AgentEvent", "NotificationHub", "EventStream", "Subscriber"]
