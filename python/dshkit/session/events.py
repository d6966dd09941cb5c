"""Events of the session log: the frozen `Event` record, the known types, and append validation.

An `Event` is a named tuple: immutable, cheap to build when a 100,000-event log is loaded, and
its fields are exactly the contract's (`type`, `seq`, `time`, `data`, `surface_op`,
`source_event_seqs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from dshkit import FrozenDict, Message, freeze
from dshkit._core import set_plain_rules

USER_MESSAGE = "user/message"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_RESULT = "tool/result"
TURN_START = "turn/start"
TURN_END = "turn/end"
STEP_START = "step/start"
STEP_END = "step/end"
ASSISTANT_CHUNK = "assistant/chunk"
TOOL_CALL = "tool/call"
REQUEST_HEADER = "request/header"
INBOX_SPLICED = "agent/inbox/spliced"
COMPACTION_START = "compaction/start"
COMPACTION_SUMMARY = "compaction/summary"
COMPACTION_PRUNE = "compaction/prune"
COMPACTION_END = "compaction/end"
APPROVAL_ASKED = "approval/asked"
APPROVAL_DECIDED = "approval/decided"
APPROVAL_POLICY = "approval/policy"

MESSAGE_EVENT_TYPES = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
"""The event types that carry a `Message` and a surface operation."""

HEADER_REASONS = frozenset({"initial", "resume", "change"})
SURFACE_APPEND = "append"


class Event(NamedTuple):
    """One immutable entry of the log.

    `surface_op` is `"append"` or `{"op": "replace", "start": i, "end": j}` (surface positions,
    `end` exclusive) for the message-carrying types and `None` for every other type;
    `source_event_seqs` lists the seqs of the events this one derives from.
    """

    type: str
    seq: int
    time: int
    data: Any
    surface_op: Any = None
    source_event_seqs: tuple[int, ...] = ()

    @property
    def message(self) -> Message | None:
        """The carried `Message` for the three message types, else `None`."""
        if self.type == USER_MESSAGE:
            return self.data  # type: ignore[no-any-return]
        if self.type in MESSAGE_EVENT_TYPES:
            return self.data["message"]  # type: ignore[no-any-return]
        return None


def latest_header(events: Sequence[Event]) -> Event | None:
    """The last `request/header` event of `events` (the one a request is built on), if any."""
    for index in range(len(events) - 1, -1, -1):
        if events[index].type == REQUEST_HEADER:
            return events[index]
    return None


def is_ignorable(event_type: str, data: object) -> bool:
    """Whether derivation may skip an event of an unknown type: its data says `"ignorable": true`."""
    return isinstance(data, Mapping) and data.get("ignorable") is True


def blocks_derivation(event_type: str, data: object) -> bool:
    """Whether an event stops derivation: its type is unknown and it is not marked ignorable.

    The one rule behind refusing such an event: `prepare_data` refuses to append it, the surface
    fold (`Surface.fold`) records it so `messages()` raises `UnknownEventError`, and
    `dshkit log verify` reports it.
    """
    return event_type not in KNOWN_EVENT_TYPES and not is_ignorable(event_type, data)


def replace_op(start: int, end: int) -> FrozenDict[Any]:
    """The surface operation replacing surface positions `start` (inclusive) to `end` (exclusive)."""
    return FrozenDict(op="replace", start=start, end=end)


def _where(event_type: str, key: str | None = None) -> str:
    return f"{event_type} data" if key is None else f"{event_type} data[{key!r}]"


def _require_int(event_type: str, data: Mapping[str, Any], key: str, *, optional: bool = False) -> None:
    if key not in data:
        if optional:
            return
        raise ValueError(f"{_where(event_type)} needs {key!r} (an int)")
    value = data[key]
    if type(value) is not int:
        raise TypeError(f"{_where(event_type, key)} must be an int, not {type(value).__name__}")


def _require_str(event_type: str, data: Mapping[str, Any], key: str) -> None:
    value = data.get(key)
    if not isinstance(value, str):
        raise TypeError(f"{_where(event_type, key)} must be a str, not {type(value).__name__}")


def _check_message(event_type: str, message: object, *, role: str) -> Message:
    if not isinstance(message, Message):
        raise TypeError(
            f"{event_type} needs a Message (create one with dshkit.create_*_message or import one "
            f"with dshkit.freeze_message), not {type(message).__name__}"
        )
    if message.role != role:
        raise ValueError(f"{event_type} needs a {role}-role message, not role {message.role!r}")
    kind = message.source["kind"]
    if event_type == TOOL_RESULT:
        if kind != "tool":
            raise ValueError(f"tool/result needs a message with source kind 'tool', not {kind!r}")
        call_id = message.source.get("call_id")
        blocks = [block for block in message.content if block.get("type") == "tool_result"]
        if len(blocks) != 1 or blocks[0].get("tool_call_id") != call_id:
            raise ValueError(
                f"tool/result message {message.id} must hold exactly one tool_result block "
                f"for its source call_id {call_id!r}"
            )
    elif kind == "tool":
        raise ValueError(f"a message with source kind 'tool' belongs in a tool/result event, not {event_type}")
    elif kind in _NOT_MODEL_KINDS if role == "assistant" else kind == "model":
        # Known kinds name who produced a message; unknown kinds pass through (sources are extensible).
        raise ValueError(f"{event_type} {message.id} has role {role!r} but source kind {kind!r}")
    return message


_NOT_MODEL_KINDS = frozenset({"user", "plugin"})


def _check_envelope(event_type: str, data: Mapping[str, Any]) -> None:
    if type(data.get("turn", 0)) is not int or type(data.get("step", 0)) is not int:  # the usual case in one test
        _require_int(event_type, data, "turn", optional=True)
        _require_int(event_type, data, "step", optional=True)
    if "interrupted" in data and type(data["interrupted"]) is not bool:
        raise TypeError(f"{_where(event_type, 'interrupted')} must be a bool")
    if "usage" in data and type(data["usage"]) is not FrozenDict and not isinstance(data["usage"], Mapping):
        raise TypeError(f"{_where(event_type, 'usage')} must be a mapping")
    if "error" in data and data["error"] is not None:
        error = data["error"]
        if not isinstance(error, Mapping):
            raise TypeError(f"{_where(event_type, 'error')} must be a mapping with 'name' and 'code'")
        _require_str(event_type + " error", error, "name")
        _require_str(event_type + " error", error, "code")


def freeze_mapping(event_type: str, data: object) -> FrozenDict[Any]:
    """`data` deep-frozen if it is a mapping (frozen data as is), else `TypeError` naming the event type."""
    if type(data) is FrozenDict:  # a stored event's data, frozen when read: nothing to do
        return data
    if type(data) is not dict and not isinstance(data, Mapping):
        raise TypeError(f"{_where(event_type)} must be a mapping, not {type(data).__name__}")
    return freeze(data)  # type: ignore[no-any-return]


def _check_reason(event_type: str, data: FrozenDict[Any]) -> None:
    reason = data.get("reason")
    if (type(reason) is not FrozenDict and not isinstance(reason, Mapping)) or not isinstance(reason.get("kind"), str):
        raise TypeError(f"{_where(event_type, 'reason')} must be a mapping with a str 'kind'")


def _check_inbox(event_type: str, data: FrozenDict[Any]) -> None:
    inserted = data.get("inserted", ())
    if not isinstance(inserted, tuple) or not all(isinstance(item, Message) for item in inserted):
        raise TypeError(f"{_where(event_type, 'inserted')} must be a list of Message values")


def _check_header(event_type: str, data: FrozenDict[Any]) -> None:
    header = data.get("header")
    if type(header) is not FrozenDict and not isinstance(header, Mapping):
        raise TypeError(f"{_where(event_type, 'header')} must be a mapping (the full request snapshot)")
    if data.get("reason") not in HEADER_REASONS:
        raise ValueError(
            f"{_where(event_type, 'reason')} must be one of {sorted(HEADER_REASONS)}, not {data.get('reason')!r}"
        )


class PlainRule(NamedTuple):
    """The field rule of a plain event type (one that carries no message), checked in this order:
    the `int` fields, the `str` fields, a `reason` mapping with a `str` `kind`, then `other`.

    A rule without `other` is also proven natively (`vouch_plain_append` on append, the record
    scan on open), from this very table (`set_plain_rules`); `other` is a rule only Python checks.
    """

    ints: tuple[str, ...] = ()
    strs: tuple[str, ...] = ()
    reason_with_kind: bool = False
    other: Callable[[str, FrozenDict[Any]], None] | None = None

    def check(self, event_type: str, data: FrozenDict[Any]) -> None:
        """Raise `TypeError`/`ValueError` naming the first field of `data` breaking this rule."""
        for key in self.ints:
            if type(data.get(key)) is not int:
                _require_int(event_type, data, key)
        for key in self.strs:
            _require_str(event_type, data, key)
        if self.reason_with_kind:
            _check_reason(event_type, data)
        if self.other is not None:
            self.other(event_type, data)


_TURN = ("turn",)
_STEP = ("turn", "step")

APPROVAL_OUTCOMES = frozenset({"allowed_once", "rejected", "cancelled", "unavailable"})
APPROVAL_POLICIES = frozenset({"always", "ask", "never"})


# An `approval/*` record another harness wrote in a shape dshkit does not read is presented marked
# `ignorable` (dshkit.session.dsh.vocabulary): kept as it is, unchecked, and left out of every fold.


def _check_approval_asked(event_type: str, data: FrozenDict[Any]) -> None:
    if is_ignorable(event_type, data):
        return
    for key in ("id", "tool"):
        _require_str(event_type, data, key)
    for key in ("call_id", "arguments", "reason"):  # the original harness may leave them out
        if data.get(key) is not None:
            _require_str(event_type, data, key)


def _check_approval_decided(event_type: str, data: FrozenDict[Any]) -> None:
    if is_ignorable(event_type, data):
        return
    _require_str(event_type, data, "id")
    if data.get("outcome") not in APPROVAL_OUTCOMES:
        raise ValueError(
            f"{_where(event_type, 'outcome')} must be one of {sorted(APPROVAL_OUTCOMES)}, not {data.get('outcome')!r}"
        )


def _check_approval_policy(event_type: str, data: FrozenDict[Any]) -> None:
    if is_ignorable(event_type, data):
        return
    if data.get("policy") not in APPROVAL_POLICIES:
        raise ValueError(
            f"{_where(event_type, 'policy')} must be one of {sorted(APPROVAL_POLICIES)}, not {data.get('policy')!r}"
        )
    if "tool" in data:
        _require_str(event_type, data, "tool")


PLAIN_EVENT_RULES: Mapping[str, PlainRule] = {
    TURN_START: PlainRule(ints=_TURN),
    TURN_END: PlainRule(ints=_TURN, reason_with_kind=True),
    STEP_START: PlainRule(ints=_STEP),
    STEP_END: PlainRule(ints=_STEP),
    ASSISTANT_CHUNK: PlainRule(ints=_STEP),
    TOOL_CALL: PlainRule(ints=_STEP, strs=("call_id", "name", "arguments")),
    REQUEST_HEADER: PlainRule(other=_check_header),
    INBOX_SPLICED: PlainRule(other=_check_inbox),
    COMPACTION_START: PlainRule(),
    COMPACTION_SUMMARY: PlainRule(),
    COMPACTION_PRUNE: PlainRule(),
    COMPACTION_END: PlainRule(),
    APPROVAL_ASKED: PlainRule(other=_check_approval_asked),
    APPROVAL_DECIDED: PlainRule(other=_check_approval_decided),
    APPROVAL_POLICY: PlainRule(other=_check_approval_policy),
}
"""The one table of the plain event types and their field rules: what `check_plain_data` applies,
and, for each rule without `other`, what the native passes prove (given to them just below)."""

PLAIN_DATA_CHECKS: Mapping[str, Callable[[str, FrozenDict[Any]], None]] = {
    event_type: rule.check for event_type, rule in PLAIN_EVENT_RULES.items()
}
"""Each plain type's check (`PlainRule.check` of its rule in `PLAIN_EVENT_RULES`)."""

KNOWN_EVENT_TYPES = MESSAGE_EVENT_TYPES | frozenset(PLAIN_EVENT_RULES)
"""The message types and the plain types: every type an append accepts without an `ignorable` mark."""

set_plain_rules(
    {
        event_type: (rule.ints, rule.strs, rule.reason_with_kind)
        for event_type, rule in PLAIN_EVENT_RULES.items()
        if rule.other is None
    }
)


def prepare_data(event_type: object, data: object) -> Any:
    """Validate and deep-freeze the data of an event about to be appended (one pass, detached).

    Raises `TypeError`/`ValueError` naming the event type and key at fault.
    """
    if not isinstance(event_type, str) or not event_type:
        raise TypeError(f"event type must be a non-empty str, not {event_type!r}")
    if event_type == USER_MESSAGE:
        return _check_message(event_type, data, role="user")
    if event_type in MESSAGE_EVENT_TYPES:
        frozen = freeze_mapping(event_type, data)
        if "message" not in frozen:
            raise ValueError(f"{_where(event_type)} needs 'message' (the Message it carries)")
        role = "assistant" if event_type == ASSISTANT_MESSAGE else "user"
        _check_message(event_type, frozen["message"], role=role)
        _check_envelope(event_type, frozen)
        return frozen
    frozen = freeze_mapping(event_type, data)
    check_plain_data(event_type, frozen)
    return frozen


def check_plain_data(event_type: str, frozen: FrozenDict[Any]) -> None:
    """The rules for the frozen data of an event that carries no message (its known fields, or an
    unknown type's `ignorable` mark). Raises `TypeError`/`ValueError` naming the key at fault."""
    check = PLAIN_DATA_CHECKS.get(event_type)
    if check is not None:
        check(event_type, frozen)
    elif blocks_derivation(event_type, frozen):
        raise ValueError(
            f"unknown event type {event_type!r}: readers refuse to derive history past it; if it does "
            "not change the model-visible history, mark it with data {'ignorable': True}"
        )


def prepare_surface_op(event_type: str, surface_op: object) -> Any:
    """The frozen surface operation for an append (`"append"` by default on message events)."""
    if event_type not in MESSAGE_EVENT_TYPES:
        if surface_op is not None:
            raise ValueError(f"{event_type} events carry no surface_op (only message events do)")
        return None
    if surface_op is None or surface_op == SURFACE_APPEND:
        return SURFACE_APPEND
    if isinstance(surface_op, Mapping) and surface_op.get("op") == "replace":
        start, end = surface_op.get("start"), surface_op.get("end")
        if type(start) is not int or type(end) is not int or set(surface_op) != {"op", "start", "end"}:
            raise ValueError(f"surface_op must be {{'op': 'replace', 'start': int, 'end': int}}, not {surface_op!r}")
        return replace_op(start, end)
    raise ValueError(f"surface_op must be 'append' or {{'op': 'replace', 'start': i, 'end': j}}, not {surface_op!r}")


def prepare_source_seqs(source_event_seqs: Iterable[int], next_seq: int) -> tuple[int, ...]:
    """The frozen `source_event_seqs`: seqs of events already in the log."""
    if type(source_event_seqs) is tuple:
        if not source_event_seqs:
            return ()
        seqs = source_event_seqs  # a tuple is no str, bytes or mapping: no ABC checks needed
    elif isinstance(source_event_seqs, (str, bytes, Mapping)) or not isinstance(source_event_seqs, Iterable):
        raise TypeError(f"source_event_seqs must be a sequence of ints, not {type(source_event_seqs).__name__}")
    else:
        seqs = tuple(source_event_seqs)
    for seq in seqs:
        if type(seq) is not int or not 0 <= seq < next_seq:
            raise ValueError(f"source_event_seqs: {seq!r} is not the seq of an event in the log (0..{next_seq - 1})")
    return seqs
