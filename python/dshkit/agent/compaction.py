"""Automatic compaction: `Compaction` (the settings) and `Compactor` (the policy that applies them).

Before each request the agent asks `Compactor.before_request`: when the token meter reads more
than `threshold` of the context window, old large tool results are pruned first (same id, head
and tail kept), and if the request is still too large the oldest messages are summarized into
one new message. A provider's "context window exceeded" error compacts once (`on_overflow`) and
the step is retried. Every change is logged: `compaction/prune` before a pruned result's
replacement, and `compaction/start`, `compaction/summary`, the summary's `user/message`,
`compaction/end` (with `error` when it failed) around a summary.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dshkit import Message, new_message_id
from dshkit.agent._turn.assembly import StreamAssembler
from dshkit.agent.cancel import CancelToken
from dshkit.agent._compaction.range import choose_summary_range, prunable_results
from dshkit.agent._turn.stream_cut import read_until_cut
from dshkit.agent._compaction.summary import (
    first_user_request,
    is_summary,
    keep_head_and_tail,
    previous_checkpoint,
    pruned_result,
    summary_message,
    summary_request,
    transcript_parts,
)
from dshkit.agent._compaction.tokens import CHARS_PER_TOKEN, TokenMeter, estimate_message, usage_tokens
from dshkit.models.protocol import Model, ModelError
from dshkit.session import Session
from dshkit.session.compactions import end_record, start_record, summary_record
from dshkit.session.events import COMPACTION_END, COMPACTION_PRUNE, COMPACTION_START, COMPACTION_SUMMARY, USER_MESSAGE, replace_op

_log = logging.getLogger("dshkit.agent")

MIN_PART_CHARS = 2000
"""The least transcript one summarizer call reads, however small its window."""
REQUEST_CHARS = 4000
"""The most of the user's first request repeated with each part of a summary in parts (head and tail)."""
SUMMARY_NOT_SMALLER = "summary_not_smaller"
"""The `compaction/end` error of a summary refused because it is not smaller than what it replaces."""


@dataclass(frozen=True)
class Compaction:
    """Settings of automatic compaction (`Agent(..., compaction=Compaction(...))`).

    `context_window`: the model's window in tokens (default: the model's `context_window`
    attribute; when neither is known compaction warns once and stays off). `threshold`: the share
    of the window a request may fill before compaction (0.8). `keep_recent_tokens`: how much of
    the newest history is kept verbatim (default: a quarter of the window). `summary_tokens`:
    the summary's budget (default: a tenth of the window, at most 8,000). `summarizer`: a
    separate model that writes summaries (default: the agent's). `prune_over_tokens`: tool
    results older than the kept history and larger than this are pruned first (default: a
    fiftieth of the window, at least 200); `prune_keep_chars`: the characters a pruned result
    keeps (half head, half tail).
    """

    context_window: int | None = None
    threshold: float = 0.8
    keep_recent_tokens: int | None = None
    summary_tokens: int | None = None
    summarizer: Model | None = None
    prune_over_tokens: int | None = None
    prune_keep_chars: int = 1200

    def __post_init__(self) -> None:
        for name in ("context_window", "keep_recent_tokens", "summary_tokens", "prune_over_tokens"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < (1 if name != "keep_recent_tokens" else 0)):
                raise ValueError(f"Compaction {name}: expected a positive int or None, got {value!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) or not 0 < self.threshold <= 1:
            raise ValueError(f"Compaction threshold: expected a number in (0, 1], got {self.threshold!r}")
        if type(self.prune_keep_chars) is not int or self.prune_keep_chars < 0:
            raise ValueError(f"Compaction prune_keep_chars: expected an int >= 0, got {self.prune_keep_chars!r}")
        if self.summarizer is not None and not callable(getattr(self.summarizer, "stream", None)):
            raise TypeError(f"Compaction summarizer: expected a model, got {type(self.summarizer).__name__}")


class CompactionFailed(Exception):
    """A summary could not be made (the error is logged in `compaction/end`); `code` says why."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class Compactor:
    """Applies `Compaction` to one agent's session: the meter, pruning and summaries."""

    def __init__(self, settings: Compaction | None, model: Model, session: Session) -> None:
        self._settings = settings
        self._model = model
        self._session = session
        self.meter = TokenMeter(session)
        window = settings.context_window if settings is not None else None
        if window is None:
            found = getattr(model, "context_window", None)
            window = found if type(found) is int and found > 0 else None
        self.window: int | None = window
        self._warned = False
        self._failed_at: int | None = None  # the reading when an automatic summary last failed

    @property
    def enabled(self) -> bool:
        """Whether automatic compaction is on (settings given and the window known)."""
        if self._settings is None:
            return False
        if self.window is None:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"compaction is off: the context window of {self._model.provider}/{self._model.model} is unknown "
                    "(give Compaction(context_window=...))",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return False
        return True

    def _keep_tokens(self, reading: int) -> int:
        settings = self._settings or Compaction()
        if settings.keep_recent_tokens is not None:
            return settings.keep_recent_tokens
        return (self.window if self.window is not None else reading) // 4

    def _summary_tokens(self) -> int:
        settings = self._settings or Compaction()
        if settings.summary_tokens is not None:
            return settings.summary_tokens
        return max(256, min(8000, (self.window or 80_000) // 10))

    # -- the policy ---------------------------------------------------------------------------

    async def before_request(self, turn: int | None, token: CancelToken) -> None:
        """Compact when the next request is over the threshold: prune, re-measure, then summarize."""
        if not self.enabled:
            return
        assert self._settings is not None and self.window is not None
        limit = self._settings.threshold * self.window
        if self.meter.reading() <= limit:
            return
        self.prune()
        reading = self.meter.reading()
        if reading <= limit:
            return
        if self._failed_at is not None and reading < self._failed_at + self.window // 20:
            return  # it failed a moment ago: try again once the history grew by 5% of the window
        try:
            await self.summarize(turn, token, reason="threshold")
            self._failed_at = None
        except CompactionFailed as exc:
            self._failed_at = reading
            _log.warning("compaction failed (%s): %s", exc.code, exc)

    async def on_overflow(self, turn: int | None, token: CancelToken) -> bool:
        """The provider said the request is too large: prune and summarize once; True if anything was replaced."""
        pruned = self.prune(force=True)
        try:
            summary = await self.summarize(turn, token, reason="overflow")
        except CompactionFailed as exc:
            _log.warning("compaction after a context overflow failed (%s): %s", exc.code, exc)
            summary = None
        return pruned > 0 or summary is not None

    def prune(self, *, force: bool = False) -> int:
        """Shorten old large tool results in place (same ids); returns how many were pruned."""
        settings = self._settings or Compaction()
        messages = self._session.messages()
        tokens = self.meter.node_estimates()
        window = self.window or self.meter.reading()
        over = settings.prune_over_tokens if settings.prune_over_tokens is not None else max(200, window // 50)
        keep = 0 if force else self._keep_tokens(sum(tokens))
        pruned = 0
        for position in prunable_results(messages, tokens, keep, over):
            old = messages[position]
            new = pruned_result(old, settings.prune_keep_chars)
            after = estimate_message(new)
            if after >= tokens[position]:
                continue  # nothing long enough to shorten
            seq = self._session.message_event(old.id).seq
            self._session.append(
                COMPACTION_PRUNE,
                {
                    "shadowed_range": {"start": seq, "end": seq},
                    "shadowed_seqs": [seq],
                    "shadowed_token_count": tokens[position],
                    "token_count_after": after,
                },
            )
            self._session.replace(new)
            pruned += 1
        return pruned

    async def summarize(
        self, turn: int | None, token: CancelToken, *, reason: str, instructions: str | None = None
    ) -> Message | None:
        """Summarize the oldest range into one new message; None when there is no range to cut.

        Raises `CompactionFailed` (after logging `compaction/end` with the error) when the
        summarizer failed, was cancelled, or wrote a summary not smaller than its source.
        """
        session = self._session
        messages = session.messages()
        tokens = self.meter.node_estimates()
        before = self.meter.reading()
        end = choose_summary_range(messages, tokens, self._keep_tokens(before))
        if all(is_summary(message) for message in messages[:end]):
            return None  # nothing older than the kept history but a summary: no cut
        compaction_id = new_message_id()
        start_event = session.append(COMPACTION_START, start_record(compaction_id, turn, reason))
        try:
            return await self._write_summary(compaction_id, start_event.seq, turn, token, messages[:end], tokens[:end], before, instructions)
        except BaseException as exc:
            code, cause = _failure(exc, token)
            session.append(COMPACTION_END, end_record(compaction_id, turn, f"{code}: {cause}"))
            if isinstance(exc, CompactionFailed) or not isinstance(exc, Exception):
                raise
            raise CompactionFailed(cause, code) from exc

    async def _write_summary(
        self,
        compaction_id: str,
        start_seq: int,
        turn: int | None,
        token: CancelToken,
        replaced: Any,
        tokens: list[int],
        before: int,
        instructions: str | None,
    ) -> Message:
        settings = self._settings or Compaction()
        model = settings.summarizer if settings.summarizer is not None else self._model
        budget = self._summary_tokens()
        text, usage = await self._summarize_in_parts(model, replaced, budget, instructions, token)
        summary = summary_message(text, compaction_id)
        shadowed = sum(tokens)
        after_summary = estimate_message(summary)
        if after_summary >= shadowed:
            raise CompactionFailed(
                f"the summary ({after_summary} tokens) is not smaller than the {shadowed} tokens it would replace",
                SUMMARY_NOT_SMALLER,
            )
        session = self._session
        current = session.messages()
        if len(current) < len(replaced) or any(current[i].id != replaced[i].id for i in range(len(replaced))):
            raise CompactionFailed("the history changed while the summary was written", "history_changed")
        seqs = [session.message_event(message.id).seq for message in replaced]
        data = summary_record(
            compaction_id, text, seqs, shadowed, provider=model.provider, model=model.model, max_tokens=budget,
            usage=usage, tokens_before=before, tokens_after=before - shadowed + after_summary,
        )
        summary_event = session.append(COMPACTION_SUMMARY, data)
        session.append(
            USER_MESSAGE, summary, surface_op=replace_op(0, len(replaced)), source_event_seqs=(start_seq, summary_event.seq, *seqs)
        )
        session.append(COMPACTION_END, end_record(compaction_id, turn))
        return summary

    def _part_chars(self, model: Model, budget: int, request: str | None) -> int:
        """How much transcript one summarizer call reads: its window less the prompt (~1,000 tokens),
        the checkpoint so far and the answer (a budget each) and the user's first request."""
        settings = self._settings or Compaction()
        window = getattr(model, "context_window", None) if settings.summarizer is not None else None
        window = window if type(window) is int and window > 0 else self.window
        if window is None:
            return 1 << 62  # nothing known to fit: one call
        room = (window - 2 * budget - 1000) * CHARS_PER_TOKEN - len(request or "")
        return max(MIN_PART_CHARS, room)

    async def _summarize_in_parts(
        self, model: Model, replaced: Any, budget: int, instructions: str | None, token: CancelToken
    ) -> tuple[str, Mapping[str, Any] | None]:
        """The summary of `replaced`: one call, or, for a range too big for one, one call a part,
        oldest first, each merging its part into the previous part's summary."""
        previous = previous_checkpoint(replaced)
        request = first_user_request(replaced)
        if request is not None:
            request = keep_head_and_tail(request, REQUEST_CHARS)
        parts = transcript_parts(replaced, self._part_chars(model, budget, request)) or [""]
        config = _budget_config(budget)
        usage: dict[str, Any] | None = None
        for number, part in enumerate(parts, 1):
            ask = summary_request(
                previous, part, budget=budget, instructions=instructions, config=config, request=request, part=(number, len(parts))
            )
            previous, used = await self._ask(model, ask, token)
            usage = _add_usage(usage, used)
        return previous, usage

    async def _ask(self, model: Model, request: Any, token: CancelToken) -> tuple[str, Mapping[str, Any] | None]:
        """One summarizer call: its text and usage (`CompactionFailed` when it failed, was cut or wrote nothing)."""
        assembler = StreamAssembler()
        stream = model.stream(request, token)

        async def read() -> None:
            try:
                async for chunk in stream:
                    assembler.add(chunk)
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()

        if not await read_until_cut(read(), token):
            raise CompactionFailed("the summary was cancelled", "cancelled")
        if assembler.finish_reason == "error":
            error: Mapping[str, Any] = assembler.error or {}
            raise CompactionFailed(str(error.get("message", "the summarizer failed")), str(error.get("code", "model_error")))
        text = "\n".join(block["text"] for block in assembler.content(tool_calls=False) if block.get("type") == "text").strip()
        if not text:
            raise CompactionFailed("the summarizer wrote no text", "empty_summary")
        return text, assembler.usage


def _failure(exc: BaseException, token: CancelToken) -> tuple[str, str]:
    """The code and cause a failed compaction's `compaction/end` names (never an empty cause)."""
    if isinstance(exc, (CompactionFailed, ModelError)):
        return exc.code, str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.CancelledError) or token.cancelled:
        return "cancelled", "the task running the compaction was cancelled before the summary was written"
    return "exception", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _add_usage(total: dict[str, Any] | None, used: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The usage of several summarizer calls: their counts added up."""
    if used is None:
        return total
    if total is None:
        return dict(used)
    for key, value in used.items():
        if type(value) is int and type(total.get(key, 0)) is int:
            total[key] = total.get(key, 0) + value
    return total


def _budget_config(budget: int) -> dict[str, int]:
    """The call setting that caps the summary's length, in the common vocabulary
    (`dshkit.models.settings.ModelSettings`): each model maps ``max_tokens`` to its API's name."""
    return {"max_tokens": budget}


__all__ = ["SUMMARY_NOT_SMALLER", "Compaction", "CompactionFailed", "Compactor", "usage_tokens"]
