"""What the session viewer page embeds: a log's events, messages and request headers as plain JSON.

The page rebuilds everything else itself (rows, pairing of calls and results, the request of a
step), so this is a faithful, compact copy of the log, not a rendering of it: one list of events
(streamed `assistant/chunk` events only counted, per step), each message once, each distinct
request header once, and each compaction as `dshkit.session.compactions.read_compactions` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dshkit import Message, thaw

from dshkit.models.stream_translation import usage_summary
from dshkit.session.compactions import read_compactions
from dshkit.session.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_HEADER,
    STEP_START,
    USER_MESSAGE,
    Event,
    blocks_derivation,
)

PAGE_DATA_VERSION = 2


def _event_info(event: Event) -> Any:
    """The non-message facts of an event the page shows (its data, minus what is stored elsewhere)."""
    data = event.data
    if event.type == USER_MESSAGE or not isinstance(data, Mapping):
        return None
    if event.type == REQUEST_HEADER:
        return {key: thaw(value) for key, value in data.items() if key != "header"}
    if "message" in data:
        return {key: thaw(value) for key, value in data.items() if key != "message"}
    if "inserted" in data:
        info = {key: thaw(value) for key, value in data.items() if key != "inserted"}
        info["inserted_ids"] = [message.id for message in data["inserted"]]
        return info
    return thaw(data)


def _note_response(step: dict[str, Any], data: Any) -> None:
    """Add an assistant message's token usage and finish reason to its step's facts.

    A step's facts: ``chunks`` (streamed chunk count), ``request_at`` (the seq the step's request
    is rebuilt at), ``input_tokens``/``output_tokens`` (summed over its responses, normalised
    across APIs by `usage_summary`) and ``finish_reason`` (the last response's).
    """
    if not isinstance(data, Mapping):
        return
    usage = data.get("usage")
    if isinstance(usage, Mapping):
        summary = usage_summary(usage)
        for key in ("input_tokens", "output_tokens"):
            if key in summary:
                step[key] = step.get(key, 0) + summary[key]
    if isinstance(data.get("finish_reason"), str):
        step["finish_reason"] = data["finish_reason"]


def _step_facts(events: Sequence[Event]) -> dict[str, dict[str, Any]]:
    """The facts of each step (`_note_response`), by the seq of its ``step/start`` as a str."""
    steps: dict[str, dict[str, Any]] = {}
    step: dict[str, Any] | None = None
    awaiting_output = False
    for event in events:
        event_type = event.type
        if event_type == STEP_START:
            step = steps[str(event.seq)] = {"chunks": 0}
            awaiting_output = True
        elif step is not None and event_type in (ASSISTANT_CHUNK, ASSISTANT_MESSAGE):
            if awaiting_output:  # the request went out right before the step's first output
                step["request_at"] = event.seq - 1
                awaiting_output = False
            if event_type == ASSISTANT_CHUNK:
                step["chunks"] += 1
            else:
                _note_response(step, event.data)
    return steps


def page_data(events: Sequence[Event], *, session_id: str, created_at: int, where: str) -> dict[str, Any]:
    """The JSON-able document the viewer page renders, built from a session's events.

    ``events`` rows are ``[seq, time, type, message index or None, surface op or None, source
    seqs, info, header index or None]``; ``messages`` holds each carried message as
    `Message.to_dict()`; ``headers`` each ``request/header`` header; ``steps`` maps the seq of a
    ``step/start`` to that step's facts (see `_note_response`); ``compactions`` holds each
    compaction as `read_compactions` reads it (`CompactionFacts.as_dict`), whoever wrote it.
    """
    messages: list[dict[str, Any]] = []
    headers: list[Any] = []
    rows: list[list[Any]] = []
    chunk_total = 0
    blocked: int | None = None
    for event in events:
        event_type = event.type
        if event_type == ASSISTANT_CHUNK:
            chunk_total += 1
            continue
        message: Message | None = event.message
        message_index = None
        if message is not None:
            message_index = len(messages)
            messages.append(message.to_dict())
        header_index = None
        if event_type == REQUEST_HEADER and isinstance(event.data, Mapping):
            header_index = len(headers)
            headers.append(thaw(event.data.get("header")))
        elif blocked is None and blocks_derivation(event_type, event.data):
            blocked = event.seq
        op = event.surface_op
        rows.append([
            event.seq,
            event.time,
            event_type,
            message_index,
            thaw(op) if op is not None else None,
            list(event.source_event_seqs),
            _event_info(event),
            header_index,
        ])
    return {
        "version": PAGE_DATA_VERSION,
        "session": {
            "id": session_id,
            "created_at": created_at,
            "where": where,
            "event_count": len(events),
            "chunk_count": chunk_total,
            "blocked_at": blocked,
        },
        "events": rows,
        "messages": messages,
        "headers": headers,
        "steps": _step_facts(events),
        "compactions": [facts.as_dict() for facts in read_compactions(events)],
    }
