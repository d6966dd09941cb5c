"""One tool call in one pass, from the model's call to its result: the arguments, the checks, the
body, the `post_tool` hooks.

`ToolGate.run_call` walks the stages in order, each a function that returns to it and never
calls back (docs/decisions/agent-tool-approvals.md has the order's reasons):

1. `_arguments`: the tool and the parsed arguments (an unknown tool, text that is not a JSON
   object or nests too deep: an error result, `dshkit.agent._tools.validation.parse_arguments`);
2. `_checked`: the tool's schema (invalid: the body does not run, and too many in a turn end it),
   and the arguments frozen for the hooks and the policy (a value dshkit cannot hold, such as an
   integer past 64 bits, is invalid arguments: the gate never raises);
3. `_admitted`: `pre_tool` hooks and the approval policy, the session-wide policy and a person's
   answer, all settled by `ApprovalBook.settle`;
4. `_run_body`: the body (cancelled after its timeout; a sync one timed in a thread of its own);
5. `_amended`: the `post_tool` hooks, which may replace the content and the `meta` (a hook that
   replaces the content drops the `meta` unless it gives one: a redaction covers all that is logged).

A call whose tool needs none of 2, 3 and 5 (`engaged`) goes from 1 straight to the body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dshkit.agent.approvals import ApprovalBook
from dshkit.agent._user_code import NeverStarted, TimedOut, call_sync_or_async, is_awaitable, run_within
from dshkit.agent.tool_hooks import Amend, PostToolContext, PreToolContext, ToolHook
from dshkit.agent.tools import Tool, ToolContext, ToolOutput, tool_content
from dshkit.agent._tools.validation import (
    ArgumentValidator,
    InvalidArgumentsText,
    SchemaError,
    invalid_arguments_text,
    parse_arguments,
    unchecked_arguments_text,
)
from dshkit.llm import Message, freeze

RETRIES_EXHAUSTED = "tool_retries_exhausted"


@dataclass
class CallResult:
    """What one call ends with: its content and error, `meta` logged beside it, context for the next
    step, whether it ends the turn, and the seq of its `tool/call` (None: the call never started)."""

    content: Any
    is_error: bool = False
    error: Mapping[str, str] | None = None
    meta: Mapping[str, Any] | None = None
    context: tuple[Message, ...] = ()
    end_turn: bool = False
    call_seq: int | None = None


# A call's result as a plain tuple of `CallResult`'s fields, in their order: what a batch holds
# while its bodies run. The cyclic GC stops tracking a tuple of untracked items at its first look,
# where a `CallResult` (a class instance) stays tracked, so at scale one was promoted with every
# step and walked by each full collection (issue 37).
ResultRow = tuple[Any, bool, Mapping[str, str] | None, Mapping[str, Any] | None, tuple[Message, ...], bool, int | None]


def result_row(result: CallResult) -> ResultRow:
    """`result`'s fields as a `ResultRow`."""
    return (result.content, result.is_error, result.error, result.meta, result.context, result.end_turn, result.call_seq)


def error_result(content: str, name: str, code: str, call_seq: int | None) -> CallResult:
    """An error result naming what went wrong (`error = {name, code}`)."""
    return CallResult(content, is_error=True, error={"name": name, "code": code}, call_seq=call_seq)


class ToolGate:
    """The pass of each tool call of one agent (see the module doc)."""

    def __init__(
        self,
        book: ApprovalBook,
        pre_tool: Sequence[ToolHook] = (),
        post_tool: Sequence[ToolHook] = (),
        tool_timeout: float | None = None,
        *,
        tools: Mapping[str, Tool],
        knows: Callable[[str], bool],
    ) -> None:
        self.book = book
        self._tools = tools  # the agent's, by name (a refreshed tool source changes it in place)
        self.turn_tools: Mapping[str, Tool] = {}  # the running turn's own (a run's final-answer tool)
        self._knows = knows  # whether a message id is in the session already
        self._pre = tuple(pre_tool)
        self._post = tuple(post_tool)
        self._timeout = tool_timeout
        # Per tool name, for the very Tool object they were made for (a refreshed tool source, an MCP
        # server say, may bring a new Tool of the same name with another schema or policy).
        self._validators: dict[str, tuple[Tool, ArgumentValidator | SchemaError | None]] = {}
        self._invalid: dict[tuple[int, str], int] = {}  # (turn, tool) -> calls with invalid arguments
        self._failure: dict[str, Any] | None = None
        self._engaged: dict[str, tuple[Tool, int, bool]] = {}  # tool name -> (tool, book version, engaged)

    async def run_call(self, call: Mapping[str, Any], ctx: ToolContext, call_seq: int) -> CallResult:
        """The call's one result: each stage in order, the first that answers ends the pass."""
        tool, arguments, result = self._arguments(call, call_seq)
        if result is not None:
            return result
        if not self.engaged(tool):
            return await self._run_body(tool, arguments, ctx, call_seq)
        frozen, result = await self._checked(tool, call["arguments"], arguments, ctx, call_seq)
        if result is not None:
            return result
        if self._decides(tool):
            pre = PreToolContext(ctx.call_id, tool.name, frozen, call["arguments"], ctx.turn, ctx.step, ctx.cancel, ctx.session)
            result = await self._admitted(tool, pre, call_seq)
            if result is not None:
                return result
        result = await self._run_body(tool, arguments, ctx, call_seq)
        return await self._amended(tool, frozen, ctx, result) if self._post else result

    # -- 1. the arguments ----------------------------------------------------------------------------

    def _arguments(self, call: Mapping[str, Any], call_seq: int) -> tuple[Any, Any, CallResult | None]:
        """The tool and the arguments object, or the error result that ends the call here."""
        name = call["name"]
        tool = self._tools.get(name) or self.turn_tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return None, None, error_result(f"Unknown tool {name!r} (available: {known}).", "UnknownTool", "unknown_tool", call_seq)
        try:
            return tool, parse_arguments(call["arguments"]), None
        except InvalidArgumentsText as exc:
            text = f"Invalid arguments for {name}: {exc}. The tool did not run."
            return tool, None, error_result(text, "InvalidArguments", "invalid_arguments", call_seq)

    # -- 2. the schema, and the arguments as hooks and policies see them ---------------------------

    def engaged(self, tool: Tool) -> bool:
        """Whether a call of `tool` needs anything of the gate (else it runs as plainly as before)."""
        known = self._engaged.get(tool.name)
        if known is not None and known[0] is tool and known[1] == self.book.version:
            return known[2]
        engaged = bool(
            self._post or tool.timeout is not None or self._timeout is not None
            or self._validator(tool) is not None or self._decides(tool)
        )
        self._engaged[tool.name] = (tool, self.book.version, engaged)  # until a policy is remembered
        return engaged

    def _decides(self, tool: Tool) -> bool:
        """Whether a call of `tool` has a decision to make (a hook to ask, or a policy that may not allow)."""
        return bool(self._pre) or self.book.has_session_policy or self.book.may_gate(tool.name, tool.approval)

    async def _checked(
        self, tool: Tool, raw: str, arguments: dict[str, Any], ctx: ToolContext, call_seq: int
    ) -> tuple[Any, CallResult | None]:
        """The arguments frozen (None when no hook or policy sees them), or the error result."""
        validator = self._validator(tool)
        if isinstance(validator, SchemaError):
            return None, error_result(f"Tool {tool.name} cannot run: {validator}", "SchemaError", "invalid_schema", call_seq)
        if validator is not None:
            try:
                if validator.off_loop(len(raw)):  # a schema with backtracking patterns, large arguments
                    outcome, problems = await validator.check_off_loop(raw, arguments, ctx.cancel)
                    if outcome != "checked":
                        return None, self._unchecked(tool, outcome, ctx, call_seq)
                else:
                    problems = validator.problems(arguments, len(raw))
            except Exception as exc:  # the validator failed on this input: the call, not the turn, says so
                text = f"Invalid arguments for {tool.name}: the tool did not run: they could not be checked ({type(exc).__name__}: {exc})."
                return None, error_result(text, type(exc).__name__, "invalid_arguments", call_seq)
            if problems:
                self._count_invalid(tool, ctx.turn)
                return None, error_result(invalid_arguments_text(tool.name, problems), "InvalidArguments", "invalid_arguments", call_seq)
        if not (self._post or self._decides(tool)):
            return None, None
        try:
            return freeze(arguments), None
        except (TypeError, ValueError) as exc:  # e.g. an integer past 64 bits: hooks could not be shown it
            self._count_invalid(tool, ctx.turn)
            text = f"Invalid arguments for {tool.name}: the tool did not run: {exc}."
            return None, error_result(text, "InvalidArguments", "invalid_arguments", call_seq)

    def _unchecked(self, tool: Tool, outcome: str, ctx: ToolContext, call_seq: int) -> CallResult:
        """The result of a call whose arguments' check ran out of time, or was stopped by a cancel."""
        if outcome == "cancelled":
            return error_result(
                f"Tool call not run: the turn was aborted ({ctx.cancel.cause or 'cancelled'}) while its arguments "
                "were checked. The tool did not run.", "Aborted", "aborted_before_dispatch", call_seq,
            )
        self._count_invalid(tool, ctx.turn)
        return error_result(unchecked_arguments_text(tool.name), "ValidationTimedOut", "invalid_arguments", call_seq)

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

    def take_failure(self) -> dict[str, Any] | None:
        """The error that ends the turn (a tool's retry budget spent), once; None when there is none."""
        failure, self._failure = self._failure, None
        return failure

    # -- 3. hooks, policy, a person ------------------------------------------------------------------

    async def _admitted(self, tool: Tool, pre: PreToolContext, call_seq: int) -> CallResult | None:
        """None when the body may run, else the refusal (the call's error result)."""
        outcome, reason = await self.book.settle(tool.approval, pre, self._pre)
        if outcome in ("allowed", "allowed_once"):
            return None
        if outcome == "denied":
            why = f": {reason}" if reason else " by its approval policy"
            return error_result(f"Tool call denied{why}. The tool did not run.", "Denied", "denied", call_seq)
        if outcome == "rejected":
            why = f": {reason}" if reason else ""
            return error_result(f"Tool call denied by the user{why}. The tool did not run.", "Denied", "denied", call_seq)
        if outcome == "cancelled":
            return error_result(
                f"Tool call not run: the turn was aborted ({reason or 'cancelled'}) while it waited for approval.",
                "Aborted", "approval_cancelled", call_seq,
            )
        return error_result(f"Tool call not run: approval {outcome}.", "Denied", "denied", call_seq)

    def is_waiting(self, call_id: str) -> bool:
        """Whether call `call_id` waits for a person right now."""
        return self.book.is_waiting(call_id)

    def listen_for_waits(self, listener: Callable[[], None] | None) -> None:
        """Call `listener` whenever a call starts waiting for a person (None: stop)."""
        self.book.on_wait = listener

    def mark_answered(self, call_id: str) -> None:
        """The call's result is logged: its ask, if any, is settled."""
        self.book.mark_answered(call_id)

    # -- 4. the body ---------------------------------------------------------------------------------

    def timeout_of(self, tool: Tool) -> float | None:
        """The seconds a body of `tool` may run (its own timeout, else the agent's), None for no limit."""
        return tool.timeout if tool.timeout is not None else self._timeout

    async def _run_body(self, tool: Tool, arguments: dict[str, Any], ctx: ToolContext, call_seq: int) -> CallResult:
        """The body's output as the call's result; what it raised, its timeout, as an error result."""
        try:
            timeout = tool.timeout if tool.timeout is not None else self._timeout
            if timeout is None:
                output = tool.run(arguments, ctx)
                if is_awaitable(output):  # `call_sync_or_async` inline: one coroutine less per call
                    output = await output
            else:
                output = await run_within(tool.run, arguments, ctx, timeout)
            return self._output_result(output, call_seq)
        except TimedOut as exc:
            return error_result(exc.text(self.timeout_of(tool) or 0.0), "TimedOut", "timeout", call_seq)
        except NeverStarted as exc:
            return error_result(exc.text(), "NeverStarted", "not_started", call_seq)
        except Exception as exc:
            return error_result(f"{type(exc).__name__}: {exc}", type(exc).__name__, "tool_error", call_seq)

    def _output_result(self, output: Any, call_seq: int) -> CallResult:
        """A body's returned value as the call's result (a `ToolOutput`, or plain content)."""
        if type(output) is not ToolOutput and not isinstance(output, ToolOutput):
            return CallResult(tool_content(output), call_seq=call_seq)
        for index, message in enumerate(output.context):
            if self._knows(message.id):
                raise ValueError(f"ToolOutput context[{index}]: message id {message.id} is not new to the session")
        meta = output.meta
        if meta is not None:
            try:
                meta = freeze(meta)
            except (TypeError, ValueError) as exc:
                return error_result(f"{type(exc).__name__}: tool returned invalid meta: {exc}", type(exc).__name__, "invalid_meta", call_seq)
        return CallResult(tool_content(output.content), output.is_error, None, meta, output.context, output.end_turn, call_seq)

    # -- 5. after the body ---------------------------------------------------------------------------

    async def _amended(self, tool: Tool, frozen: Any, ctx: ToolContext, result: CallResult) -> CallResult:
        """The result after the `post_tool` hooks (in order); a failing hook withholds the content and meta."""
        content, meta, context = result.content, result.meta, list(result.context)
        for index, hook in enumerate(self._post):
            post = PostToolContext(ctx.call_id, tool.name, frozen, content, result.is_error, ctx.turn, ctx.step, ctx.session, meta)
            try:
                answer = await call_sync_or_async(hook, post)
                if answer is not None and not isinstance(answer, Amend):
                    raise TypeError(f"post_tool hook {index}: expected Amend(...) or None, got {type(answer).__name__}")
            except Exception as exc:
                return _withheld(f"a post_tool hook failed ({type(exc).__name__}: {exc})", type(exc).__name__, context, result)
            if answer is None:
                continue
            try:
                content, meta = _apply(answer, content, meta)
            except (TypeError, ValueError) as exc:
                return _withheld(f"a post_tool hook gave content or meta that is not JSON ({exc})", type(exc).__name__, context, result)
            context.extend(answer.context)
        return CallResult(content, result.is_error, result.error, meta, tuple(context), result.end_turn, result.call_seq)


def _apply(answer: Amend, content: Any, meta: Any) -> tuple[Any, Any]:
    """Content and meta after one `Amend`: a replaced content drops the meta unless the hook gave one."""
    if answer.replaces:
        content = tool_content(answer.content)
        if not answer.sets_meta:
            meta = None  # derived from what was just redacted: it goes too
    if answer.sets_meta:
        meta = freeze(answer.meta) if answer.meta is not None else None
    return content, meta


def _withheld(why: str, name: str, context: list[Message], result: CallResult) -> CallResult:
    return CallResult(
        f"The tool ran, but its result was withheld: {why}.", True, {"name": name, "code": "post_tool_failed"}, None,
        tuple(context), result.end_turn, result.call_seq,
    )


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


__all__ = ["RETRIES_EXHAUSTED", "CallResult", "NeverStarted", "ResultRow", "TimedOut", "ToolGate", "error_result", "result_row"]
