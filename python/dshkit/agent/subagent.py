"""Subagents: a tool whose call runs a child `Agent` with its own model, system prompt, tools and log.

The child's log is created beside the parent's (`dshkit.session.delegation`): its header names
the parent session, the call and the delegation depth, and the parent's log records which child
a call started (`agent/subagent/started`, written before the child runs). The call's result is
the child's final answer, or an error result saying how the child ended, with the text it had
produced so far. Cancelling the parent's turn aborts the child's (cause ``parent``).

Ids across the boundary: the task the parent writes is new content in the child's log (a new
user message, minted there); messages `forward` hands over are the parent's very messages and
keep their ids; the answer is new content in the parent's log (a tool result, minted by the
parent), and its `meta` names the child's final message by id.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dshkit.agent.agent import Agent
from dshkit.agent.hooks import Hook
from dshkit.agent.tools import Tool, ToolContext, ToolOutput
from dshkit.agent.toolsets import ToolSource
from dshkit.llm import Message, create_user_message
from dshkit.models.protocol import Model
from dshkit.session import Session
from dshkit.session.delegation import SUBAGENT_STARTED, create_child_session, delegation_depth
from dshkit.session.events import ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TURN_END, TURN_START

DEFAULT_MAX_DEPTH = 3
TASK_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "The task for the subagent, with everything it needs to know."}},
    "required": ["task"],
}
_ANSWERED = ("completed", "max_tokens")  # the child's turn ended with an answer

Forward = Callable[[ToolContext], Iterable[Message]]


def subagent_tool(
    name: str,
    description: str,
    model: Model,
    *,
    system: str | None = None,
    tools: Iterable[Tool | ToolSource] = (),
    hooks: Mapping[str, Hook] | None = None,
    config: Mapping[str, Any] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    location: str | os.PathLike[str] | None = None,
    forward: Forward | None = None,
) -> Tool:
    """A `Tool` named `name` that runs a child agent on the ``task`` argument and answers with its final text.

    The child has its own `model`, `system`, `tools`, `hooks` and `config`, and a log of its own
    beside the parent's (or in `location`: a folder or a `postgresql://` URL). A call whose child
    would be deeper than `max_depth` delegations is refused with an error result. `forward(ctx)`
    may hand the child user messages of the parent (they keep their ids), queued before the task.
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValueError(f"subagent {name!r} max_depth: expected an int >= 1, got {max_depth!r}")
    if forward is not None and not callable(forward):
        raise TypeError(f"subagent {name!r} forward: expected a function (ctx) -> messages, got {type(forward).__name__}")
    child_tools = tuple(tools)
    # Built once here, so a bad model, system, tool list or hooks fail now, not at the first call.
    Agent(model, tools=child_tools, system=system, hooks=hooks, config=config)

    async def run(arguments: Any, ctx: ToolContext) -> ToolOutput:
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return _error(f"{name}: the argument 'task' must be a non-empty string.", "invalid_arguments")
        depth = delegation_depth(ctx.session) + 1
        if depth > max_depth:
            return _error(
                f"{name}: delegation depth limit reached ({max_depth}); do this task yourself.", "depth_limit", depth=depth
            )
        forwarded = tuple(forward(ctx)) if forward is not None else ()
        child = create_child_session(ctx.session, ctx.call_id, location=location)
        try:
            ctx.session.append(
                SUBAGENT_STARTED,
                {"call_id": ctx.call_id, "session_id": child.id, "depth": depth, "turn": ctx.turn, "step": ctx.step, "ignorable": True},
            )
            ctx.session.sync()  # the link is on disk before the child writes anything under it
            agent = Agent(model, session=child, tools=child_tools, system=system, hooks=hooks, config=config)
            return await _run_child(agent, task, forwarded, ctx, name, depth)
        finally:
            child.close()

    return Tool(name, description, TASK_PARAMETERS, run)


async def _run_child(
    agent: Agent, task: str, forwarded: tuple[Message, ...], ctx: ToolContext, name: str, depth: int
) -> ToolOutput:
    """Run the child's turn to its end; the tool answer for how it ended."""
    child = agent.session
    prompt = create_user_message(task, source={"kind": "parent_agent", "session_id": ctx.session.id, "call_id": ctx.call_id})
    stop_child = ctx.cancel.on_cancel(lambda: agent.cancel("parent"))
    failure: BaseException | None = None
    try:
        for message in forwarded:
            agent.inject(message)
        agent.followup(prompt)
        try:
            await agent.when_idle()
        except asyncio.CancelledError:
            # The parent's tool body is being cancelled (its agent's task ended): the child is
            # aborted and its log closed properly before the cancellation goes on.
            agent.cancel("parent")
            await agent.when_idle()
            raise
        except Exception as exc:  # the child's loop itself failed (its log could not be written, ...)
            failure = exc
    finally:
        stop_child()
    reason, answer, partial = _outcome(child)
    meta: dict[str, Any] = {"subagent": {"session_id": child.id, "depth": depth, "outcome": reason.get("kind", "unknown")}}
    if answer is not None:
        meta["subagent"]["final_message_id"] = answer.id
    if failure is None and reason.get("kind") in _ANSWERED and answer is not None:
        return ToolOutput(answer.text, meta=meta)
    how = f"its loop failed ({type(failure).__name__}: {failure})" if failure is not None else _ending(reason)
    text = (
        f"{name} (subagent session {child.id}) did not finish: {how}. "
        "What it did before stopping may or may not have taken effect (outcome unknown)."
    )
    if partial:
        text += f"\nIts output so far:\n{partial}"
    return ToolOutput(text, is_error=True, meta=meta)


def _outcome(child: Session) -> tuple[Mapping[str, Any], Message | None, str]:
    """The child's last turn: its end reason, its last complete assistant message, and all its text.

    The text is every assistant message's, then what the model streamed after the last one and
    never completed (a response that failed mid-stream is logged only as chunks).
    """
    events = child.events
    reason: Mapping[str, Any] = {"kind": "unknown"}
    texts: list[str] = []
    unfinished: list[str] = []  # text deltas after the last assistant message, newest first
    answer: Message | None = None
    after_last_message = True
    for seq in range(len(events) - 1, -1, -1):
        event = events[seq]
        if event.type == TURN_END and reason.get("kind") == "unknown":
            reason = event.data["reason"]
        elif event.type == ASSISTANT_CHUNK and after_last_message:
            chunk = event.data["chunk"]
            if chunk.get("type") == "text_delta":
                unfinished.append(chunk["text"])
        elif event.type == ASSISTANT_MESSAGE:
            after_last_message = False
            message = event.data["message"]
            if message.text:
                texts.append(message.text)
            if answer is None and not event.data.get("interrupted"):
                answer = message
        elif event.type == TURN_START:
            break
    texts.reverse()
    if unfinished:
        texts.append("".join(reversed(unfinished)))
    return reason, answer, "\n".join(texts)


def _ending(reason: Mapping[str, Any]) -> str:
    kind = reason.get("kind", "unknown")
    if kind == "aborted":
        return f"it was aborted (cause {reason.get('cause')})"
    if kind == "error":
        error = reason.get("error") or {}
        return f"it failed ({error.get('code')}: {error.get('message')})"
    if kind == "blocked":
        return "its pre_step hook rejected the task"
    return f"its turn ended {kind}"


def _error(text: str, code: str, **details: Any) -> ToolOutput:
    return ToolOutput(text, is_error=True, meta={"subagent": {"error": code, **details}})


__all__ = ["DEFAULT_MAX_DEPTH", "TASK_PARAMETERS", "Forward", "subagent_tool"]
