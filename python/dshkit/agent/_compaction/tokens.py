"""The token meter: how large the next model request is, read from the log, kept incrementally.

The reading is the provider's own count where the log has one and an estimate where it has not:
the latest assistant message that carries usage gives ``input_tokens + output_tokens`` for the
header and every surface node up to and including it; every node after it is estimated with
`estimate_message`. A usage is trusted only while it still describes the request prefix: a new
`request/header` or a replacement of a node it counted (a prune, a summary) drops it, and the
reading is the estimate of the header and every node until the next usage arrives.

The meter folds the log's events one at a time, as `Surface.fold` does, into a list of per-node
estimates that mirrors the surface. `TokenMeter.reading()` folds only the events appended since
the last reading: O(new messages) a step. Nothing is kept outside the log: a meter built on a
re-opened session reads the same number (decision record: `docs/decisions/agent-compaction.md`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dshkit import Message, to_json
from dshkit.models.stream_translation import usage_summary
from dshkit.session import Session
from dshkit.session.events import ASSISTANT_MESSAGE, MESSAGE_EVENT_TYPES, REQUEST_HEADER, SURFACE_APPEND, USER_MESSAGE
from dshkit.session._surface import is_model_visible

CHARS_PER_TOKEN = 4
"""The estimate's rate: about four characters of English or code a token (the original and pi)."""
MESSAGE_OVERHEAD = 4
"""Tokens a message costs beyond its blocks (role and separators in every API's template)."""
BLOCK_OVERHEAD = 2
"""Tokens a content block costs beyond its text (its wrapper, a call's id)."""
IMAGE_TOKENS = 1200
"""An image's estimate, whatever its size (what pi assumes; providers bill ~1,000-1,600)."""


def _chars(block: Mapping[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text" or kind == "reasoning":
        return len(block.get("text", ""))
    if kind == "tool_call":
        return len(block.get("name", "")) + len(block.get("arguments", ""))
    if kind == "tool_result":
        return sum(_chars(inner) + BLOCK_OVERHEAD * CHARS_PER_TOKEN for inner in block.get("content", ()))
    if kind == "image":
        return IMAGE_TOKENS * CHARS_PER_TOKEN
    return len(to_json(block))  # a block kind the estimate does not know: its JSON text


def estimate_message(message: Message) -> int:
    """The estimated tokens of one message: ~4 characters a token plus small per-message/block overheads."""
    chars = 0
    for block in message.content:
        chars += _chars(block)
    return MESSAGE_OVERHEAD + BLOCK_OVERHEAD * len(message.content) + -(-chars // CHARS_PER_TOKEN)


def estimate_text(text: str) -> int:
    """The estimated tokens of a text (a system prompt, a summary budget's check)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_header(header: Mapping[str, Any]) -> int:
    """The estimated tokens of a request header's system prompt and tool specs."""
    system = header.get("system")
    tokens = estimate_text(system) if isinstance(system, str) else (estimate_text(to_json(system)) if system else 0)
    for tool in header.get("tools", ()) or ():
        tokens += BLOCK_OVERHEAD + estimate_text(to_json(tool))
    return tokens


def usage_tokens(usage: object) -> int | None:
    """The provider's count of a response's request and answer (``input + output``), if it gave one."""
    if not isinstance(usage, Mapping):
        return None
    summary = usage_summary(usage)
    if "input_tokens" not in summary:
        return None
    return summary["input_tokens"] + summary.get("output_tokens", 0)


def format_tokens(tokens: int) -> str:
    """A token count as people read it: `950`, `12.3k`, `128k`, `1.2M`."""
    for size, suffix in ((1_000_000, "M"), (1000, "k")):
        if tokens >= size:
            text = f"{tokens / size:.1f}".removesuffix(".0") if tokens < 100 * size else str(round(tokens / size))
            return text + suffix
    return str(tokens)


def meter_label(tokens: int, window: int | None) -> str:
    """`[12.3k/128k]`: the meter's reading and the window (`[12.3k]` when the window is unknown)."""
    return f"[{format_tokens(tokens)}/{format_tokens(window)}]" if window else f"[{format_tokens(tokens)}]"


class TokenMeter:
    """The size of the next request of one session, in tokens (`reading()`).

    `provider_based` says whether the reading starts from a provider's usage (else it is all
    estimate). Build one per session; it follows the log as it grows.
    """

    __slots__ = ("_session", "_folded", "_nodes", "_header", "_anchor", "_anchor_nodes", "_after_anchor", "_total")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._folded = 0  # events folded so far
        self._nodes: list[int] = []  # the estimate of each surface node, in surface order
        self._total = 0  # sum(self._nodes)
        self._header = 0  # estimate of the latest header
        self._anchor: int | None = None  # the trusted usage (header + nodes[:anchor_nodes]), if any
        self._anchor_nodes = 0
        self._after_anchor = 0  # sum(self._nodes[anchor_nodes:])

    @property
    def provider_based(self) -> bool:
        """True when the reading starts from a provider's usage rather than the estimate alone."""
        self._catch_up()
        return self._anchor is not None

    def reading(self) -> int:
        """Tokens of the request the log defines now (folds the events appended since the last call)."""
        self._catch_up()
        if self._anchor is not None:
            return self._anchor + self._after_anchor
        return self._header + self._total

    def estimate(self) -> int:
        """The estimate alone (header and every node), ignoring any provider usage."""
        self._catch_up()
        return self._header + self._total

    def node_estimates(self) -> list[int]:
        """The estimate of each message of `session.messages()`, in order (a copy)."""
        self._catch_up()
        return list(self._nodes)

    def _catch_up(self) -> None:
        events = self._session.events
        end = len(events)
        seq = self._folded
        while seq < end:
            event = events[seq]
            seq += 1
            if event.type in MESSAGE_EVENT_TYPES:
                self._fold_message(event)
            elif event.type == REQUEST_HEADER:
                self._header = estimate_header(event.data["header"])
                self._anchor = None  # the usage counted another header
        self._folded = end

    def _fold_message(self, event: Any) -> None:
        op = event.surface_op
        if op is None:
            return  # a message the original harness logged off its surface: never sent
        message: Message = event.data if event.type == USER_MESSAGE else event.data["message"]
        visible = is_model_visible(message)
        tokens = estimate_message(message) if visible else 0
        if op == SURFACE_APPEND:
            if not visible:
                return
            self._nodes.append(tokens)
            self._total += tokens
            self._after_anchor += tokens
            if event.type == ASSISTANT_MESSAGE and not event.data.get("interrupted", False):
                counted = usage_tokens(event.data.get("usage"))
                if counted is not None:
                    self._anchor, self._anchor_nodes, self._after_anchor = counted, len(self._nodes), 0
            return
        start, stop = op["start"], op["end"]
        replaced = self._nodes[start:stop]
        self._nodes[start:stop] = [tokens] if visible else []
        delta = (tokens if visible else 0) - sum(replaced)
        self._total += delta
        if self._anchor is None:
            return
        if start >= self._anchor_nodes:
            self._after_anchor += delta
        else:  # a node the usage counted changed: the estimate until the next usage
            self._anchor = None


__all__ = [
    "CHARS_PER_TOKEN",
    "TokenMeter",
    "estimate_header",
    "estimate_message",
    "estimate_text",
    "format_tokens",
    "meter_label",
    "usage_tokens",
]
