"""The surface: the fold of message events into the model-visible history, kept incrementally.

Every message event puts its `Message` on the surface: `"append"` adds a node at the end,
`{"op": "replace", "start": i, "end": j}` puts it in place of nodes `i..j-1`. An assistant
message without visible content (a max-tokens stop that produced nothing) is logged but is no
node: derivation skips it. Positions are therefore indices into `messages()`.

`Surface.check` holds the surface rules an append must pass (unique ids, tool calls answered before
the conversation moves on, replacements that keep an id keep everything but the content, range
replacements that never split a tool call from its result); `Surface.fold` is the fold itself, the
one place every reader (an append, opening a log, `derive_messages`, `dshkit log verify`) folds an
event, cheap enough to run once per event when a large log is loaded. An event of an unknown type
not marked ignorable is no fold error: it blocks derivation, so `messages()` refuses from then on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dshkit import FrozenDict, Message
from dshkit._core import SurfaceState, vouch_new_append

from dshkit.session.errors import UnknownEventError
from dshkit.session.history import History
from dshkit.session.events import (
    ASSISTANT_MESSAGE,
    KNOWN_EVENT_TYPES,
    MESSAGE_EVENT_TYPES,
    SURFACE_APPEND,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    blocks_derivation,
    check_plain_data,
    freeze_mapping,
    prepare_data,
    prepare_source_seqs,
    prepare_surface_op,
    replace_op,
)


def is_model_visible(message: Message) -> bool:
    """False for an assistant message whose blocks are all empty text or reasoning."""
    if message.role != "assistant":
        return True
    for block in message.content:
        block_type = block.get("type")
        if (block_type != "text" and block_type != "reasoning") or block.get("text"):
            return True
    return False


def _call_ids(message: Message) -> tuple[str, ...]:
    calls = message.tool_calls
    return tuple([str(call.get("id")) for call in calls]) if calls else ()


def _pair(state: SurfaceState, message: Message, position: int) -> None:
    """Pair the tool calls of the node `message` at `position`, or the call it answers."""
    if message.role == "assistant":
        pending, pairs = state.pending, state.pairs
        for call_id in _call_ids(message):
            pending[call_id] = len(pairs)
            pairs.append((position, None, call_id))
    elif message.source["kind"] == "tool":
        index = state.pending.pop(message.source.get("call_id"), None)  # type: ignore[arg-type]
        if index is not None:
            # Replaced, not changed: a tuple of atoms the cyclic GC stops tracking (issue 37).
            call_position, _, call_id = state.pairs[index]
            state.pairs[index] = (call_position, position, call_id)


class SurfaceChange(NamedTuple):
    """The message event that carries out a `replace` or a compaction: what `Session.append` takes."""

    type: str
    data: Any
    surface_op: Any
    source_event_seqs: tuple[int, ...]


class Surface:
    """The derived history of one log, updated one event at a time."""

    __slots__ = ("_state", "_blocked", "_cache")

    def __init__(self) -> None:
        # The one owner of what the fold builds (nodes, their seqs and positions, the ids seen, the
        # pairing of tool calls): a native object this class and the native fold both edit.
        self._state = SurfaceState()
        self._state.paired = False  # the pairing is built when first asked for: most folds never need it
        # Likewise the positions by id: an open folds every message and most never look one up.
        self._state.positions_current = False
        self._blocked: tuple[int, str] | None = None  # first unknown, non-ignorable event
        self._cache: History | None = None

    # -- derivation -------------------------------------------------------------------------

    def messages(self) -> History:
        """The model-visible history: the same `Message` objects that were appended (O(1))."""
        if self._blocked is not None:
            seq, event_type = self._blocked
            raise UnknownEventError(
                f"cannot derive history: event {seq} has unknown type {event_type!r} and is not marked ignorable"
            )
        cache = self._cache
        if cache is None:
            # A view of the node list: later appends do not touch it, a replace copies the list.
            nodes = self._state.nodes
            cache = self._cache = History._view(nodes, len(nodes))
        return cache

    def fold(self, event: Event) -> None:
        """Fold one event of the log, in seq order.

        A message event puts its message on the surface; an unknown type not marked ignorable
        blocks derivation; every other event leaves the surface as it is. Raises `ValueError` only
        for a surface operation that is no operation or a range outside the surface.
        """
        event_type, seq, _, data, op, _ = event
        if event_type not in MESSAGE_EVENT_TYPES:
            # The known-type test first keeps the common case to one set lookup (no call).
            if event_type not in KNOWN_EVENT_TYPES and self._blocked is None and blocks_derivation(event_type, data):
                self._blocked = (seq, event_type)
            return
        message: Message = data if event_type == USER_MESSAGE else data["message"]
        if op == SURFACE_APPEND:
            state = self._state
            message_id = message.id
            state.seen.setdefault(message_id, seq)
            if message.role == "assistant" and not is_model_visible(message):
                return
            nodes = state.nodes
            position = len(nodes)
            nodes.append(message)
            state.node_seqs.append(seq)
            if state.positions_current:
                state.positions[message_id] = position
            self._cache = None
            if state.paired:
                _pair(state, message, position)
            return
        self._replace(message, seq, op)

    def fold_appends(
        self, seqs: list[int] | tuple[int, ...], tags: list[Any] | tuple[Any, ...], messages: list[Any] | dict[int, Any], start: int
    ) -> int:
        """Admit and fold a run of stored appends the native pass vouched for, from `seqs[start]` on.

        `decode_records` (`rust/log/message_vouch.rs`) proved each passes every append rule that does
        not depend on the log before it; what is left of `_check_append` (the id not yet logged,
        the pending tool calls) is checked here, then `fold`'s append, one append after the other,
        in one native loop (`SurfaceState.fold_appends`, `rust/log/surface_fold.rs`) on this surface's
        state. `messages[seq]` is event `seq`'s `Message` (a list indexed by seq or a
        dict keyed by seq); `tags[i]` is what it does to the surface: `None` a node, a tuple of
        call ids a node with calls, a str a node answering that call, `False` no node.
        Returns the index of the first append that breaks a rule (`len(seqs)` if none), nothing of
        it folded: the caller takes that one the full way (`admit`, `fold`), which names the rule
        it breaks.
        """
        state = self.pairing()
        self._cache = None
        return state.fold_appends(seqs, tags, messages, start)

    def fold_new(self, event: Event, vouched: Any) -> None:
        """Fold a message event `admit_new` admitted (`vouched` is what it said of it)."""
        if vouched is None:
            self.fold(event)
            return
        seq = event.seq
        # A run of one: its rules were checked by `admit_new` and nothing changed since.
        self.fold_appends((seq,), (vouched[2],), {seq: vouched[1]}, 0)

    def _replace(self, message: Message, seq: int, op: Any) -> None:
        if not isinstance(op, Mapping) or op.get("op") != "replace":
            raise ValueError(f"unknown surface operation {op!r}")
        start, end = op["start"], op["end"]
        state = self._state
        nodes = state.nodes
        if not (type(start) is int and type(end) is int and 0 <= start < end <= len(nodes)):
            raise ValueError(f"replace range {start}..{end} is outside the surface (0..{len(nodes)})")
        state.seen.setdefault(message.id, seq)
        nodes = state.nodes = nodes.copy()  # histories handed out share the old list: never edit it
        visible = is_model_visible(message)
        if visible and end - start == 1 and nodes[start].id == message.id:
            nodes[start] = message
            state.node_seqs[start] = seq
        else:
            nodes[start:end] = [message] if visible else []
            state.node_seqs[start:end] = [seq] if visible else []
            state.positions_current = False
        self._cache = None
        state.paired = False

    # -- lookups ----------------------------------------------------------------------------

    def position(self, message_id: str) -> int | None:
        """The surface position of the message with this id, `None` if it is not on the surface."""
        return self._positions().get(message_id)

    def node(self, message_id: str) -> Message:
        """The message with this id on the surface (its latest replacement); `KeyError` if none."""
        return self._state.nodes[self._positions()[message_id]]

    def event_seq(self, message_id: str) -> int:
        """The seq of the event that put the message with this id on the surface; `KeyError` if none."""
        return self._state.node_seqs[self._positions()[message_id]]

    def _positions(self) -> dict[str, int]:
        """Message id -> surface position, built on the first lookup after an open or a replace
        (from then on every append keeps it current)."""
        state = self._state
        positions = state.positions
        if not state.positions_current:
            positions.clear()
            positions.update({node.id: position for position, node in enumerate(state.nodes)})
            state.positions_current = True
        return positions

    def event_seqs(self, start: int, end: int) -> list[int]:
        """The seqs of the events that put surface positions `start..end-1` on the surface."""
        return self._state.node_seqs[start:end]

    def first_seq(self, message_id: str) -> int | None:
        """The seq of the first event that logged this message id (on the surface or replaced away)."""
        return self._state.seen.get(message_id)

    def pairing(self) -> SurfaceState:
        """The state with its pairing current (which position answers which tool call: `pairs`,
        `pending`), rebuilt lazily after a replace."""
        state = self._state
        if not state.paired:
            state.pending.clear()
            state.pairs.clear()
            for position, message in enumerate(state.nodes):
                _pair(state, message, position)
            state.paired = True
        return state

    def pending_calls(self) -> dict[str, int]:
        """Call ids of surface tool calls without a result -> position of their assistant message."""
        pairing = self.pairing()
        return {call_id: pairing.pairs[index][0] for call_id, index in pairing.pending.items()}

    def splits_tool_pair(self, start: int, end: int) -> str | None:
        """The id of a tool call the range `start..end-1` would separate from its result, if any."""
        for assistant_position, result_position, call_id in self.pairing().pairs:
            call_inside = start <= assistant_position < end
            result_inside = result_position is not None and start <= result_position < end
            if call_inside != result_inside or (call_inside and result_position is None):
                return call_id
        return None

    # -- surface changes --------------------------------------------------------------------

    def plan_replace(self, message: Message, events: Sequence[Event]) -> SurfaceChange:
        """The event replacing the surface node with `message.id` by `message` (a rewrite, same
        id): of the replaced one's type, its envelope facts kept; `ValueError` if no such node."""
        position = self.position(message.id)
        if position is None:
            if self.first_seq(message.id) is not None:
                raise ValueError(f"message {message.id} is no longer on the surface (it was replaced by a range)")
            raise ValueError(f"the session holds no message with id {message.id}")
        old = events[self.event_seq(message.id)]
        data = message if old.type == USER_MESSAGE else {**old.data, "message": message}
        return SurfaceChange(old.type, data, replace_op(position, position + 1), (old.seq,))

    def plan_compaction(self, start_id: str, end_id: str, summary: Message, events: Sequence[Event]) -> SurfaceChange:
        """The summary's event replacing the messages `start_id..end_id` (both on the surface, in
        order); `ValueError` naming what is wrong (the summary's own rules included)."""
        positions = []
        for name, message_id in (("start_id", start_id), ("end_id", end_id)):
            position = self.position(message_id)
            if position is None:
                raise ValueError(f"{name}: the session holds no message {message_id!r} on its surface")
            positions.append(position)
        start, last = positions
        if start > last:
            raise ValueError(f"start_id {start_id} comes after end_id {end_id} on the surface")
        if self.first_seq(summary.id) is not None:
            raise ValueError(f"summary {summary.id} is already in the session: a summary is a new message with a new id")
        op = replace_op(start, last + 1)
        self.check(USER_MESSAGE, prepare_data(USER_MESSAGE, summary), op, events)
        return SurfaceChange(USER_MESSAGE, summary, op, tuple(self.event_seqs(start, last + 1)))

    # -- surface rules ----------------------------------------------------------------------

    def admit(
        self, event_type: Any, data: Any, surface_op: Any, source_event_seqs: Any, events: Sequence[Event]
    ) -> tuple[Any, Any, tuple[int, ...]]:
        """Apply every append rule to the event that would follow `events`: `(data, surface_op, source seqs)`, frozen.

        The one gate of the log: `Session.append` passes each new event through it and
        `Session.open` each stored one (a log is held to the rules it was written under).
        Raises `TypeError`/`ValueError` naming the rule.
        """
        plain = type(event_type) is str and event_type and event_type not in MESSAGE_EVENT_TYPES
        if (
            plain
            and surface_op is None
            and not source_event_seqs
            and (type(data) is FrozenDict or type(source_event_seqs) is tuple)
        ):
            # No message, no surface operation, nothing cited (most events): what prepare_data
            # does for such an event, without its generic checks. Already frozen data (a stored
            # event) only has its fields checked.
            frozen = data if type(data) is FrozenDict else freeze_mapping(event_type, data)
            check_plain_data(event_type, frozen)
            return frozen, None, ()
        frozen = prepare_data(event_type, data)
        op = prepare_surface_op(event_type, surface_op)
        source_seqs = prepare_source_seqs(source_event_seqs, len(events))
        if op is None and source_seqs:
            raise ValueError(f"{event_type} events carry no source_event_seqs (only message events do)")
        if op is not None:
            self.check(event_type, frozen, op, events)
        return frozen, op, source_seqs

    def admit_new(
        self, event_type: Any, data: Any, surface_op: Any, source_event_seqs: Any, events: Sequence[Event]
    ) -> tuple[Any, Any, tuple[int, ...], Any]:
        """`admit` for a new event, and what `fold_new` needs to know of it.

        A message append the native pass vouches for (`vouch_new_append`: every rule that does not
        depend on the log) has only the stateful rest of `_check_append` checked here; anything
        else goes through `admit`. Returns `admit`'s triple and the vouch (`None` if none).
        """
        vouched = vouch_new_append(event_type, data, surface_op, source_event_seqs, len(events))
        if vouched is None:
            return (*self.admit(event_type, data, surface_op, source_event_seqs, events), None)
        self._check_logged_and_pending(event_type, vouched[1])
        return vouched[0], SURFACE_APPEND, source_event_seqs, vouched

    def check(self, event_type: str, data: Any, op: Any, events: Sequence[Event]) -> None:
        """Raise `ValueError` if appending this message event would break a surface rule."""
        message: Message = data if event_type == USER_MESSAGE else data["message"]
        if op == SURFACE_APPEND:
            self._check_append(event_type, message)
        else:
            self._check_replace(event_type, data, message, op["start"], op["end"], events)

    def _check_append(self, event_type: str, message: Message) -> None:
        self._check_logged_and_pending(event_type, message)
        if event_type == ASSISTANT_MESSAGE:
            call_ids = _call_ids(message)
            if len(set(call_ids)) != len(call_ids):
                raise ValueError(f"assistant message {message.id} repeats a tool call id: {call_ids}")

    def _check_logged_and_pending(self, event_type: str, message: Message) -> None:
        """The stateful append rules: an id not logged before, tool calls answered before the conversation moves on."""
        seen = self._state.seen
        if message.id in seen:
            raise ValueError(
                f"message {message.id} is already in the session (event {seen[message.id]}); "
                "an id names one message: use session.replace to change its content"
            )
        pending = self.pairing().pending
        if event_type == TOOL_RESULT:
            call_id = message.source.get("call_id")
            if call_id not in pending:
                raise ValueError(f"tool/result {message.id} answers call {call_id!r}, which is no pending tool call on the surface")
            return
        if pending:
            raise ValueError(
                f"cannot append {event_type} {message.id}: tool call(s) {', '.join(map(repr, pending))} "
                "have no tool/result yet (a tool call must be answered before the conversation moves on)"
            )

    def _check_replace(
        self, event_type: str, data: Any, message: Message, start: int, end: int, events: Sequence[Event]
    ) -> None:
        state = self._state
        nodes = state.nodes
        if not 0 <= start < end <= len(nodes):
            raise ValueError(f"replace range {start}..{end} is outside the surface (positions 0..{len(nodes) - 1})")
        if message.id in state.seen:
            if end - start != 1 or nodes[start].id != message.id:
                where = self.position(message.id)
                place = f"surface position {where}" if where is not None else "no surface position"
                raise ValueError(
                    f"replacement {message.id} keeps an existing id ({place}), so it must replace exactly "
                    f"that one node, not range {start}..{end}; a new message needs a new id"
                )
            self._check_rewrite(event_type, data, message, events[state.node_seqs[start]])
            return
        if event_type != USER_MESSAGE:
            raise ValueError(f"a range replacement with a new id must be a user/message (a summary), not {event_type}")
        split = self.splits_tool_pair(start, end)
        if split is not None:
            raise ValueError(f"replace range {start}..{end} would separate tool call {split!r} from its result")

    @staticmethod
    def _check_rewrite(event_type: str, data: Any, message: Message, old_event: Event) -> None:
        old: Message = old_event.message  # type: ignore[assignment]
        if old_event.type != event_type:
            raise ValueError(f"message {message.id} was logged as {old_event.type}; its replacement must be one too, not {event_type}")
        if message.role != old.role or message.source != old.source:
            raise ValueError(f"replacement of {message.id} must keep its role and source (only the content may change)")
        if event_type == ASSISTANT_MESSAGE and _call_ids(message) != _call_ids(old):
            raise ValueError(f"replacement of assistant message {message.id} must keep its tool calls {_call_ids(old)}")
        if event_type == TOOL_RESULT:
            new_block = next(b for b in message.content if b.get("type") == "tool_result")
            old_block = next(b for b in old.content if b.get("type") == "tool_result")
            if new_block.get("is_error") != old_block.get("is_error"):
                raise ValueError(f"replacement of tool result {message.id} must keep its error flag")
        if event_type != USER_MESSAGE:
            changed = sorted(
                key for key in set(data) | set(old_event.data) if key != "message" and data.get(key) != old_event.data.get(key)
            )
            if changed:
                raise ValueError(f"replacement of {message.id} must keep the envelope facts; changed: {', '.join(changed)}")
