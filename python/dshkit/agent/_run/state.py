"""`RunState`: what one `Agent.run` asks of the turn that runs its prompt (limits, structured output).

The turn that claims the run's prompt carries the state (`TurnRunner` looks it up by the
prompt's id). The state adds the output request to each request header, counts usage against
the limits, checks the final output and counts failed attempts against `output_retries`. It
keeps nothing the result needs that the log lacks: `RunResult` is read from the log; the
validated output kept here is the same value `RunResult.from_log` validates again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from dshkit.agent.cancel import CancelToken
from dshkit.agent.errors import OUTPUT_VALIDATION_FAILED
from dshkit.agent.limits import UsageCount, UsageLimits, check_request, check_tokens, check_tool_calls
from dshkit.agent._run.output import OutputSpec, output_spec, problems_text
from dshkit.agent.tools import Tool, ToolContext, ToolOutput
from dshkit.llm import Message, create_user_message, freeze
from dshkit.models.protocol import supports_native_output
from dshkit.models.stream_translation import usage_summary

MISSING: Any = object()  # no valid output yet
ACCEPTED = "Final result accepted."
# The retry prompt's source: a plugin message, so a viewer tells it from what a person typed.
_RETRY_SOURCE = {"kind": "plugin", "plugin": "dshkit.output"}
_USER = {"kind": "user"}  # a str prompt's source: typed by a person
_NO_LIMITS = UsageLimits()
_UNUSED = UsageCount()  # never counted into: an inactive run's turn skips every check


class RunState:
    """One run's bounds and structured output, carried by the turn that runs its prompt.

    `active` is False for a run without limits or output type: its turn then skips every check.
    """

    # What a run without limits or output type never changes is a class default: such a run (the
    # common one, which `run` adds to a turn) sets only its prompt id and waiter (benches/bench_run.py).
    active = False
    spec: OutputSpec | None = None
    native = False
    limits = _NO_LIMITS
    used = _UNUSED
    output_retries = 1
    failed_outputs = 0
    output: Any = MISSING
    failure: dict[str, Any] | None = None
    turn: int | None = None
    end: tuple[int, Mapping[str, Any]] | None = None  # (turn/end seq, reason) once ended
    output_tool: Tool | None = None
    _config: tuple[Any, Any] = (None, None)
    _specs: tuple[Any, Any] = (None, None)

    def __init__(self, model: object, prompt: object, output_type: Any, limits: UsageLimits | None, output_retries: int, where: str) -> None:
        """Check a run's arguments (errors name `where`) and make its prompt (`message`) and state;
        nothing is queued yet. `model` is the agent's, asked whether it takes native output."""
        # The checks are here, not in a function of their own: `run` makes one state per call.
        self.message = message = create_user_message(prompt, source=_USER) if type(prompt) is str else prompt_message(prompt, where)
        if limits is not None and not isinstance(limits, UsageLimits):
            raise TypeError(f"{where} limits: expected a dshkit.agent.UsageLimits, got {type(limits).__name__}")
        if type(output_retries) is not int or output_retries < 0:
            raise ValueError(f"{where} output_retries: expected an int >= 0, got {output_retries!r}")
        spec = None if output_type is None or output_type is str else output_spec(output_type)
        self.message_id = message.id
        self.waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if spec is None and limits is None:
            return  # inactive: its turn skips every check
        self.active = True
        self.spec = spec
        self.output_retries = output_retries
        self.native = native = spec is not None and supports_native_output(model)
        self.limits = limits if limits is not None else _NO_LIMITS
        self.used = UsageCount()
        if spec is not None and not native:
            self.output_tool = Tool(spec.name, spec.description, {"type": "object"}, self._final_tool_body)

    # -- the request ------------------------------------------------------------------------

    def config_for(self, config: Mapping[str, Any]) -> Mapping[str, Any]:
        """`config` with ``output_schema`` added (the same object for the same `config`)."""
        if self.spec is None:
            return config
        if self._config[0] is not config:
            self._config = (config, {**config, "output_schema": self.spec.header_entry()})
        return self._config[1]  # type: ignore[no-any-return]

    def tools_for(self, specs: tuple[Mapping[str, Any], ...]) -> tuple[Mapping[str, Any], ...]:
        """The request's tools: the agent's, plus the final-answer tool in tool mode."""
        if self.output_tool is None or self.spec is None:
            return specs
        if self._specs[0] is not specs:
            if any(spec.get("name") == self.spec.name for spec in specs):
                raise ValueError(f"output tool name {self.spec.name!r} is also the name of one of the agent's tools")
            self._specs = (specs, (*specs, freeze(self.spec.tool_spec())))
        return self._specs[1]  # type: ignore[no-any-return]

    # -- limits -----------------------------------------------------------------------------

    def before_request(self, step: int) -> dict[str, Any] | None:
        """Count a request about to be sent; the limit error instead when it would pass one."""
        refused = check_request(self.limits, self.used, step)
        if refused is None:
            self.used.requests += 1
        return refused

    def after_response(self, usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """Add a response's usage; the limit error when the run's tokens now pass one."""
        if usage:
            summary = usage_summary(usage)
            self.used.input_tokens += summary.get("input_tokens", 0)
            self.used.output_tokens += summary.get("output_tokens", 0)
        return check_tokens(self.limits, self.used)

    def before_tools(self, calls: tuple[Any, ...]) -> dict[str, Any] | None:
        """Count a response's tool calls (the final-answer tool's aside); the limit error instead."""
        count = sum(1 for call in calls if self.output_tool is None or call["name"] != self.output_tool.name)
        refused = check_tool_calls(self.limits, self.used, count)
        if refused is None:
            self.used.tool_calls += count
        return refused

    # -- the output -------------------------------------------------------------------------

    def _final_tool_body(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        assert self.spec is not None
        value, problems = self.spec.check_arguments(arguments)
        if problems:
            return ToolOutput(self._failed(problems, tool_mode=True), is_error=True)
        self.output = value
        return ToolOutput(ACCEPTED, end_turn=True)

    def check_answer(self, message: Message) -> Message | None:
        """A response without tool calls: None when it is a valid output (or none was asked for),
        else the retry prompt for the model (after a failure is recorded when the budget is spent)."""
        if self.spec is None:
            return None
        if self.native:
            value, problems = self.spec.check_text(message.text)
            if not problems:
                self.output = value
                return None
            text = self._failed(problems, tool_mode=False)
        else:
            text = self._failed([f"/: no {self.spec.name} call: the final result must be given by calling {self.spec.name}"], tool_mode=True)
        return create_user_message(text, source=_RETRY_SOURCE)

    def _failed(self, problems: list[str], *, tool_mode: bool) -> str:
        assert self.spec is not None
        self.failed_outputs += 1
        if self.failed_outputs > self.output_retries and self.failure is None:
            self.failure = {
                "code": OUTPUT_VALIDATION_FAILED,
                "name": "OutputValidationError",
                "message": f"the final output failed validation {self.failed_outputs} times "
                f"(output_retries={self.output_retries}): " + "; ".join(problems),
                "problems": problems,
            }
        return problems_text(self.spec.name, problems, tool_mode=tool_mode)

    def take_failure(self) -> dict[str, Any] | None:
        """The error ending the turn (the output retries spent), once."""
        failure, self.failure = self.failure, None
        return failure

    def ended(self, event: Any, reason: Mapping[str, Any], tool_calls: Any) -> None:
        """The run's turn ended (its ``turn/end`` `event`, None when it could not be logged): wake `Agent.run`."""
        if self.output_tool is not None:
            tool_calls.turn_tools = {}
        if event is not None:
            self.end = (event.seq, reason)
        if not self.waiter.done():
            self.waiter.set_result(None)


def prompt_message(prompt: object, where: str) -> Message:
    """A run's prompt as a user message: a `str` becomes a new person-typed message."""
    if isinstance(prompt, str):
        return create_user_message(prompt, source=_USER)
    if isinstance(prompt, Message):
        return prompt
    raise TypeError(f"{where} prompt: expected a str or a user Message, got {type(prompt).__name__}")


def attach_run(runs: dict[str, RunState], turn: int, claimed: list[tuple[Message, int]], tool_calls: Any) -> RunState | None:
    """The state of the run whose prompt turn `turn` claimed, if any; its final-answer tool is the turn's."""
    for message, _ in claimed:
        run = runs.pop(message.id, None)
        if run is not None:
            run.turn = turn
            if run.output_tool is not None:
                tool_calls.turn_tools = {run.output_tool.name: run.output_tool}
            return run
    return None


def wake_unclaimed(runs: dict[str, RunState]) -> None:
    """Wake the runs whose prompt no turn claimed (the driver stopped first): each looks why."""
    for run in tuple(runs.values()):
        if not run.waiter.done():
            run.waiter.set_result(None)


def refusing(error: Mapping[str, Any]) -> CancelToken:
    """A token already cancelled with `error`'s code: a tool batch run with it runs no call and
    answers each with "not run" (the calls of a response a limit refused)."""
    token = CancelToken()
    token.cancel(str(error["code"]))
    return token


__all__ = ["ACCEPTED", "MISSING", "RunState", "attach_run", "prompt_message", "refusing", "wake_unclaimed"]
