"""`dshkit.agent`: the agent loop (asyncio) over a durable session log.

`Agent(model, *, session=None, tools=(), system=None, hooks=None)` runs turns: it claims queued
input (`followup`, `steer`, `inject`), lets the `pre_step` hook `Enter` or `Reject` it, logs it,
builds each request from the log, streams the model, runs `Tool`s and honours `cancel`.
"""

from __future__ import annotations

from dshkit.agent.agent import IDLE, RUNNING, Agent, AgentStatus
from dshkit.agent.assembly import StreamAssembler
from dshkit.agent.cancel import CancelToken
from dshkit.agent.compaction import Compaction, CompactionFailed
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
from dshkit.agent.tools import Tool, ToolContext, ToolOutput
from dshkit.agent.toolsets import ToolSource

__all__ = [
    "HOOK_NAMES",
    "IDLE",
    "NEXT_STEP",
    "NEXT_TURN",
    "RUNNING",
    "Agent",
    "AgentEvent",
    "AgentStatus",
    "CancelToken",
    "Compaction",
    "CompactionFailed",
    "Enter",
    "EventStream",
    "Inbox",
    "PreStepContext",
    "Reject",
    "RequestContext",
    "RequestErrorContext",
    "StreamAssembler",
    "TokenMeter",
    "Tool",
    "ToolContext",
    "ToolOutput",
    "ToolSource",
    "TurnStoppingContext",
    "subagent_tool",
]
