"""The live AG-UI event stream of a session: a read-only tail of its log, resumable by event id.

The API process never writes a session: it follows the log the worker writes. One `LogWatcher` per
app polls the newest seq of every session someone is watching (one query per interval on
PostgreSQL, a read-only `max(seq)` per SQLite file) and wakes their streams; a woken stream
re-reads its log read-only and sends the events after its cursor. The latency a browser sees
beyond the worker's commit is at most one polling interval (`poll_interval`, 50 ms by default).

SSE ids: ``"<seq>"`` for a log event that maps to one AG-UI event, ``"<seq>.<k>"`` for the k-th
of several. A client reconnecting with `Last-Event-ID` gets exactly the events after that id.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ag_ui.encoder import EventEncoder
from sse_starlette import ServerSentEvent

from dshkit.serve.agui import agui_events
from dshkit.serve.errors import ApiError
from dshkit.serve.places import SessionPlace

_EVENT_ID = re.compile(r"(\d{1,15})(?:\.(\d{1,6}))?")
_ENCODER = EventEncoder()
T = TypeVar("T")


def resume_cursor(last_event_id: str | None) -> tuple[int, int]:
    """Where a stream starts: `(seq, sub-index)` of the first event not yet seen; 400 on a bad id."""
    if last_event_id is None or last_event_id == "":
        return 0, 0
    match = _EVENT_ID.fullmatch(last_event_id.strip())
    if match is None:
        raise ApiError(400, "bad_last_event_id", f"Last-Event-ID {last_event_id!r} is not an event id of this stream ('<seq>' or '<seq>.<k>')")
    seq, sub = int(match.group(1)), match.group(2)
    return (seq + 1, 0) if sub is None else (seq, int(sub) + 1)


def encode(event: Any, event_id: str) -> ServerSentEvent:
    """One AG-UI event as an SSE event with its id (the data is `EventEncoder`'s JSON)."""
    frame = _ENCODER.encode(event)
    return ServerSentEvent(data=frame[len("data: "):].rstrip("\n"), id=event_id)


class LogWatcher:
    """Wakes the streams of sessions whose logs grew (one polling task for the whole app)."""

    def __init__(self, place: SessionPlace, poll_interval: float) -> None:
        self._place = place
        self._interval = poll_interval
        self._latest: dict[str, int] = {}
        self._waiters: dict[str, set[asyncio.Future[int]]] = {}
        self._task: asyncio.Task[None] | None = None
        # The streams' re-reads of their logs run on threads of their own: on the loop's default
        # pool they queued in front of the requests' short calls (owner lookups, enqueues).
        self._reads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dshkit-stream-read")

    async def read(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` on one of the streams' reading threads."""
        return await asyncio.get_running_loop().run_in_executor(self._reads, function, *args)

    async def wait_beyond(self, session_id: str, seq: int, timeout: float) -> None:
        """Return once the session's log holds an event after `seq` (or after `timeout` seconds)."""
        if self._latest.get(session_id, -1) > seq:
            return
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(session_id, set()).add(future)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll())
        try:
            await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            waiting = self._waiters.get(session_id)
            if waiting is not None:
                waiting.discard(future)
                if not waiting:
                    del self._waiters[session_id]
                    self._latest.pop(session_id, None)

    async def _poll(self) -> None:
        while self._waiters:
            try:
                latest = await asyncio.to_thread(self._place.latest_seqs, list(self._waiters))
            except Exception:  # noqa: BLE001 - a database blip: poll again after the interval
                latest = {}
            for session_id, seq in latest.items():
                if seq > self._latest.get(session_id, -1):
                    self._latest[session_id] = seq
                    for future in self._waiters.get(session_id, ()):
                        if not future.done():
                            future.set_result(seq)
            await asyncio.sleep(self._interval)
        await asyncio.to_thread(self._place.latest_seqs, [])  # nobody watches: let go of what it kept open

    def close(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
        self._reads.shutdown(wait=False, cancel_futures=True)


async def session_events(
    place: SessionPlace, watcher: LogWatcher, session_id: str, cursor: tuple[int, int], *, idle_timeout: float = 15.0
) -> AsyncIterator[ServerSentEvent]:
    """The session's AG-UI events from `cursor` on, forever (the client closes the stream)."""
    next_seq, skip = cursor
    while True:
        batch, next_seq = await watcher.read(_read_after, place, session_id, next_seq, skip)
        skip = 0
        for item in batch:
            yield item
        await watcher.wait_beyond(session_id, next_seq - 1, idle_timeout)


def _read_after(place: SessionPlace, session_id: str, first_seq: int, skip: int) -> tuple[list[ServerSentEvent], int]:
    """The SSE events of log events `first_seq`.. (skipping `skip` sub-events of the first), and the next seq."""
    out: list[ServerSentEvent] = []
    with place.read(session_id) as session:
        events = session.events
        end = len(events)
        for seq in range(first_seq, end):
            mapped = agui_events(session_id, events[seq])
            for index, item in enumerate(mapped):
                if seq == first_seq and index < skip:
                    continue
                out.append(encode(item, str(seq) if len(mapped) == 1 else f"{seq}.{index}"))
    return out, max(end, first_seq)
