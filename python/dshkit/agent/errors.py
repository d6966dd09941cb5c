"""The typed errors `Agent.run` raises for a turn that did not succeed, one base class: `RunError`.

Each carries `result`, the run's partial `RunResult` (its messages, usage and seqs, all read from
the log), `code` (the ``turn/end`` error code, or ``"aborted"`` / ``"blocked"``) and `info`, the
logged error mapping. `run_error(reason, result)` is the one place a turn's logged end reason
becomes an exception, so a re-opened log raises the same error as the live run did.

The model's failures are also `dshkit.models.ModelError`s (and an HTTP status also a
`dshkit.models.errors.ModelHTTPError`), so code that already catches those keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from dshkit.agent._run.usage import RunUsage
from dshkit.llm import Message
from dshkit.models.errors import ModelHTTPError as _ModelHTTPStatus
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED, ModelError


class PartialResult(Protocol):
    """What a failed run did, as its error carries it: the members of `dshkit.agent.RunResult` a
    handler reads (result.py builds these errors, so the class is named here by its members)."""

    turn: int
    end_seq: int

    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> Mapping[str, Any]: ...
    @property
    def seqs(self) -> range: ...
    @property
    def messages(self) -> tuple[Message, ...]: ...
    @property
    def message_ids(self) -> tuple[str, ...]: ...
    @property
    def message(self) -> Message | None: ...
    @property
    def output(self) -> Any: ...
    @property
    def usage(self) -> RunUsage: ...


TOOL_RETRIES_EXHAUSTED = "tool_retries_exhausted"
OUTPUT_VALIDATION_FAILED = "output_validation_failed"
USAGE_LIMIT_EXCEEDED = "usage_limit_exceeded"


class RunError(Exception):
    """A run whose turn ended in error, was aborted or blocked; `result` is what it did until then."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = "error", info: Mapping[str, Any] | None = None) -> None:
        Exception.__init__(self, message)
        self.message = message
        self.result = result
        self.code = code
        self.info: Mapping[str, Any] = info if info is not None else {}

    def __str__(self) -> str:
        return self.message


class ModelCallFailed(RunError, ModelError):
    """The model call failed (connection, timeout, a dropped stream, a malformed answer, ...)."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = "model_error", info: Mapping[str, Any] | None = None) -> None:
        RunError.__init__(self, message, result=result, code=code, info=info)
        info = self.info
        self.status: int | None = info.get("status")
        self.request_id: str | None = info.get("request_id")
        self.retryable = bool(info.get("retryable", False))


class ModelHTTPError(ModelCallFailed, _ModelHTTPStatus):
    """The model's endpoint answered with an HTTP error status (`status`: 401, 429, 500, ...)."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = "http_error", info: Mapping[str, Any] | None = None) -> None:
        ModelCallFailed.__init__(self, message, result=result, code=code, info=info)
        self.body = ""
        self.retry_after = None
        self.provider_code = None

    def __str__(self) -> str:
        where = f" (request id {self.request_id})" if self.request_id else ""
        return f"HTTP {self.status}: {self.message}{where}"


class ContextWindowExceeded(ModelCallFailed):
    """The request was too large for the model's context window (also after compacting once)."""


class ToolRetriesExhausted(RunError):
    """A tool was called with invalid arguments more often than its `retries` allow; `tool` names it."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = TOOL_RETRIES_EXHAUSTED, info: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, result=result, code=code, info=info)
        self.tool: str | None = self.info.get("tool")


class OutputValidationError(RunError):
    """The model's final output failed validation more often than `output_retries` allow.

    `problems` lists each failing path of the last attempt (``"/city: Field required"``).
    """

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = OUTPUT_VALIDATION_FAILED, info: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, result=result, code=code, info=info)
        self.problems: tuple[str, ...] = tuple(self.info.get("problems", ()))


class UsageLimitExceeded(RunError):
    """A `UsageLimits` bound would have been passed; `limit` names it (``"requests"``, ...)."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = USAGE_LIMIT_EXCEEDED, info: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, result=result, code=code, info=info)
        self.limit: str | None = self.info.get("limit")


class RunCancelled(RunError):
    """The run's turn was aborted (`cause`: ``"user"``, ``"disposed"``, ...)."""

    def __init__(self, message: str, *, result: PartialResult | None = None, code: str = "aborted", info: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, result=result, code=code, info=info)
        self.cause: str | None = self.info.get("cause")


class RunBlocked(RunError):
    """The `pre_step` hook rejected the run's input (the turn ended ``blocked``)."""


class RunFailed(RunError):
    """Any other failure of the turn (a hook or the loop raised); `info["name"]` is the exception's class."""


def run_error(reason: Mapping[str, Any], result: PartialResult | None) -> RunError | None:
    """The exception for a logged turn end `reason`; None for a turn that succeeded."""
    kind = reason.get("kind")
    if kind == "aborted":
        info = {"cause": reason.get("cause")}
        return RunCancelled(f"the run was cancelled ({reason.get('cause')})", result=result, info=info)
    if kind == "blocked":
        why = reason.get("message")
        return RunBlocked("the pre_step hook rejected the run's input" + (f": {why}" if why else ""), result=result, code="blocked", info=dict(reason))
    if kind != "error":
        return None
    info = dict(reason.get("error") or {})
    code = str(info.get("code", "error"))
    message = str(info.get("message", code))
    error_class: type[RunError]
    if code == TOOL_RETRIES_EXHAUSTED:
        error_class = ToolRetriesExhausted
    elif code == OUTPUT_VALIDATION_FAILED:
        error_class = OutputValidationError
    elif code == USAGE_LIMIT_EXCEEDED:
        error_class = UsageLimitExceeded
    elif code == CONTEXT_WINDOW_EXCEEDED:
        error_class = ContextWindowExceeded
    elif code.startswith("http_") and isinstance(info.get("status"), int):
        error_class = ModelHTTPError
    elif code == "exception":
        error_class = RunFailed
        message = f"{info.get('name', 'Exception')}: {message}"
    else:
        error_class = ModelCallFailed
    return error_class(message, result=result, code=code, info=info)


__all__ = [
    "OUTPUT_VALIDATION_FAILED",
    "TOOL_RETRIES_EXHAUSTED",
    "USAGE_LIMIT_EXCEEDED",
    "ContextWindowExceeded",
    "ModelCallFailed",
    "ModelHTTPError",
    "OutputValidationError",
    "RunBlocked",
    "RunCancelled",
    "RunError",
    "RunFailed",
    "ToolRetriesExhausted",
    "UsageLimitExceeded",
    "run_error",
]
