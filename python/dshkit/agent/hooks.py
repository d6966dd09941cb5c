"""Agent hooks: `pre_step` (Enter / Reject), `turn_stopping`, `request`, `request_error`.

`hooks` maps a hook name to a callable taking one context object; it may be sync or async.

- ``pre_step(ctx: PreStepContext) -> Enter | Reject``: decides what the step admits.
  ``ctx.messages`` are the claimed messages. `Enter` lists the final batch: a claimed message
  as is, a same-id rewrite of it (``message.with_content(...)``: same id, role and source), or
  added context (a new user message whose id is new to the session). `Reject` ends the turn
  ``blocked``; the claimed batch is not requeued.
- ``turn_stopping(ctx: TurnStoppingContext) -> None``: called at a natural stop or a
  ``max_tokens`` stop (``ctx.reason``) with nothing pending; ``ctx.steer(message)`` continues the
  turn with one more step (a `pre_step` that admits nothing of it ends the turn after all).
- ``request(ctx: RequestContext) -> Mapping | None``: may change call settings only: mutate
  ``ctx.config`` or return a new mapping of settings. Messages change only through logged
  channels, so the hook gets no way to change them. ``ctx.cancel`` is the turn's cancel token.
- ``request_error(ctx: RequestErrorContext) -> bool``: return True to retry the request within
  the same step (re-derived from the log); the failed attempt's chunks stay in the log.
- ``pre_tool`` and ``post_tool`` (a callable or a list of them): around each tool call; see
  `dshkit.agent.tool_hooks`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from dshkit.agent._user_code import call_sync_or_async
from dshkit.agent.cancel import CancelToken
from dshkit.agent._input.checks import check_message_batch
from dshkit.llm import Message

if TYPE_CHECKING:
    from dshkit.session import Session

HOOK_NAMES = ("pre_step", "turn_stopping", "request", "request_error", "pre_tool", "post_tool")
_LISTED = ("pre_tool", "post_tool")  # hooks that may be a list of callables (dshkit.agent.tool_hooks)

Hook = Callable[[Any], Union[Any, Awaitable[Any]]]
HookEntry = Union[Hook, Sequence[Hook]]  # `pre_tool` and `post_tool` may be a list of hooks


class Enter:
    """`pre_step` result: enter a step with this final batch of user messages, in order."""

    __slots__ = ("messages",)

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self.messages: tuple[Message, ...] = check_message_batch(messages, "Enter messages")

    def __repr__(self) -> str:
        return f"Enter({[message.id for message in self.messages]!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Enter) and other.messages == self.messages

    def __hash__(self) -> int:
        return hash(("Enter", self.messages))


class Reject:
    """`pre_step` result: do not enter; the turn ends ``blocked`` (with `reason` if given)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str | None = None) -> None:
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"Reject reason: expected a str or None, got {type(reason).__name__}")
        self.reason = reason

    def __repr__(self) -> str:
        return f"Reject({self.reason!r})" if self.reason is not None else "Reject()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reject) and other.reason == self.reason

    def __hash__(self) -> int:
        return hash(("Reject", self.reason))


@dataclass(frozen=True)
class PreStepContext:
    """What `pre_step` sees: the claimed messages of this step, in claim order."""

    messages: tuple[Message, ...]
    turn: int
    step: int
    cancel: CancelToken
    session: Session


@dataclass(frozen=True)
class TurnStoppingContext:
    """What `turn_stopping` sees; ``ctx.steer(message)`` continues the turn."""

    turn: int
    step: int
    cancel: CancelToken
    session: Session
    steer: Callable[[Message], None]
    reason: str = "completed"  # how the last step stopped: "completed", "max_tokens" or "concluded" (by a tool)


@dataclass
class RequestContext:
    """What `request` sees: the header about to be used; only `config` may change."""

    turn: int
    step: int
    attempt: int
    system: str | None
    tools: tuple[Mapping[str, Any], ...]
    messages: tuple[Message, ...]
    cancel: CancelToken
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestErrorContext:
    """What `request_error` sees: the failure of attempt number `attempt` (from 1)."""

    turn: int
    step: int
    attempt: int
    error: BaseException
    cancel: CancelToken


async def request_hook_config(hook: Hook, ctx: RequestContext) -> Mapping[str, Any]:
    """The call settings the `request` hook leaves: `ctx.config` as it changed it when it returns
    None, or the mapping it returns; any other answer is a `TypeError`."""
    returned = await call_sync_or_async(hook, ctx)
    if returned is None:
        return ctx.config
    if isinstance(returned, Mapping):
        return returned
    raise TypeError(f"request hook: expected None or a mapping of call settings, got {type(returned).__name__}")


def check_hooks(hooks: Mapping[str, HookEntry] | None) -> dict[str, Any]:
    """Validate a hooks mapping: known names, callable values."""
    if hooks is None:
        return {}
    if not isinstance(hooks, Mapping):
        raise TypeError(f"Agent hooks: expected a mapping of hook name to callable, got {type(hooks).__name__}")
    checked: dict[str, Any] = {}  # a hook, or for the tool hooks a tuple of them
    for name, hook in hooks.items():
        if name not in HOOK_NAMES:
            raise ValueError(f"Agent hooks: unknown hook {name!r} (known: {', '.join(HOOK_NAMES)})")
        if name in _LISTED and isinstance(hook, (list, tuple)):
            for index, item in enumerate(hook):
                if not callable(item):
                    raise TypeError(f"Agent hooks[{name!r}][{index}]: expected a callable, got {type(item).__name__}")
            checked[name] = tuple(hook)
            continue
        if not callable(hook):
            raise TypeError(f"Agent hooks[{name!r}]: expected a callable, got {type(hook).__name__}")
        checked[name] = hook
    return checked


__all__ = [
    "HOOK_NAMES",
    "Enter",
    "Hook",
    "HookEntry",
    "PreStepContext",
    "Reject",
    "RequestContext",
    "RequestErrorContext",
    "TurnStoppingContext",
    "check_hooks",
    "request_hook_config",
]
