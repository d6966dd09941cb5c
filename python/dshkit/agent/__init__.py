"""`dshkit.agent`: the agent loop (asyncio) over a durable session log.

`agent.run(prompt, output_type=..., limits=...)` (and `run_sync`, `run_stream`) runs one prompt
and returns its `RunResult` or raises its `RunError`.
`Agent(model, *, session=None, tools=(), system=None, hooks=None)` runs turns: it claims queued
input (`followup`, `steer`, `inject`), lets the `pre_step` hook `Enter` or `Reject` it, logs it,
builds each request from the log, streams the model, runs `Tool`s and honours `cancel`.
Tool calls are validated against their schemas and pass `pre_tool` hooks and approval policies
(`Allow` / `Ask` / `Deny`; `approve`, `deny`, `pending_approvals`) before their bodies run.
"""

from __future__ import annotations

from dshkit.agent.agent import AWAITING_APPROVAL, IDLE, RUNNING, Agent, AgentStatus
from dshkit.agent.approvals import PendingApproval, Policy
from dshkit.agent.assembly import StreamAssembler
from dshkit.agent.cancel import CancelToken
from dshkit.agent.compaction import Compaction, CompactionFailed
from dshkit.agent.errors import (
    ContextWindowExceeded,
    ModelCallFailed,
    ModelHTTPError,
    OutputValidationError,
    RunBlocked,
    RunCancelled,
    RunError,
    RunFailed,
    ToolRetriesExhausted,
    UsageLimitExceeded,
)
from dshkit.agent.limits import UsageLimits
from dshkit.agent.result import RunResult, RunUsage
from dshkit.agent.run import RunEvent, RunStream
from dshkit.agent.notifications import AgentEvent, EventStream
from dshkit.agent.hooks import (
    HOOK_NAMES,
    Enter,
    PreStepContext,
    Reject,
    RequestContext,
    RequestErrorContext,
    TurnStoppingContext,
)
from dshkit.agent.inbox import NEXT_STEP, NEXT_TURN, Inbox
from dshkit.agent.subagent import subagent_tool
from dshkit.agent.tokens import TokenMeter
from dshkit.agent.tool_hooks import Allow, Amend, Ask, Deny, PostToolContext, PreToolContext
from dshkit.agent.tools import Tool, ToolContext, ToolOutput
from dshkit.agent.toolsets import ToolSource
from dshkit.agent.tools import tool

__all__ = [
    "AWAITING_APPROVAL",
    "HOOK_NAMES",
    "IDLE",
    "NEXT_STEP",
    "NEXT_TURN",
    "RUNNING",
    "Agent",
    "AgentEvent",
    "Allow",
    "Amend",
    "Ask",
    "AgentStatus",
    "CancelToken",
    "Compaction",
    "CompactionFailed",
    "ContextWindowExceeded",
    "Deny",
    "Enter",
    "EventStream",
    "Inbox",
    "ModelCallFailed",
    "ModelHTTPError",
    "OutputValidationError",
    "PendingApproval",
    "Policy",
    "PostToolContext",
    "PreStepContext",
    "PreToolContext",
    "Reject",
    "RequestContext",
    "RequestErrorContext",
    "RunBlocked",
    "RunCancelled",
    "RunError",
    "RunEvent",
    "RunFailed",
    "RunResult",
    "RunStream",
    "RunUsage",
    "StreamAssembler",
    "TokenMeter",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolRetriesExhausted",
    "ToolSource",
    "TurnStoppingContext",
    "UsageLimitExceeded",
    "UsageLimits",
    "subagent_tool",
    "tool",
]
