"""A readable transcript of a log (`dshkit log show`): turns, steps and messages with full ids."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

from dshkit import Message, to_json

from dshkit.session.delegation import SUBAGENT_ORIGIN, SUBAGENT_STARTED
from dshkit.session.events import (
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


_COMPACTION_LINES: dict[str, Any] = {
    "compaction/summary": lambda data: (
        f"compaction summary: {len(data['shadowed_seqs'])} messages ({data['shadowed_token_count']} tokens) "
        f"by {data['provider']}/{data['model']}; request {data['tokens_before']} -> {data['tokens_after']} tokens"
    ),
    "compaction/prune": lambda data: (
        f"compaction prune: result #{data['shadowed_seqs'][0]} {data['shadowed_token_count']} -> {data['token_count_after']} tokens"
    ),
    "compaction/end": lambda data: f"compaction end: failed: {shorten(str(data['error']), 100)}",
}
# The fields a compaction line shows (other data, e.g. the original harness's, is shown as JSON).
_COMPACTION_KEYS = {
    "compaction/summary": {"shadowed_seqs", "shadowed_token_count", "provider", "model", "tokens_before", "tokens_after"},
    "compaction/prune": {"shadowed_seqs", "shadowed_token_count", "token_count_after"},
    "compaction/end": {"error"},
}


def render(events: Any, *, session_id: str, created_at: int, where: str, header: Any = None) -> Iterator[str]:
    """The transcript lines of `events` (`header`, the log's header record, names its parent if any)."""
    chunks = 0
    yield f"session {session_id} created {_iso(created_at)} ({where}), {len(events)} events"
    if isinstance(header, Mapping) and header.get("origin") == SUBAGENT_ORIGIN:
        yield f"subagent of session {header.get('parent_id')} (call {header.get('parent_call_id')}, depth {header.get('delegation_depth')})"
    elif isinstance(header, Mapping) and header.get("parent_id"):
        yield f"fork of session {header.get('parent_id')} ({header.get('seed_length')} events copied)"
    indent = ""
    for event in events:
        event_type, data = event.type, event.data
        if event_type == ASSISTANT_CHUNK:
            chunks += 1
            continue
        if event_type == TURN_START:
            yield f"turn {data.get('turn')} (#{event.seq}, {_iso(event.time)})"
            indent = "  "
        elif event_type == TURN_END:
            reason = data.get("reason", {})
            detail = {key: value for key, value in reason.items() if key != "kind"} if isinstance(reason, Mapping) else {}
            extra = f" {shorten(to_json(detail), 100)}" if detail else ""
            yield f"turn {data.get('turn')} end: {reason.get('kind') if isinstance(reason, Mapping) else reason}{extra} (#{event.seq})"
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
        elif event_type in _COMPACTION_LINES and isinstance(data, Mapping) and _COMPACTION_KEYS[event_type] <= set(data):
            yield f"{indent}#{event.seq} {_COMPACTION_LINES[event_type](data)}"
        else:
            yield f"{indent}#{event.seq} {event_type} {shorten(to_json(data), 100)}"
    if chunks:
        yield f"({chunks} assistant/chunk events not shown)"
