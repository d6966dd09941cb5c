"""What stands between a model's tool call and the tool's body: validation, hooks, approval,
the timeout, and the `post_tool` hooks on the way back.

The order for one call (docs/decisions/agent-tool-approvals.md): the arguments are checked
against the tool's schema (invalid: the body does not run, and too many in a turn end it);
`pre_tool` hooks and the approval policy each give Allow, Ask or Deny and the strictest wins; a
session-wide remembered policy answers an Ask; an Ask waits for a person. Then the body runs
(cancelled after its timeout), and `post_tool` hooks may amend the result.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dshkit.agent.approvals import ApprovalBook
from dshkit.agent.calls import call_sync_or_async, is_awaitable
from dshkit.agent.tool_hooks import (
    Amend,
    Ask,
    Deny,
    PostToolContext,
    PreToolContext,
    ToolHook,
    pre_tool_decision,
    strictest,
)
from dshkit.agent.tools import Tool, ToolContext, tool_content
from dshkit.agent.validation import ArgumentValidator, SchemaError, invalid_arguments_text
from dshkit.llm import Message, freeze

RETRIES_EXHAUSTED = "tool_retries_exhausted"


class Refusal(NamedTuple):
    """Why a call's body does not run: the error result's text and its ``error`` mapping."""

    content: str
    error: Mapping[str, str]


class Amended(NamedTuple):
    """A result after the `post_tool` hooks: content, error flag, error mapping, added context."""

    content: Any
    is_error: bool
    error: Mapping[str, str] | None
    context: tuple[Message, ...]


class TimedOut(Exception):
    """A tool body ran past its timeout (and was cancelled)."""

    def text(self, seconds: float) -> str:
        """The error result the model gets."""
        return (
            f"Tool call timed out after {seconds:g} s: it was cancelled before it finished, so its effects are "
            "unknown (it may have done part of its work). Check before running it again."
        )


class ToolGate:
    """The checks around one agent's tool bodies (see the module doc)."""

    def __init__(
        self,
        book: ApprovalBook,
        pre_tool: Sequence[ToolHook] = (),
        post_tool: Sequence[ToolHook] = (),
        tool_timeout: float | None = None,
    ) -> None:
        self.book = book
        self._pre = tuple(pre_tool)
        self._post = tuple(post_tool)
        self._timeout = tool_timeout
        # Per tool name, for the very Tool object they were made for (a refreshed tool source, an MCP
        # server say, may bring a new Tool of the same name with another schema or policy).
        self._validators: dict[str, tuple[Tool, ArgumentValidator | SchemaError | None]] = {}
        self._invalid: dict[tuple[int, str], int] = {}  # (turn, tool) -> calls with invalid arguments
        self._failure: dict[str, Any] | None = None
        self._engaged: dict[str, tuple[Tool, int, bool]] = {}  # tool name -> (tool, book version, engaged)

    def timeout_of(self, tool: Tool) -> float | None:
        """The seconds a body of `tool` may run (its own timeout, else the agent's), None for no limit."""
        return tool.timeout if tool.timeout is not None else self._timeout

    @property
    def amends(self) -> bool:
        """Whether `post_tool` hooks look at results."""
        return bool(self._post)

    def engaged(self, tool: Tool) -> bool:
        """Whether a call of `tool` needs anything of the gate (else it runs as plainly as before)."""
        known = self._engaged.get(tool.name)
        if known is not None and known[0] is tool and known[1] == self.book.version:
            return known[2]
        engaged = bool(
            self._pre or self._post or tool.timeout is not None or self._timeout is not None
            or self._validator(tool) is not None or self.book.has_session_policy
            or self.book.may_gate(tool.name, tool.approval)
        )
        self._engaged[tool.name] = (tool, self.book.version, engaged)  # until a policy is remembered
        return engaged

    def take_failure(self) -> dict[str, Any] | None:
        """The error that ends the turn (a tool's retry budget spent), once; None when there is none."""
        failure, self._failure = self._failure, None
        return failure

    def _validator(self, tool: Tool) -> ArgumentValidator | SchemaError | None:
        known = self._validators.get(tool.name)
        if known is not None and known[0] is tool:
            return known[1]
        schema = tool.parameters
        validator: ArgumentValidator | SchemaError | None
        if _accepts_any_object(schema):
            validator = None  # e.g. {"type": "object", "properties": {}}: nothing to check
        else:
            try:
                validator = ArgumentValidator(tool.name, schema)
            except SchemaError as exc:
                validator = exc
        self._validators[tool.name] = (tool, validator)
        return validator

    # -- before the body ---------------------------------------------------------------------------

    async def admit(self, tool: Tool, raw_arguments: str, arguments: dict[str, Any], ctx: ToolContext) -> Refusal | None:
        """None when the body may run, else why not (the call's error result)."""
        validator = self._validator(tool)
        if isinstance(validator, SchemaError):
            return Refusal(f"Tool {tool.name} cannot run: {validator}", {"name": "SchemaError", "code": "invalid_schema"})
        if validator is not None:
            problems = validator.problems(arguments)
            if problems:
                self._count_invalid(tool, ctx.turn)
                return Refusal(invalid_arguments_text(tool.name, problems), {"name": "InvalidArguments", "code": "invalid_arguments"})
        if not (self._pre or self.book.has_session_policy or self.book.may_gate(tool.name, tool.approval)):
            return None  # allowed by policy, no hook to ask: no decision to make
        pre = PreToolContext(ctx.call_id, tool.name, freeze(arguments), raw_arguments, ctx.turn, ctx.step, ctx.cancel, ctx.session)
        decisions = [await self.book.decide(tool.approval, pre)]
        if self._pre:
            decisions.append(await pre_tool_decision(self._pre, pre))
        decision = self.book.session_override(strictest(decisions))
        if isinstance(decision, Deny):
            why = f": {decision.reason}" if decision.reason else " by its approval policy"
            return Refusal(f"Tool call denied{why}. The tool did not run.", {"name": "Denied", "code": "denied"})
        if isinstance(decision, Ask):
            outcome, reason = await self.book.ask(pre, decision.reason)
            if outcome == "rejected":
                why = f": {reason}" if reason else ""
                return Refusal(f"Tool call denied by the user{why}. The tool did not run.", {"name": "Denied", "code": "denied"})
            if outcome == "cancelled":
                return Refusal(
                    f"Tool call not run: the turn was aborted ({reason or 'cancelled'}) while it waited for approval.",
                    {"name": "Aborted", "code": "approval_cancelled"},
                )
            if outcome != "allowed_once":
                return Refusal(f"Tool call not run: approval {outcome}.", {"name": "Denied", "code": "denied"})
        return None

    def _count_invalid(self, tool: Tool, turn: int) -> None:
        key = (turn, tool.name)
        count = self._invalid.get(key, 0) + 1
        self._invalid = {k: v for k, v in self._invalid.items() if k[0] == turn}  # earlier turns' counts are done
        self._invalid[key] = count
        if count > tool.retries and self._failure is None:
            self._failure = {
                "code": RETRIES_EXHAUSTED,
                "name": "InvalidArguments",
                "tool": tool.name,
                "message": f"tool {tool.name!r} was called with invalid arguments {count} times in this turn "
                f"(retries={tool.retries})",
            }

    # -- the body ----------------------------------------------------------------------------------

    async def run_body(self, tool: Tool, arguments: dict[str, Any], ctx: ToolContext) -> Any:
        """The body's output; `TimedOut` when it ran past its timeout (its task then cancelled).

        A sync body with a timeout runs in a worker thread, so that the wait can end: the thread
        itself cannot be stopped and finishes on its own (its outcome is then ignored).
        """
        timeout = self.timeout_of(tool)
        output: Any
        if timeout is None:
            output = tool.run(arguments, ctx)
            return await output if is_awaitable(output) else output
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if inspect.iscoroutinefunction(tool.run) or inspect.iscoroutinefunction(getattr(tool.run, "__call__", None)):
            output = tool.run(arguments, ctx)
        else:
            output = await _within(loop.run_in_executor(None, tool.run, arguments, ctx), deadline, loop)
        if is_awaitable(output):
            output = await _within(output, deadline, loop)
        return output

    # -- after the body ----------------------------------------------------------------------------

    async def amend(
        self, tool: Tool, arguments: dict[str, Any], ctx: ToolContext, content: Any, is_error: bool, error: Mapping[str, str] | None
    ) -> Amended:
        """The result after the `post_tool` hooks (in order); a failing hook withholds the content."""
        context: list[Message] = []
        for index, hook in enumerate(self._post):
            post = PostToolContext(ctx.call_id, tool.name, freeze(arguments), content, is_error, ctx.turn, ctx.step, ctx.session)
            try:
                answer = await call_sync_or_async(hook, post)
                if answer is not None and not isinstance(answer, Amend):
                    raise TypeError(f"post_tool hook {index}: expected Amend(...) or None, got {type(answer).__name__}")
            except Exception as exc:
                return Amended(
                    f"The tool ran, but its result was withheld: a post_tool hook failed ({type(exc).__name__}: {exc}).",
                    True, {"name": type(exc).__name__, "code": "post_tool_failed"}, tuple(context),
                )
            if answer is not None:
                if answer.replaces:
                    try:
                        content = tool_content(answer.content)
                    except (TypeError, ValueError) as exc:
                        return Amended(
                            f"The tool ran, but its result was withheld: a post_tool hook gave content that is not "
                            f"JSON ({exc}).", True, {"name": type(exc).__name__, "code": "post_tool_failed"}, tuple(context),
                        )
                context.extend(answer.context)
        return Amended(content, is_error, error, tuple(context))


_NO_CONSTRAINT = frozenset({"type", "properties", "additionalProperties", "required", "$schema", "title", "description"})


def _accepts_any_object(schema: Mapping[str, Any]) -> bool:
    """Whether the schema lets every JSON object through (the arguments are one already)."""
    return (
        set(schema) <= _NO_CONSTRAINT
        and schema.get("type", "object") == "object"
        and not schema.get("properties")
        and not schema.get("required")
        and schema.get("additionalProperties", True) is True
    )


async def _within(awaitable: Any, deadline: float, loop: asyncio.AbstractEventLoop) -> Any:
    """`awaitable`'s result, or `TimedOut` (cancelling it) once `deadline` passed."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait((task,), timeout=max(0.0, deadline - loop.time()))
    except BaseException:  # the agent's own task is cancelled: the body goes with it
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)  # a body that ends in an error later: no "never retrieved" noise
        raise TimedOut
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


__all__ = ["RETRIES_EXHAUSTED", "Amended", "Refusal", "TimedOut", "ToolGate"]
