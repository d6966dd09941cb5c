"""A readable transcript of a log (`dshkit log show`): turns, steps and messages with full ids."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

from dshkit import Message, to_json

from dshkit.session.compactions import CompactionFacts, read_compactions
from dshkit.session.delegation import SUBAGENT_ORIGIN, SUBAGENT_STARTED
from dshkit.session.events import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    ASSISTANT_CHUNK,
    INBOX_SPLICED,
    MESSAGE_EVENT_TYPES,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)

TEXT_LIMIT = 160


def shorten(text: str, limit: int = TEXT_LIMIT) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis and the full length."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return f"{flat[: limit - 1]}… ({len(text)} chars)"


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(timespec="seconds")


def _block_text(blocks: Any) -> str:
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_result":
            parts.append(_block_text(block.get("content", ())))
        elif kind == "reasoning":
            parts.append(f"(reasoning: {block.get('text', '')})")
        elif kind == "image":
            parts.append("(image)")
        elif kind != "tool_call":
            parts.append(f"({kind} block)")
    return " ".join(part for part in parts if part)


def _source(message: Message) -> str:
    source = message.source
    kind = source["kind"]
    if kind == "model":
        return f"model {source.get('provider')}/{source.get('model')}"
    if kind == "tool":
        return f"tool {source.get('call_id')}"
    if kind == "plugin":
        return f"plugin {source.get('plugin')}" + (f" {source['form']}" if "form" in source else "")
    return str(kind)


def _message_lines(event: Event, indent: str) -> Iterator[str]:
    message: Message = event.message  # type: ignore[assignment]
    flags = []
    data = event.data if isinstance(event.data, Mapping) and event.type != USER_MESSAGE else {}
    if data.get("interrupted"):
        flags.append("interrupted")
    if data.get("error"):
        flags.append(f"error {data['error'].get('code')}")
    op = event.surface_op
    if op != "append":
        span = f"{op['start']}" if op["end"] - op["start"] == 1 else f"{op['start']}..{op['end'] - 1}"
        replaced = ", ".join(map(str, event.source_event_seqs)) or "?"
        flags.append(f"REPLACES surface {span} (events {replaced})")
    flag_text = f" [{'; '.join(flags)}]" if flags else ""
    yield f"{indent}#{event.seq} {message.role} {message.id} ({_source(message)}){flag_text}: {shorten(_block_text(message.content))}"
    for call in message.tool_calls:
        yield f"{indent}    calls {call.get('name')} id={call.get('id')} {shorten(str(call.get('arguments', '')), 80)}"


def _compaction_line(event_type: str, facts: CompactionFacts) -> str:
    """One line of a compaction's event, read from the log's one description of it (`read_compactions`)."""
    ids = facts.replaced_ids
    if event_type == COMPACTION_START:
        why = ", ".join(part for part in (facts.reason, "between turns" if facts.turn is None else f"turn {facts.turn}") if part)
        if facts.message_seq is not None:
            span = f"{ids[0]} .. {ids[-1]}" if ids else "?"
            return f"compaction start ({why}): {len(ids)} messages {span} -> summary {facts.summary_id}"
        outcome = "never ended" if facts.end_seq is None else f"replaced nothing: {shorten(str(facts.error), 100)}"
        return f"compaction start ({why}): {outcome}"
    if event_type == COMPACTION_SUMMARY:
        tokens = "" if facts.tokens_before is None else f"; request {facts.tokens_before} -> {facts.tokens_after} tokens"
        return (
            f"compaction summary: {len(ids)} messages ({facts.shadowed_token_count} tokens) by {facts.provider}/{facts.model}{tokens}\n"
            f"    summary: {shorten(facts.summary_text or '')}"
        )
    if facts.error is not None:
        return f"compaction end: failed: {shorten(str(facts.error), 100)}"
    return f"compaction end: summary {facts.summary_id}"


def _prune_line(data: Any) -> str | None:
    seqs, before, after = data.get("shadowed_seqs"), data.get("shadowed_token_count"), data.get("token_count_after")
    if not seqs or before is None:
        return None
    return f"compaction prune: result #{seqs[0]} {before} -> {'?' if after is None else after} tokens"


def _parent_lines(header: Any) -> Iterator[str]:
    """The line naming the session a subagent's or a fork's log comes from (none for a root session)."""
    if isinstance(header, Mapping) and header.get("origin") == SUBAGENT_ORIGIN:
        yield f"subagent of session {header.get('parent_id')} (call {header.get('parent_call_id')}, depth {header.get('delegation_depth')})"
    elif isinstance(header, Mapping) and header.get("parent_id"):
        yield f"fork of session {header.get('parent_id')} ({header.get('seed_length')} events copied)"


def _turn_end_line(event: Any) -> str:
    data = event.data
    reason = data.get("reason", {})
    detail = {key: value for key, value in reason.items() if key != "kind"} if isinstance(reason, Mapping) else {}
    extra = f" {shorten(to_json(detail), 100)}" if detail else ""
    return f"turn {data.get('turn')} end: {reason.get('kind') if isinstance(reason, Mapping) else reason}{extra} (#{event.seq})"


def render(events: Any, *, session_id: str, created_at: int, where: str, header: Any = None) -> Iterator[str]:
    """The transcript lines of `events` (`header`, the log's header record, names its parent if any)."""
    chunks = 0
    yield f"session {session_id} created {_iso(created_at)} ({where}), {len(events)} events"
    yield from _parent_lines(header)
    indent = ""
    compactions = {
        seq: facts
        for facts in read_compactions(events)
        for seq in (facts.start_seq, facts.summary_event_seq, facts.end_seq)
        if seq is not None
    }
    for event in events:
        event_type, data = event.type, event.data
        if event_type == ASSISTANT_CHUNK:
            chunks += 1
            continue
        if event_type == TURN_START:
            yield f"turn {data.get('turn')} (#{event.seq}, {_iso(event.time)})"
            indent = "  "
        elif event_type == TURN_END:
            yield _turn_end_line(event)
            indent = ""
        elif event_type == STEP_START:
            yield f"  step {data.get('step')} (#{event.seq})"
            indent = "    "
        elif event_type == STEP_END:
            indent = "  " if indent else ""
        elif event_type in MESSAGE_EVENT_TYPES:
            yield from _message_lines(event, indent)
        elif event_type == SUBAGENT_STARTED:
            yield f"{indent}#{event.seq} subagent session {data.get('session_id')} started by call {data.get('call_id')} (depth {data.get('depth')})"
        elif event_type == TOOL_CALL:
            yield f"{indent}#{event.seq} tool call {data.get('name')} id={data.get('call_id')} started"
        elif event_type == REQUEST_HEADER:
            header = data.get("header", {})
            system = header.get("system")
            system_text = f" system={shorten(system, 60)!r}" if isinstance(system, str) else ""
            yield f"{indent}#{event.seq} request header ({data.get('reason')}):{system_text} {len(header.get('tools', ()))} tools"
        elif event_type == INBOX_SPLICED:
            inserted = data.get("inserted", ())
            ids = ", ".join(message.id for message in inserted)
            outcome = f" {data['outcome']}" if "outcome" in data else ""
            yield (
                f"{indent}#{event.seq} inbox {data.get('target')}{outcome}: at {data.get('start')} "
                f"removed {data.get('removed_count')}, inserted {len(inserted)}" + (f" ({ids})" if ids else "")
            )
        elif event.seq in compactions and event_type in (COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END):
            for line in _compaction_line(event_type, compactions[event.seq]).split("\n"):
                yield f"{indent}{line}" if line.startswith(" ") else f"{indent}#{event.seq} {line}"
        elif event_type == COMPACTION_PRUNE and isinstance(data, Mapping) and _prune_line(data) is not None:
            yield f"{indent}#{event.seq} {_prune_line(data)}"
        else:
            yield f"{indent}#{event.seq} {event_type} {shorten(to_json(data), 100)}"
    if chunks:
        yield f"({chunks} assistant/chunk events not shown)"
