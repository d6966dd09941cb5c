"""The tool hooks: `pre_tool` decides whether a call runs, `post_tool` may amend its result.

- ``pre_tool(ctx: PreToolContext) -> Allow() | Deny(reason) | Ask(reason) | None``: called after
  the arguments passed validation, before the approval policy. ``None`` is no opinion (allow).
  Several hooks combine strictest first: deny > ask > allow. A hook that raises, or returns
  anything else, denies: a gate fails closed.
- ``post_tool(ctx: PostToolContext) -> Amend(...) | None``: called after the body, in order, each
  seeing the content as the hooks before it left it; `Amend(content=...)` replaces the content the
  model gets (e.g. redacts a secret), `Amend(context=[...])` queues user messages for the next step.
  ``ctx.meta`` is the result's `meta` (logged beside it, never shown to the model): `Amend(meta=...)`
  replaces it, and an `Amend` that replaces the content drops it unless it gives one
  (``Amend(text, meta=ctx.meta)`` keeps it), so a redaction covers everything that is logged.
  A hook that raises withholds the content and the meta (an error result says so): the tool did run.

Hooks see the arguments frozen: they are never rewritten, so the `tool/call` in the log, the
audit of an approval and what the body runs agree.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from dshkit.agent._user_code import call_sync_or_async
from dshkit.agent.cancel import CancelToken
from dshkit.agent._input.checks import check_message_batch
from dshkit.llm import Message

if TYPE_CHECKING:
    from dshkit.session import Session

_log = logging.getLogger("dshkit.agent")

TOOL_HOOK_NAMES = ("pre_tool", "post_tool")


class Allow:
    """`pre_tool` (or approval policy) answer: the call may run."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Allow()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Allow)

    def __hash__(self) -> int:
        return hash("Allow")


class _Reasoned:
    __slots__ = ("reason",)

    def __init__(self, reason: str | None = None) -> None:
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"{type(self).__name__} reason: expected a str or None, got {type(reason).__name__}")
        self.reason = reason

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.reason))


class Deny(_Reasoned):
    """The call does not run; the model gets an error result with `reason`."""

    __slots__ = ()


class Ask(_Reasoned):
    """The call waits for a person's decision (`agent.approve` / `agent.deny`); `reason` is shown."""

    __slots__ = ()


Decision = Union[Allow, Deny, Ask]
_RANK = {Allow: 0, Ask: 1, Deny: 2}


def strictest(decisions: Iterable[Decision]) -> Decision:
    """The combined decision: any deny wins, then any ask, else allow (of one kind, the first
    that gives a reason)."""
    chosen: Decision = Allow()
    for decision in decisions:
        rank, best = _RANK[type(decision)], _RANK[type(chosen)]
        if rank > best or (rank == best and rank and chosen.reason is None and decision.reason is not None):  # type: ignore[union-attr]
            chosen = decision
    return chosen


_KEEP = object()  # `Amend(meta=...)` not given


class Amend:
    """`post_tool` answer: replace the result's content and/or meta, and/or add context for the next step.

    A replaced content drops the result's `meta` unless `meta` is given (see the module doc).
    """

    __slots__ = ("content", "context", "meta", "replaces", "sets_meta")

    def __init__(
        self, content: Any = None, *, context: Iterable[Message] = (), replace: bool | None = None, meta: Any = _KEEP
    ) -> None:
        # `content=None` alone means "keep the content"; `replace=True` replaces it with None ("").
        self.replaces = content is not None if replace is None else bool(replace)
        self.content = content
        self.context = check_message_batch(context, "Amend context")
        self.sets_meta = meta is not _KEEP
        if self.sets_meta and meta is not None and not isinstance(meta, Mapping):
            raise TypeError(f"Amend meta: expected a mapping or None, got {type(meta).__name__}")
        self.meta = meta if self.sets_meta else None

    def __repr__(self) -> str:
        return f"Amend(replaces={self.replaces}, sets_meta={self.sets_meta}, context={len(self.context)})"


@dataclass(frozen=True)
class PreToolContext:
    """What `pre_tool` (and a callable approval policy) sees: the call about to run."""

    call_id: str
    name: str
    arguments: Any  # the parsed arguments, frozen
    raw_arguments: str  # exactly what the model wrote (and the log holds)
    turn: int
    step: int
    cancel: CancelToken
    session: Session


@dataclass(frozen=True)
class PostToolContext:
    """What `post_tool` sees: the call and its result's content (and meta) so far."""

    call_id: str
    name: str
    arguments: Any
    content: Any
    is_error: bool
    turn: int
    step: int
    session: Session
    meta: Any = None  # the result's meta (frozen), logged beside it; None when it has none


ToolHook = Callable[[Any], Union[Any, Awaitable[Any]]]


def as_decision(value: object, where: str) -> Decision:
    """A hook's or policy's answer as a decision; `TypeError` naming `where` for anything else."""
    if value is None:
        return Allow()
    if isinstance(value, (Allow, Deny, Ask)):
        return value
    raise TypeError(f"{where}: expected Allow(), Deny(reason), Ask(reason) or None, got {type(value).__name__}")


async def pre_tool_decision(hooks: Sequence[ToolHook], ctx: PreToolContext) -> Decision:
    """Run every `pre_tool` hook (in order) and combine their answers; a failing hook denies."""
    decisions: list[Decision] = []
    for index, hook in enumerate(hooks):
        try:
            decisions.append(as_decision(await call_sync_or_async(hook, ctx), f"pre_tool hook {index}"))
        except Exception as exc:
            _log.warning("pre_tool hook %d raised for %s (call %s): denied", index, ctx.name, ctx.call_id, exc_info=True)
            decisions.append(Deny(f"a pre_tool hook failed ({type(exc).__name__}: {exc}); the call is denied"))
    return strictest(decisions)


__all__ = [
    "TOOL_HOOK_NAMES",
    "Allow",
    "Amend",
    "Ask",
    "Decision",
    "Deny",
    "PostToolContext",
    "PreToolContext",
    "ToolHook",
    "as_decision",
    "pre_tool_decision",
    "strictest",
]
