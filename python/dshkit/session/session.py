"""`Session`: the append-only log that is the authority for every model-visible input.

A session holds its parts, made with it: the log (`EventLog`, through its store), the surface (its
fold, which also plans `replace` and `compact`), the `Observers` and the `Attachments`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from dshkit import FrozenDict, Message, new_message_id
from dshkit._core import new_event, vouch_plain_append
from dshkit.session.attachments import Attachments
from dshkit.session.errors import SessionClosedError
from dshkit.session._log.event_log import EventLog, now_ms
from dshkit.session.history import History
from dshkit.session._log.events_view import EventsView
from dshkit.session.events import COMPACTION_END, COMPACTION_START, REQUEST_HEADER, Event
from dshkit.session.compactions import compaction_id_of, end_record, open_turn, start_record
from dshkit.session._fork import fork_records, fork_seed, write_seed
from dshkit.session._log.loading import load_log
from dshkit.session._log.formats import LogFormat
from dshkit.session._observers import ErrorHandler, Observer, Observers
from dshkit.session.stores import open_store, resolve_store
from dshkit.session.stores.protocol import SessionStore, check_durability, check_session_id, checked_log_format, log_format_of
from dshkit.session._surface import Surface

_new_event = new_event  # tuple.__new__ (no NamedTuple.__new__ keyword handling), out of the cyclic GC


class Session:
    """An append-only session log and the history derived from it.

    `Session()` lives in memory; `Session.create(path)` starts a durable log and
    `Session.open(path)` loads one, closing a turn that a crash left open. Appends are
    synchronous: when `append` returns, the event is in the store (and on disk, per the
    durability mode) and every observer has seen it.
    """

    def __init__(self) -> None:
        """A new session held in memory only."""
        self._init(store=None, durability="none", read_only=False, session_id=new_message_id(), created_at=now_ms())

    def _init(
        self,
        *,
        store: SessionStore | None,
        durability: str,
        read_only: bool,
        session_id: str,
        created_at: int,
        events: EventLog | None = None,
        surface: Surface | None = None,
        header: Any = None,
    ) -> None:
        """Set up the state; `events`, `surface` (their fold) and `header` come from a loaded log."""
        self._store = store
        self._format: LogFormat = log_format_of(store)
        self._stored_header = header
        self._durability = durability
        self._read_only = read_only
        self._closed = False
        self._id = session_id
        self._created_at = created_at
        self._events = EventLog() if events is None else events
        self._events_view = EventsView(self._events)
        self._next_seq = len(self._events)  # the seq of the next append (only `append` adds events)
        self._pinned_time: int | None = None  # the time every append gets while set (repair's closers)
        self._surface = Surface() if surface is None else surface
        self._lock = threading.RLock()
        self._observers = Observers(self._lock)
        self._attachments = Attachments(None if store is None else store.attachment_backend())
        if not read_only:
            self._attachments.remove_unfinished()  # what writers killed mid-attach left
        self._last_time = max(created_at, self._events[-1].time) if self._events else created_at
        header_seq = self._events.header_seq
        self._header: Event | None = None if header_seq is None else self._events[header_seq]
        self._parent: tuple[str | None, int] = (None, 0) if header is None else (header.get("parent_id"), header.get("seed_length", 0))

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: str = "checkpoint",
        store: SessionStore | None = None,
        session_id: str | None = None,
        format: str = "dshkit",  # noqa: A002 - the contract's name
        header_fields: dict[str, Any] | None = None,
    ) -> Session:
        """Start a new log at `path` (`.jsonl`, `.sqlite`, `.db` or a `postgresql://` URL) or in `store`.

        `session_id` names the new session (default: a fresh id); `header_fields` adds fields to a
        dshkit log's header (a subagent's link to its parent). `format="dsh"` writes the
        original TypeScript harness's format instead (a `.jsonl`, or `.jsonl.zstd` compressed,
        path). `FileExistsError` if the path (or, in a database, the session id) already exists:
        an existing log is never overwritten.
        """
        check_durability(durability)
        check_session_id(session_id)
        store = resolve_store(path, store, session_id, format=format)
        log_format = checked_log_format(store, format)
        session_id = session_id or (None if store is None else store.session_id)
        return cls._start(store, durability, log_format.new_header(now_ms(), session_id, header_fields)[1])

    @classmethod
    def _start(
        cls, store: SessionStore | None, durability: str, header_text: str, events: EventLog | None = None, surface: Surface | None = None
    ) -> Session:
        """A new session with this header (and seed events), created in `store` or in memory."""
        session_id, created_at, header = log_format_of(store).read_header(header_text, "new session header")
        session = cls.__new__(cls)
        if store is not None:
            store.create(header_text, durability)
        else:
            durability = "none"
        session._init(
            store=store, durability=durability, read_only=False, session_id=session_id,
            created_at=created_at, events=events, surface=surface, header=header,
        )
        return session

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: str = "checkpoint",
        store: SessionStore | None = None,
        read_only: bool = False,
        session_id: str | None = None,
    ) -> Session:
        """Load the log at `path` (or in `store`), repairing a turn left open by a crash.

        `read_only=True` loads without repairing, locking or ever writing (for inspection). A log
        of the original TypeScript harness is recognised by its first bytes and continued in its
        own format. `session_id` picks the session of a `postgresql://` URL or of an original
        SQLite database (opened read-only); for a file it is checked against the header.
        Raises `FileNotFoundError` if there is no log and `SessionCorruptError` if it cannot be read.
        """
        check_durability(durability)
        store = resolve_store(path, store, session_id)
        if store is None:
            raise ValueError("Session.open needs a path or a store")
        read_only = read_only or store.read_only
        header_text, records = store.load(durability, read_only=read_only)
        session = cls.__new__(cls)
        try:
            log = load_log(store, header_text, records, read_only=read_only, session_id=session_id)
            session._init(
                store=store, durability=durability, read_only=read_only, session_id=log.session_id,
                created_at=log.created_at, events=log.events, surface=log.surface, header=log.header,
            )
            if not read_only:
                session._repair()
        except BaseException:
            store.close()
            raise
        return session

    def _repair(self) -> None:
        closers = self._format.plan_closers(self._events, self._surface)
        if not closers:
            return
        self._pinned_time = self._events[-1].time  # the closers carry the crash's time, not the opening's
        for event_type, data, source_seqs in closers:  # (a failure here fails `open`: no session to reset)
            self.append(event_type, data, source_event_seqs=source_seqs)
        self._pinned_time = None
        self.sync()

    # -- properties -----------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The log's id (from its header)."""
        return self._id

    @property
    def created_at(self) -> int:
        """When the log was created, in ms since the epoch."""
        return self._created_at

    @property
    def format(self) -> str:
        """The format of the log: `"dshkit"`, or `"dsh"` for the original TypeScript harness's."""
        return self._format.name

    @property
    def stored_header(self) -> Any:
        """The header record the log was opened or created with (frozen; `None` for `Session()` in memory)."""
        return self._stored_header

    @property
    def parent_id(self) -> str | None:
        """The id of the session this one was forked from (`None` if it was not forked)."""
        return self._parent[0]

    @property
    def seed_length(self) -> int:
        """How many events a fork copied from its parent (0 if it was not forked)."""
        return self._parent[1]

    @property
    def store(self) -> SessionStore | None:
        """The store holding the log (`None` in memory)."""
        return self._store

    @property
    def durability(self) -> str:
        """`"always"`, `"checkpoint"` or `"none"`."""
        return self._durability

    @property
    def closed(self) -> bool:
        """True once `close()` was called."""
        return self._closed

    @property
    def events(self) -> EventsView:
        """Every event, in seq order (a read-only, live sequence)."""
        return self._events_view

    @property
    def request_header(self) -> Event | None:
        """The latest `request/header` event, if any."""
        return self._header

    @property
    def attachments(self) -> Attachments:
        """The bytes the log's attachment blocks refer to (`Attachments`, over the store's backend)."""
        return self._attachments

    @property
    def waits_on_network(self) -> bool:
        """True when `sync()` waits on a server (`SessionStore.waits_on_network`): call it off an event loop."""
        return self._store is not None and self._store.waits_on_network

    def attach(self, data: bytes, media_type: str, *, name: str | None = None) -> FrozenDict[Any]:
        """Store `data` beside the log (durably, before any event refers to it) and return the block
        that refers to it: put it in a message's content. `media_type` is a bare ``type/subtype``
        (`ValueError` otherwise); `SessionClosedError` if the session is closed or read-only."""
        if self._closed or self._read_only:
            raise SessionClosedError("cannot attach to a closed or read-only session")
        return self._attachments.attach(data, media_type, name=name)

    # -- derivation -----------------------------------------------------------------------

    def messages(self) -> History:
        """The derived, model-visible history: the same `Message` objects that were appended.

        A `History`: an immutable sequence equal to the tuple of those messages, taken in O(1)
        (appends extend a shared list, a replace re-derives only where it touched). Raises `UnknownEventError` if the log holds an unknown, non-ignorable event.
        """
        self._lock.acquire()  # not `with`: see `append` (taken once per model request)
        try:
            return self._surface.messages()
        finally:
            self._lock.release()

    def message(self, message_id: str) -> Message:
        """The message with this id on the surface (its latest replacement); `KeyError` if none."""
        return self._surface.node(message_id)

    def has_message(self, message_id: str) -> bool:
        """Whether any event ever logged this message id (on the surface or replaced away)."""
        return self._surface.first_seq(message_id) is not None

    def message_event(self, message_id: str) -> Event:
        """The event that put the message with this id on the surface; `KeyError` if none."""
        return self._events[self._surface.event_seq(message_id)]

    def pending_tool_calls(self) -> tuple[str, ...]:
        """Ids of tool calls on the surface that have no result yet, in order."""
        with self._lock:
            return tuple(self._surface.pending_calls())

    # -- appending ------------------------------------------------------------------------

    def append(
        self,
        type: str,  # noqa: A002 - the contract's name
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: Iterable[int] = (),
    ) -> Event:
        """Validate, freeze, number, store, then publish one event; returns it.

        For `user/message` `data` is the `Message`; for `assistant/message` and `tool/result` a
        mapping holding `message` beside the envelope facts. A bad append raises
        (`TypeError`/`ValueError`) and writes nothing; an append from an observer raises
        `RuntimeError`.
        """
        observers = self._observers
        if observers.publishing is not None and observers.publishing == threading.get_ident():
            raise RuntimeError("an observer cannot append to the session it observes (appends are not re-entrant)")
        # acquire/release, not `with`: on 3.11 its lookups and 3-argument __exit__ cost ~1k instructions
        self._lock.acquire()
        try:
            if self._closed or self._read_only:
                raise SessionClosedError("the session is closed" if self._closed else "the session was opened read-only")
            event_type = type
            # A plain event (most of them: no message, surface operation or sources), its data a
            # dict (frozen here) or a FrozenDict, its type's rule proven natively in one call; `None`
            # when not sure: then `admit_new` applies the rule, which names what is wrong.
            plain = surface_op is None and source_event_seqs.__class__ is tuple and not source_event_seqs
            frozen = vouch_plain_append(event_type, data) if plain else None
            if frozen is not None:
                op = None
                source_seqs: tuple[int, ...] = ()
            else:
                frozen, op, source_seqs, vouched = self._surface.admit_new(event_type, data, surface_op, source_event_seqs, self._events)
            seq = self._next_seq
            now = self._pinned_time
            if now is None:
                now = time.time_ns() // 1_000_000  # now_ms(), inline: one call less per append
                if now < self._last_time:
                    now = self._last_time
            event = _new_event(Event, (event_type, seq, now, frozen, op, source_seqs))
            if self._store is not None:
                self._store.append(event, self._format.encode_event(event, self._surface))
            # Committed: from here on nothing may fail and undo the append.
            self._events.append(event)
            self._next_seq = seq + 1
            self._last_time = now
            if op is not None:  # only message events change the surface (prepare_data refused blocking ones)
                self._surface.fold_new(event, vouched)
            elif event_type == REQUEST_HEADER:
                self._header = event
                self._events.header_seq = seq
            entries = observers.entries
            if entries:
                observers.publish(event, entries)
            return event
        finally:
            self._lock.release()

    @property
    def publishing(self) -> bool:
        """True while this session's observers run on the calling thread (an append now raises)."""
        return self._observers.publishing == threading.get_ident()

    def subscribe(self, callback: Observer, *, on_error: ErrorHandler | None = None) -> Callable[[], None]:
        """Call `callback(event)` after every append; returns a function that unsubscribes.

        A failing observer is reported to `on_error(error, event)` if given, else logged on the
        `dshkit.session` logger; it never undoes the append nor stops other observers.
        """
        return self._observers.subscribe(callback, on_error)

    # -- surface changes ------------------------------------------------------------------

    def replace(self, message: Message) -> Event:
        """Replace the surface message with `message.id` by `message` (same id: a rewrite).

        Appends a new event of the replaced one's type (envelope facts kept) whose surface_op
        replaces that node. `ValueError` if the session holds no message with that id on its
        surface, or if the replacement changes more than the content.
        """
        if not isinstance(message, Message):
            raise TypeError(f"replace needs a Message, not {type(message).__name__}")
        with self._lock:
            change = self._surface.plan_replace(message, self._events)
            return self.append(change.type, change.data, surface_op=change.surface_op, source_event_seqs=change.source_event_seqs)

    def compact(self, start_id: str, end_id: str, summary: Message) -> Event:
        """Replace the surface from `start_id` to `end_id` (both included) with `summary`.

        `summary` is a new user message (its id must not be in the session). The range must not
        separate a tool call from its result. Appends `compaction/start`, the summary's
        `user/message` (citing the start and every replaced event) and `compaction/end`, the
        records of `dshkit.session.compactions` (`compaction_id_of`: a summary whose source is the
        `compact` plugin must name its compaction in `source["compaction_id"]`, as the original
        harness requires; any other summary gets a new id), and returns the summary's event.
        Every replaced event stays in the log.
        """
        if not isinstance(summary, Message):
            raise TypeError(f"compact needs a Message summary, not {type(summary).__name__}")
        compaction_id = compaction_id_of(summary)  # a checkpoint naming no compaction is refused before anything is written
        with self._lock:
            change = self._surface.plan_compaction(start_id, end_id, summary, self._events)
            turn = open_turn(self._events)
            begin = self.append(COMPACTION_START, start_record(compaction_id, turn))
            event = self.append(
                change.type, change.data, surface_op=change.surface_op, source_event_seqs=[begin.seq, *change.source_event_seqs]
            )
            self.append(COMPACTION_END, end_record(compaction_id, turn))
            return event

    def fork(
        self, at: int | str | None = None, *, dest: str | os.PathLike[str] | None = None, session_id: str | None = None
    ) -> Session:
        """A new session whose log begins with this one's events up to a turn boundary.

        `at` is a message id or an event seq that ends a turn (`None`: now, which must be between
        turns); `ValueError` otherwise. `dest` is a path or URL of any store (default: in memory).
        The child's header records `parent_id` and `seed_length`; its messages keep their ids.
        """
        with self._lock:
            records = fork_records(self._events, self._surface.first_seq, at)
        seed = fork_seed(records, parent_id=self._id, session_id=session_id, created_at=now_ms())
        store = open_store(dest, session_id=seed.session_id) if dest is not None else None
        child = Session._start(store, self._durability, seed.header, seed.events, seed.surface)
        write_seed(child, seed, self.attachments)
        return child

    # -- durability and lifetime ----------------------------------------------------------

    def sync(self) -> None:
        """Make every event appended so far durable (the `"checkpoint"` durability point)."""
        self._lock.acquire()  # not `with`: see `append` (an agent syncs once a step)
        try:
            if self._closed:
                raise SessionClosedError("the session is closed")
            if self._store is not None and not self._read_only:
                self._store.sync()
        finally:
            self._lock.release()

    def close(self) -> None:
        """Sync and release the store. Idempotent; events and messages stay readable."""
        with self._lock:
            if self._closed:
                return
            try:
                if self._store is not None and not self._read_only:
                    self._store.sync()
            finally:
                self._closed = True
                if self._store is not None:
                    self._store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f" store={self._store!r}" if self._store is not None else " in memory"
        return f"<Session {self._id}{where} events={len(self._events)}{' closed' if self._closed else ''}>"
