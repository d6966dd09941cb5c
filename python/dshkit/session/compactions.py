"""One description of a compaction, whoever wrote it: the records it logs and what a reader makes of them.

A compaction is logged as `compaction/start {compaction_id, turn}`, optionally
`compaction/summary {compaction_id, summary, shadowed_range, shadowed_seqs, shadowed_token_count,
provider, model, ...}` (when a model wrote the summary), the summary's `user/message` (a
`replace` of the range, its `source_event_seqs` citing the start, the summary record and every
replaced event), and `compaction/end {compaction_id, turn, error?}`: the original harness's
records, written with its camelCase names in its format. `Session.compact` and the agent's
`Compactor` build their records with `start_record`, `summary_record` and `end_record`, and the
summary message's source carries the same `compaction_id` (`COMPACTION_ID`). Every reader (the
viewer's page, `dshkit log show`, the original format's repair) reads a log's compactions with
`read_compactions`, which also reads the records `Session.compact` wrote before (`start_id`,
`end_id`, `message_ids` / `summary_id`, `start_seq`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dshkit import Message, new_message_id
from dshkit.session.events import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)

COMPACT_PLUGIN = "compact"
"""The `source.plugin` of a compaction's summary message (the original's checkpoint marker)."""
COMPACTION_ID = "compaction_id"
"""The key naming a compaction in its records and in its summary message's source (`compactionId` in the original's)."""

DSHKIT_EXTENSION_KEYS = frozenset(("reason", "tokens_before", "tokens_after", "token_count_after"))
"""Facts dshkit adds to the original's compaction records (the original ignores them): why the
compaction ran (`threshold`, `overflow`, `manual`), the request's size before and after a summary,
and a pruned result's size after pruning."""


def start_record(compaction_id: str, turn: int | None, reason: str | None = None) -> dict[str, Any]:
    """The data of a `compaction/start` (`turn` is None for one run between turns)."""
    data: dict[str, Any] = {COMPACTION_ID: compaction_id, "turn": turn}
    if reason is not None:
        data["reason"] = reason
    return data


def summary_record(
    compaction_id: str, text: str, shadowed_seqs: Sequence[int], shadowed_token_count: int, **facts: Any
) -> dict[str, Any]:
    """The data of a `compaction/summary`: the summary, the replaced seqs and their price, then `facts`
    (`provider`, `model`, `max_tokens`, `usage`, `tokens_before`, `tokens_after`)."""
    if not shadowed_seqs:
        raise ValueError("summary_record: a summary replaces at least one message")
    data: dict[str, Any] = {
        COMPACTION_ID: compaction_id,
        "summary": [{"type": "text", "text": text}],
        "shadowed_range": {"start": shadowed_seqs[0], "end": shadowed_seqs[-1]},
        "shadowed_seqs": list(shadowed_seqs),
        "shadowed_token_count": shadowed_token_count,
    }
    data.update((key, value) for key, value in facts.items() if value is not None)
    return data


def end_record(compaction_id: str, turn: int | None, error: str | None = None) -> dict[str, Any]:
    """The data of a `compaction/end`; `error` says why a compaction replaced nothing."""
    data: dict[str, Any] = {COMPACTION_ID: compaction_id, "turn": turn}
    if error is not None:
        data["error"] = error
    return data


def compaction_id_of(summary: Message) -> str:
    """The id of the compaction `summary` is written by `Session.compact` for: its source's
    `compaction_id`, or a new id when its source is not the `compact` plugin.

    `ValueError` for a `compact` plugin summary without one: the original harness takes such a
    message for a compaction checkpoint and refuses it unless it names its compaction.
    """
    source = summary.source
    given = source.get(COMPACTION_ID)
    if isinstance(given, str) and given:
        return given
    if source["kind"] == "plugin" and source.get("plugin") == COMPACT_PLUGIN:
        raise ValueError(
            f"summary {summary.id}: a source with plugin 'compact' marks a compaction checkpoint and must name its compaction: "
            "add source['compaction_id'] (a new id, e.g. dshkit.new_message_id())"
        )
    return new_message_id()


def open_turn(events: Sequence[Event]) -> int | None:
    """The number of the turn the log leaves open, or None between turns (a compaction's owner)."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.type == TURN_END:
            return None
        if event.type == TURN_START:
            return event.data.get("turn")  # type: ignore[no-any-return]
    return None


@dataclass
class CompactionFacts:
    """What the log says of one compaction (fields the log does not hold are None or empty).

    `start_seq`, `summary_event_seq` (its `compaction/summary`), `message_seq` (the summary's
    `user/message`) and `end_seq` are seqs; `replaced_seqs` / `replaced_ids` the events and
    message ids the summary replaced; `summary_text` the summary itself (never a checkpoint
    preamble); `error` why it replaced nothing.
    """

    start_seq: int
    compaction_id: str | None = None
    turn: int | None = None
    reason: str | None = None
    summary_event_seq: int | None = None
    message_seq: int | None = None
    summary_id: str | None = None
    summary_text: str | None = None
    replaced_seqs: list[int] = field(default_factory=list)
    replaced_ids: list[str] = field(default_factory=list)
    end_seq: int | None = None
    error: str | None = None
    shadowed_token_count: int | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    provider: str | None = None
    model: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The facts as plain JSON values (what the viewer page embeds)."""
        return dict(self.__dict__)


def _texts(blocks: Any) -> str:
    return "\n".join(str(block.get("text", "")) for block in blocks or () if isinstance(block, Mapping) and block.get("type") == "text")


def _read_start(event: Event) -> CompactionFacts:
    data = event.data if isinstance(event.data, Mapping) else {}
    facts = CompactionFacts(event.seq, compaction_id=data.get(COMPACTION_ID), turn=data.get("turn"), reason=data.get("reason"))
    if "message_ids" in data:  # a `Session.compact` record of before the shared description
        facts.replaced_ids = list(data["message_ids"])
    return facts


def _read_summary(facts: CompactionFacts, event: Event) -> None:
    data = event.data if isinstance(event.data, Mapping) else {}
    facts.summary_event_seq = event.seq
    facts.summary_text = _texts(data.get("summary"))
    for name in ("shadowed_token_count", "tokens_before", "tokens_after", "provider", "model"):
        setattr(facts, name, data.get(name))


def _read_message(facts: CompactionFacts, event: Event, events: Sequence[Event]) -> None:
    facts.message_seq = event.seq
    facts.summary_id = str(event.message.id) if event.message is not None else None
    cited = {facts.start_seq, facts.summary_event_seq}
    facts.replaced_seqs = [seq for seq in event.source_event_seqs if seq not in cited]
    replaced = [events[seq].message for seq in facts.replaced_seqs if 0 <= seq < len(events)]
    ids = [str(message.id) for message in replaced if message is not None]
    facts.replaced_ids = ids or facts.replaced_ids
    if facts.summary_text is None and event.message is not None:
        facts.summary_text = _texts(event.message.content)  # a summary written by hand is the message itself


def read_compactions(events: Sequence[Event]) -> list[CompactionFacts]:
    """Every compaction of `events`, in log order, as `CompactionFacts`.

    The summary message of a compaction is the `user/message` replacing a range between its
    start and its end. A compaction left open (a crash) has no `end_seq`. Only the events of a
    compaction and the turn boundaries are rebuilt (`type_at` of `session.events`), so a scan of
    a long log costs little more than reading its types.
    """
    type_at = getattr(events, "type_at", None)
    if type_at is None:
        type_at = lambda seq: events[seq].type  # noqa: E731 - a plain list of events
    found: list[CompactionFacts] = []
    current: CompactionFacts | None = None
    for seq in range(len(events)):
        event_type = type_at(seq)
        if event_type == COMPACTION_START:
            current = _read_start(events[seq])
            found.append(current)
        elif current is None:
            continue
        elif event_type == COMPACTION_SUMMARY:
            _read_summary(current, events[seq])
        elif event_type == USER_MESSAGE:
            event = events[seq]
            if event.surface_op not in (None, "append"):
                _read_message(current, event, events)
        elif event_type == COMPACTION_END:
            event = events[seq]
            data = event.data if isinstance(event.data, Mapping) else {}
            current.end_seq, current.error = event.seq, data.get("error")
            if current.compaction_id is None and isinstance(data.get(COMPACTION_ID), str):
                current.compaction_id = data[COMPACTION_ID]
            current = None
        elif event_type == TURN_START or event_type == TURN_END:
            current = None  # a compaction never crosses a turn boundary: one left open ended here
    return found


__all__ = [
    "COMPACT_PLUGIN",
    "COMPACTION_ID",
    "DSHKIT_EXTENSION_KEYS",
    "CompactionFacts",
    "compaction_id_of",
    "end_record",
    "open_turn",
    "read_compactions",
    "start_record",
    "summary_record",
]
