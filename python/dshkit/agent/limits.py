"""`UsageLimits`: the bounds of one `Agent.run`, and the checks that stop a run exactly at them.

A limit of N allows N and refuses the N+1th: `requests` and `max_steps` are checked before each
model request, `tool_calls` before a response's calls run (none of them runs when they would pass
it), and the token limits after each response (its usage is only known then). A refusal ends the
turn in error with code ``"usage_limit_exceeded"`` and `limit` naming the bound; `Agent.run`
raises `UsageLimitExceeded`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from dshkit.agent.errors import USAGE_LIMIT_EXCEEDED


@dataclass(frozen=True)
class UsageLimits:
    """Per-run bounds; None leaves one unbounded. Token limits count every request of the run."""

    requests: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    max_steps: int | None = None

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None and (type(value) is not int or value < 0):
                raise ValueError(f"UsageLimits {field.name}: expected an int >= 0 or None, got {value!r}")


@dataclass
class UsageCount:
    """What a run used so far (requests sent, tool calls run, tokens the provider reported)."""

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def exceeded(limit: str, allowed: int, would_be: int) -> dict[str, Any]:
    """The logged error of a refused limit."""
    return {
        "code": USAGE_LIMIT_EXCEEDED,
        "name": "UsageLimitExceeded",
        "limit": limit,
        "allowed": allowed,
        "message": f"usage limit {limit}={allowed} exceeded (the run would use {would_be})",
    }


def check_request(limits: UsageLimits, used: UsageCount, step: int) -> dict[str, Any] | None:
    """Before a model request: the error if it would pass `max_steps` or `requests`, else None."""
    if limits.max_steps is not None and step > limits.max_steps:
        return exceeded("max_steps", limits.max_steps, step)
    if limits.requests is not None and used.requests >= limits.requests:
        return exceeded("requests", limits.requests, used.requests + 1)
    return None


def check_tool_calls(limits: UsageLimits, used: UsageCount, calls: int) -> dict[str, Any] | None:
    """Before a response's `calls` tool calls run: the error if they would pass `tool_calls`."""
    if limits.tool_calls is not None and used.tool_calls + calls > limits.tool_calls:
        return exceeded("tool_calls", limits.tool_calls, used.tool_calls + calls)
    return None


def check_tokens(limits: UsageLimits, used: UsageCount) -> dict[str, Any] | None:
    """After a response: the error if the run's tokens passed a token limit."""
    for name, value in (
        ("input_tokens", used.input_tokens),
        ("output_tokens", used.output_tokens),
        ("total_tokens", used.input_tokens + used.output_tokens),
    ):
        allowed = getattr(limits, name)
        if allowed is not None and value > allowed:
            return exceeded(name, allowed, value)
    return None


__all__ = ["UsageCount", "UsageLimits", "check_request", "check_tokens", "check_tool_calls", "exceeded"]
