"""Log events as AG-UI events: a pure function of one log event, so a stream can resume anywhere.

Each log event yields zero or more AG-UI events (the `ag-ui-protocol` package's types); the SSE
id of the k-th one is ``"<seq>"`` when it is the only one, else ``"<seq>.<k>"``. Every event
carries dshkit's ids in `metadata` (`dshkit_seq`, `dshkit_type`, and the message id where
there is one). Text is sent per logged message (start, the whole text, end), not per streamed
chunk: a chunk's message id is only known once its message is logged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

from ag_ui.core import (
    CustomEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import BaseEvent

from dshkit import Message
from dshkit.session import Event


def agui_events(session_id: str, event: Event) -> list[BaseEvent]:
    """The AG-UI events one log event stands for (often none: inbox and request bookkeeping)."""
    meta = {"dshkit_seq": event.seq, "dshkit_type": event.type}
    data = event.data
    kind = event.type
    if kind == "turn/start":
        return [RunStartedEvent(thread_id=session_id, run_id=_run_id(data), metadata=meta)]
    if kind == "turn/end":
        return [_turn_end(session_id, data, meta)]
    if kind in ("step/start", "step/end"):
        step = f"turn-{data.get('turn')}-step-{data.get('step')}"
        cls = StepStartedEvent if kind == "step/start" else StepFinishedEvent
        return [cls(step_name=step, metadata=meta)]
    if kind in ("user/message", "assistant/message"):
        return list(_message(event.message, meta))
    if kind == "tool/result":
        message: Any = event.message
        meta["dshkit_message_id"] = message.id
        call_id = message.source["call_id"]
        return [ToolCallResultEvent(message_id=message.id, tool_call_id=call_id, content=_result_text(message), role="tool", metadata=meta)]
    if kind in ("approval/asked", "approval/decided"):
        name = "dshkit.approval_asked" if kind == "approval/asked" else "dshkit.approval_decided"
        return [CustomEvent(name=name, value=plain_json(data), metadata=meta)]
    return []


def _run_id(data: Any) -> str:
    return f"turn-{data.get('turn')}"


def _turn_end(session_id: str, data: Any, meta: dict[str, Any]) -> BaseEvent:
    reason = plain_json(data.get("reason") or {})
    meta["dshkit_reason"] = reason
    if reason.get("kind") == "error":
        error = reason.get("error") or {}
        return RunErrorEvent(message=str(error.get("message") or "the turn failed"), code=error.get("code"), metadata=meta)
    return RunFinishedEvent(thread_id=session_id, run_id=_run_id(data), metadata=meta)


def _message(message: Any, meta: dict[str, Any]) -> Iterator[BaseEvent]:
    meta = {**meta, "dshkit_message_id": message.id, "dshkit_source": plain_json(message.source)}
    text = "".join(block["text"] for block in message.content if block["type"] == "text")
    if text:
        role: Literal["user", "assistant"] = "user" if message.role == "user" else "assistant"
        yield TextMessageStartEvent(message_id=message.id, role=role, metadata=meta)
        yield TextMessageContentEvent(message_id=message.id, delta=text, metadata=meta)
        yield TextMessageEndEvent(message_id=message.id, metadata=meta)
    for call in message.tool_calls:
        yield ToolCallStartEvent(tool_call_id=call["id"], tool_call_name=call["name"], parent_message_id=message.id, metadata=meta)
        if call.get("arguments"):
            yield ToolCallArgsEvent(tool_call_id=call["id"], delta=call["arguments"], metadata=meta)
        yield ToolCallEndEvent(tool_call_id=call["id"], metadata=meta)


def _result_text(message: Any) -> str:
    parts = []
    for block in message.content:
        for inner in block.get("content") or ():
            parts.append(inner["text"] if inner.get("type") == "text" else json.dumps(plain_json(inner)))
    return "".join(parts)


def plain_json(value: Any) -> Any:
    """Frozen log data as plain JSON values (FrozenDict / tuples to dicts / lists)."""
    return json.loads(json.dumps(value, default=_thaw))


def _thaw(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if hasattr(value, "items"):
        return dict(value.items())
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON: {type(value).__name__}")
