"""Checking a log's invariants (`dshkit log verify`), one problem per finding.

The checks replay the log through the same rules an append must pass: contiguous seqs (checked
while loading), times that never go back, valid event data, unique message ids on the surface,
replacements that keep ids and change only content, every tool call answered within its turn,
requests that can be rebuilt (derivation possible, a `request/header` logged before each
model response of a turn), and every attachment a message refers to stored with its bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from dshkit.session._approval_state import undecided_asks
from dshkit.session.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    KNOWN_EVENT_TYPES,
    MESSAGE_EVENT_TYPES,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    Event,
    blocks_derivation,
    prepare_data,
    prepare_surface_op,
)
from dshkit.session.attachments import Attachments, attachment_references, logged_messages
from dshkit.session.errors import AttachmentError
from dshkit.session._surface import Surface


class Problem(NamedTuple):
    """One violated invariant: the seq of the event at fault (`None`: the log as a whole) and why."""

    seq: int | None
    text: str


def _data_problem(event: Event) -> str | None:
    try:
        prepare_data(event.type, event.data)
        prepare_surface_op(event.type, event.surface_op)  # refuses one on a non-message event too
    except (TypeError, ValueError) as error:
        return str(error)
    if event.type not in MESSAGE_EVENT_TYPES and event.source_event_seqs:
        return f"{event.type} events carry no source_event_seqs (only message events do)"
    for source_seq in event.source_event_seqs:
        if type(source_seq) is not int or not 0 <= source_seq < event.seq:
            return f"source_event_seqs: {source_seq!r} is not the seq of an earlier event"
    return None


def _check_message(
    event: Event, events: Sequence[Event], surface: Surface, header_seen: bool, add: Callable[[Problem], None]
) -> None:
    """Add the problems of a message event: its surface rules, its fold, a response without a header before it."""
    seq, event_type = event.seq, event.type
    try:
        surface.check(event_type, event.data, event.surface_op, events)
    except ValueError as error:
        add(Problem(seq, str(error)))
    try:
        surface.fold(event)
    except ValueError as error:
        add(Problem(seq, str(error)))
    if event_type == ASSISTANT_MESSAGE and "turn" in event.data and not header_seen:
        add(Problem(seq, "no request/header before this model response: its request cannot be rebuilt"))


def check_events(events: Sequence[Event]) -> list[Problem]:
    """Every invariant violation in `events` (an empty list for a sound log)."""
    problems: list[Problem] = []
    surface = Surface()
    add = problems.append
    last_time = None
    open_turn: Event | None = None
    open_step: Event | None = None
    header_seen = False
    open_compaction: Event | None = None
    for event in events:
        seq, event_type = event.seq, event.type
        if last_time is not None and event.time < last_time:
            add(Problem(seq, f"time {event.time} is before the previous event's {last_time}"))
        last_time = event.time
        if event_type not in KNOWN_EVENT_TYPES:
            if blocks_derivation(event_type, event.data):
                add(Problem(seq, f"unknown event type {event_type!r} not marked ignorable: history cannot be derived past it"))
            continue
        problem = _data_problem(event)
        if problem is not None:
            add(Problem(seq, problem))
            continue
        if event_type in MESSAGE_EVENT_TYPES:
            _check_message(event, events, surface, header_seen, add)
        elif event_type == REQUEST_HEADER:
            header_seen = True
        elif event_type == TURN_START:
            if open_turn is not None:
                add(Problem(seq, f"turn/start while turn {open_turn.data.get('turn')} (event {open_turn.seq}) has no turn/end"))
            open_turn, open_step = event, None
        elif event_type == STEP_START:
            if open_step is not None:
                add(Problem(seq, f"step/start while step {open_step.data.get('step')} (event {open_step.seq}) has no step/end"))
            open_step = event
        elif event_type == STEP_END:
            open_step = None
        elif event_type == TURN_END:
            if open_step is not None:
                add(Problem(seq, f"turn/end while step {open_step.data.get('step')} (event {open_step.seq}) has no step/end"))
            pending = surface.pending_calls()
            if pending:
                add(Problem(seq, f"turn {event.data.get('turn')} ended with tool call(s) {', '.join(map(repr, pending))} unanswered"))
            open_turn = open_step = None
        elif event_type == COMPACTION_START:
            open_compaction = event
        elif event_type == COMPACTION_END:
            open_compaction = None
    if open_turn is not None and not undecided_asks(events):  # a turn waiting for a person is suspended, not crashed
        add(Problem(open_turn.seq, f"turn {open_turn.data.get('turn')} has no turn/end (a crash; it is closed when the log is opened for writing)"))
    if open_compaction is not None:
        add(Problem(open_compaction.seq, "compaction/start without compaction/end"))
    return problems


def check_attachments(events: Sequence[Event], attachments: Attachments) -> list[Problem]:
    """A problem for each attachment a logged message refers to that is missing or altered."""
    problems: list[Problem] = []
    checked: set[str] = set()
    for seq, message in logged_messages(events):
        for where, reference in attachment_references(message):
            identity = str(reference.get("id"))
            if identity in checked:
                continue
            checked.add(identity)
            try:
                attachments.read(identity, referrer=f"message {message.id} {where}")
            except (AttachmentError, ValueError) as error:
                problems.append(Problem(seq, str(error)))
    return problems


def format_problems(problems: Sequence[Problem], describe: Callable[[int], str], whole: str) -> list[str]:
    """One line per problem: `"<file>: line 7: <why>"`."""
    return [f"{describe(problem.seq) if problem.seq is not None else whole}: {problem.text}" for problem in problems]
