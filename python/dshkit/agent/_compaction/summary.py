"""What a compaction writes: the summary request and message, and a pruned tool result.

The summary request shows the summarizer the replaced messages as a transcript (tool results
shortened to their head and tail) after the previous summary, if the range holds one: the new
summary merges it rather than nesting it. A transcript too long for one request is split into
parts (`transcript_parts`), summarized one after the other, each with the summary so far and the
user's first request of the range. The prompt asks for the task state a continuation
needs: the request and its intent, files touched, errors and their fixes, pending work and the
next step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dshkit import Message, create_user_message, to_json
from dshkit.session import ModelRequest
from dshkit.session.compactions import COMPACT_PLUGIN, COMPACTION_ID


SUMMARY_SYSTEM = (
    "You write the checkpoint of a coding agent's conversation whose older part is being removed "
    "from its context. The agent continues from your checkpoint and the newest messages alone."
)

SUMMARY_PROMPT = """Summarize the conversation below into a checkpoint the agent continues from.
If a previous checkpoint is given, merge it with the newer messages into one checkpoint (do not
quote or nest it). Keep every fact the agent still needs, in these sections:

## Request and intent
What the user asked for, their constraints and preferences, in their own words where it matters.
## Files and code
Every file read, created or changed, and what changed.
## Errors and fixes
Errors met, what caused them, how they were fixed (or that they were not).
## Pending work
What is left to do, in order.
## Next step
The very next action, with the details needed to take it.

Write only the checkpoint, at most about {budget} tokens."""

_PREAMBLE = (
    "This is an automatically generated checkpoint condensing an earlier span of the conversation "
    "to free up context. Treat the captured context as established background and build on it "
    "without restating it. Continue the task directly from the messages that follow, without "
    "acknowledging this checkpoint.\n\n<compacted-summary>"
)
_CLOSE = "</compacted-summary>"
_RESULT_CHARS = 2000  # of a tool result shown to the summarizer (head and tail)
_MARKER_CHARS = 48  # room for keep_head_and_tail's marker line


def is_summary(message: Message) -> bool:
    """Whether `message` is a compaction's summary (source plugin `compact`)."""
    source = message.source
    return source["kind"] == "plugin" and source.get("plugin") == COMPACT_PLUGIN


def summary_text(message: Message) -> str:
    """The summary a summary message holds (without the checkpoint preamble)."""
    texts = [block["text"] for block in message.content if block.get("type") == "text"]
    if texts and texts[0] == _PREAMBLE and texts[-1] == _CLOSE:
        texts = texts[1:-1]
    return "\n".join(texts)


def keep_head_and_tail(text: str, keep_chars: int) -> str:
    """`text` with its middle replaced by a marker when longer than `keep_chars` (head and tail kept)."""
    if len(text) <= keep_chars:
        return text
    head = keep_chars // 2
    tail = keep_chars - head
    return f"{text[:head]}\n[... {len(text) - keep_chars} characters pruned ...]\n{text[len(text) - tail:]}"


def _block_text(block: Any) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block["text"])
    if kind == "reasoning":
        return ""  # the answer and the calls carry what the reasoning concluded
    if kind == "tool_call":
        return f"[tool call {block['name']}({block['arguments']})]"
    if kind == "tool_result":
        inner = "\n".join(_block_text(item) for item in block.get("content", ()))
        flag = " (error)" if block.get("is_error") else ""
        return f"[tool result{flag}]\n{keep_head_and_tail(inner, _RESULT_CHARS)}"
    if kind == "image":
        return "[image]"
    return to_json(block)


def render_message(message: Message) -> str:
    """One message as the summarizer reads it (`### role` and its text, calls and shortened results)."""
    text = "\n".join(part for part in (_block_text(block) for block in message.content) if part)
    return f"### {message.role}\n{text}"


def previous_checkpoint(messages: Sequence[Message]) -> str:
    """The summary a range already holds (a previous compaction's), which the new one merges, or ''."""
    return "\n\n".join(summary_text(message) for message in messages if is_summary(message))


def first_user_request(messages: Sequence[Message]) -> str | None:
    """The text of the first message a person typed in `messages` (the task), if any."""
    for message in messages:
        if message.source["kind"] == "user" and message.text:
            return message.text
    return None


def transcript_parts(messages: Sequence[Message], max_chars: int) -> list[str]:
    """The transcript of `messages` (summaries left out) in parts of at most about `max_chars` each.

    Messages are kept whole and in order; a part holds as many as fit, and a message longer
    than `max_chars` is shortened to its head and tail: to what is left of the current part when
    that is at least half a part, else to a part of its own.
    """
    if max_chars < 1:
        raise ValueError(f"transcript_parts: max_chars must be >= 1, not {max_chars}")
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for message in messages:
        if is_summary(message):
            continue
        text = render_message(message)
        room = max_chars - size - (2 if current else 0)
        # A message too long for any part is cut anyway: to what is left of this part, if that is half a part.
        keep = room if len(text) > max_chars and room >= max_chars // 2 else max_chars
        text = keep_head_and_tail(text, max(1, keep - _MARKER_CHARS))
        if current and size + 2 + len(text) > max_chars:
            parts.append("\n\n".join(current))
            current, size = [], 0
        current.append(text)
        size += len(text) + (2 if size else 0)
    if current:
        parts.append("\n\n".join(current))
    return parts


def summary_request(
    previous: str,
    transcript: str,
    *,
    budget: int,
    instructions: str | None,
    config: Any,
    request: str | None = None,
    part: tuple[int, int] = (1, 1),
) -> ModelRequest:
    """The one-shot request asking the summarizer for the checkpoint of one part of a range.

    `previous` is the checkpoint so far (a summary inside the range, or the previous part's),
    `transcript` the part's messages (`transcript_parts`), `request` the user's first request of
    the range, shown in every part after the one holding it, and `part` is (number, count).
    """
    parts = [SUMMARY_PROMPT.format(budget=budget)]
    if instructions:
        parts.append(f"Additional instructions: {instructions}")
    number, count = part
    if count > 1:
        parts.append(
            f"The conversation is too long for one request: this is part {number} of {count}, oldest first. "
            "Merge it into the checkpoint so far; the user's first request is repeated for context."
        )
    if request is not None and number > 1:
        parts.append(f"<first-user-request>\n{request}\n</first-user-request>")
    if previous:
        parts.append(f"<previous-checkpoint>\n{previous}\n</previous-checkpoint>")
    parts.append(f"<conversation>\n{transcript}\n</conversation>")
    prompt = create_user_message("\n\n".join(parts), source={"kind": "plugin", "plugin": COMPACT_PLUGIN})
    return ModelRequest([prompt], system=SUMMARY_SYSTEM, config=config)


def summary_message(text: str, compaction_id: str) -> Message:
    """The new user message that replaces the range (source plugin `compact`)."""
    return create_user_message(
        [{"type": "text", "text": _PREAMBLE}, {"type": "text", "text": text}, {"type": "text", "text": _CLOSE}],
        source={"kind": "plugin", "plugin": COMPACT_PLUGIN, COMPACTION_ID: compaction_id},
    )


def pruned_result(message: Message, keep_chars: int) -> Message:
    """The same tool result (same id) with each long text's middle replaced by a marker."""
    blocks: list[Any] = []
    for block in message.content:
        if block.get("type") == "tool_result":
            inner = [
                {**item, "text": keep_head_and_tail(item["text"], keep_chars)} if item.get("type") == "text" else item
                for item in block["content"]
            ]
            blocks.append({**block, "content": inner})
        else:
            blocks.append(block)
    return message.with_content(blocks)


__all__ = [
    "COMPACT_PLUGIN",
    "first_user_request",
    "render_message",
    "transcript_parts",
    "SUMMARY_PROMPT",
    "SUMMARY_SYSTEM",
    "is_summary",
    "pruned_result",
    "previous_checkpoint",
    "keep_head_and_tail",
    "summary_message",
    "summary_request",
    "summary_text",
]
