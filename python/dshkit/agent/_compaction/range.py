"""Where compaction cuts the history: pure functions of the surface and its token estimates.

`choose_summary_range` is the cut: the oldest run of messages that a summary replaces. A cut
may fall anywhere, inside one long turn too, except where a tool call would be left without its
result or a result without its call: between an assistant message with calls and the last of
its results, and after a call that has no result yet (the running step's). `prunable_results`
picks the old, large tool results that pruning shortens first.
"""

from __future__ import annotations

from collections.abc import Sequence

from dshkit import Message


def cut_points(messages: Sequence[Message]) -> list[int]:
    """Every position `p` (1..len) where `messages[:p]` holds no tool call without its result.

    A range `messages[0:p]` replaced by one message then separates no call from its result and
    touches no unanswered call: such a call stays open up to the end, so no later point is one.
    """
    points: list[int] = []
    open_calls: set[str] = set()
    for position, message in enumerate(messages, 1):
        if message.role == "assistant":
            for call in message.tool_calls:
                open_calls.add(str(call.get("id")))
        elif message.source["kind"] == "tool":
            open_calls.discard(str(message.source.get("call_id")))
        if not open_calls:
            points.append(position)
    return points


def choose_summary_range(messages: Sequence[Message], tokens: Sequence[int], keep_tokens: int) -> int:
    """The cut: how many of the oldest `messages` a summary replaces (0 when no cut is possible).

    `tokens[i]` is the estimate of `messages[i]`. The newest messages worth up to `keep_tokens`
    are kept verbatim, and always the newest one: the cut is the earliest cut point
    (`cut_points`) that keeps no more than that, or, when none does (a long run of one step's
    results at the end), the latest cut point before it, which keeps more.
    """
    if len(tokens) != len(messages):
        raise ValueError(f"choose_summary_range: {len(tokens)} token estimates for {len(messages)} messages")
    if keep_tokens < 0:
        raise ValueError(f"choose_summary_range: keep_tokens must be >= 0, not {keep_tokens}")
    desired = kept_start(tokens, keep_tokens)
    points = cut_points(messages)
    if points and points[-1] == len(messages):
        points.pop()  # the newest message always stays: the request goes on from it
    later = [point for point in points if point >= desired]
    if later:
        return later[0]
    return points[-1] if points else 0


def kept_start(tokens: Sequence[int], keep_tokens: int) -> int:
    """The first position of the newest run of messages worth up to `keep_tokens` (the recent ones)."""
    start = len(tokens)
    kept = 0
    while start > 0 and kept + tokens[start - 1] <= keep_tokens:
        start -= 1
        kept += tokens[start]
    return start


def prunable_results(messages: Sequence[Message], tokens: Sequence[int], keep_tokens: int, over_tokens: int) -> list[int]:
    """Positions of the tool results older than the recent `keep_tokens` that cost more than `over_tokens`."""
    end = kept_start(tokens, keep_tokens)
    return [
        position
        for position in range(end)
        if tokens[position] > over_tokens and messages[position].source["kind"] == "tool"
    ]


__all__ = ["choose_summary_range", "cut_points", "kept_start", "prunable_results"]
