"""`dshkit.agent`: the agent loop (asyncio) over a durable session log.

`agent.run(prompt, output_type=..., limits=...)` (and `run_sync`, `run_stream`) runs one prompt
and returns its `RunResult` or raises its `RunError`.
`Agent(model, *, session=None, tools=(), system=None, hooks=None)` runs turns: it claims queued
input (`followup`, `steer`, `inject`), lets the `pre_step` hook `Enter` or `Reject` it, logs it,
builds each request from the log, streams the model, runs `Tool`s and honours `cancel`.
Tool calls are validated against their schemas and pass `pre_tool` hooks and approval policies
(`Allow` / `Ask` / `Deny`; `approve`, `deny`, `pending_approvals`) before their bodies run.

The modules named here are the public face; the engine behind them lives in `_`-named modules and
folders (`_turn/`, `_tools/`, `_input/`, `_compaction/`, `_run/`), which may change at any time.
"""

from __future__ import annotations

from dshkit.agent.agent import AWAITING_APPROVAL, IDLE, RUNNING, Agent, AgentStatus
from dshkit.agent.approvals import PendingApproval, Policy
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
from dshkit.agent.result import RunResult
from dshkit.agent._run.usage import RunUsage
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
from dshkit.agent._input.inbox import NEXT_STEP, NEXT_TURN
from dshkit.agent.subagent import subagent_tool
from dshkit.agent.tool_hooks import Allow, Amend, Ask, Deny, PostToolContext, PreToolContext
from dshkit.agent.tools import Tool, ToolContext, ToolOutput, tool
from dshkit.agent.toolsets import ToolSource

__all__ = [
    "AWAITING_APPROVAL",
    "Agent",
    "AgentEvent",
    "AgentStatus",
    "Allow",
    "Amend",
    "Ask",
    "CancelToken",
    "Compaction",
    "CompactionFailed",
    "ContextWindowExceeded",
    "Deny",
    "Enter",
    "EventStream",
    "HOOK_NAMES",
    "IDLE",
    "ModelCallFailed",
    "ModelHTTPError",
    "NEXT_STEP",
    "NEXT_TURN",
    "OutputValidationError",
    "PendingApproval",
    "Policy",
    "PostToolContext",
    "PreStepContext",
    "PreToolContext",
    "RUNNING",
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
