"""What the demo's scripted model answers, call by call, and the workspace files it talks about."""

from __future__ import annotations

import json
from typing import Any

TODO = "- buy milk\n- answer the review\n"
NOTES = (
    "# Notes\n\n"
    "dshkit gives every message an id when it is created. The id survives the inbox, the\n"
    "pre-step hook, the durable log and the model request, so a request can be rebuilt from\n"
    "the log and a UI can follow one message from queueing to the answer.\n"
)
APP = 'print("hello")\n'
ADDED_TODO = "- write the demo\n"


def call(call_id: str, name: str, arguments: dict[str, Any], text: str | None = None) -> list[dict[str, Any]]:
    """A scripted response that calls one tool (its arguments streamed in two pieces)."""
    raw = json.dumps(arguments)
    half = len(raw) // 2
    chunks: list[dict[str, Any]] = []
    if text is not None:
        chunks.append({"type": "text_delta", "text": text})
    chunks += [
        {"type": "tool_call_delta", "index": 0, "id": call_id, "name": name, "arguments": raw[:half]},
        {"type": "tool_call_delta", "index": 0, "id": None, "name": None, "arguments": raw[half:]},
        {"type": "usage", "usage": {"prompt_tokens": 420, "completion_tokens": 18}},
        {"type": "finish", "reason": "tool_calls"},
    ]
    return chunks


def script() -> list[Any]:
    """What the scripted model answers, call by call."""
    return [
        # turn 1: what is in the workspace?
        call("call_list", "list_files", {"path": "."}, text="Let me look."),
        [
            {"type": "reasoning_delta", "text": "Three entries; one is a folder. "},
            {"type": "text_delta", "text": "The workspace holds notes.md, todo.txt and a src/ folder."},
            {"type": "finish", "reason": "stop", "replay_state": {"scripted": "turn-1"}},
        ],
        # turn 2: the follow-up queued while turn 1 ran, then a steer arrives mid-tool
        call("call_read_todo", "read_file", {"path": "todo.txt"}),
        call("call_write_todo", "write_file", {"path": "todo.txt", "content": TODO + ADDED_TODO}, text="Adding it."),
        "First on the list is buying milk. I also added “write the demo” at the end, as you asked.",
        # turn 3: an injected note joins the follow-up; the answer is cancelled mid-stream
        call("call_read_notes", "read_file", {"path": "notes.md"}),
        "notes.md explains that every message gets its id when it is created and keeps it through "
        "the inbox, the hook, the log and the request, which is why any request can be rebuilt.",
        # turn 4: after maintenance (a pruned result, a summary) the queued question runs
        "Left to do: buy milk, answer the review, write the demo.",
    ]


__all__ = ["ADDED_TODO", "APP", "NOTES", "TODO", "call", "script"]
