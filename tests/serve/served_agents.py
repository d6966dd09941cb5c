"""The agents the serve tests run (imported by the test processes and by the worker processes).

`EchoModel` answers from the request alone, so any worker, after any crash, answers alike: a user
message "approve: X" makes it call the approval-gated tool `publish` with X; a tool result makes it
say what the tool returned; "slow: X" is echoed slowly (40 chunks a quarter of a second apart);
anything else is echoed. `DSHKIT_TEST_MODEL_DELAY` (seconds between chunks) makes turns long
enough for a SIGKILL to land inside them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from dshkit.agent import Agent, Tool
from dshkit.session import Session


class EchoModel:
    provider = "echo"
    model = "echo-1"

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    def stream(self, request: Any, cancel: Any = None) -> Any:
        return self._answer(request.messages)

    async def _answer(self, messages: Any) -> Any:
        last = messages[-1]
        if last.source["kind"] == "tool":
            text = "".join(part["text"] for block in last.content for part in block["content"] if part["type"] == "text")
            chunks = [{"type": "text_delta", "text": f"published: {text}"}]
        else:
            said = _last_user_text(messages)
            if said.startswith("approve: "):
                arguments = json.dumps({"text": said[len("approve: "):]})
                chunks = [{"type": "tool_call_delta", "index": 0, "id": f"call-{len(messages)}", "name": "publish", "arguments": arguments},
                          {"type": "finish", "reason": "tool_calls"}]
            else:
                chunks = [{"type": "text_delta", "text": piece} for piece in ("echo: ", said)]
        delay = 0.25 if _last_user_text(messages).startswith("slow: ") else self.delay
        for chunk in chunks * (20 if delay == 0.25 and chunks[0]["type"] == "text_delta" else 1):
            if delay:
                await asyncio.sleep(delay)
            yield chunk


def _last_user_text(messages: Any) -> str:
    for message in reversed(messages):
        if message.role == "user" and message.source["kind"] == "user":
            return "".join(block["text"] for block in message.content if block["type"] == "text")
    return ""


def publish(arguments: dict[str, Any], ctx: Any) -> str:
    return arguments["text"].upper()


def echo_agent(session: Session) -> Agent:
    delay = float(os.environ.get("DSHKIT_TEST_MODEL_DELAY", "0"))
    tool = Tool("publish", "Publish a text (needs a person's approval).", {"type": "object"}, publish, approval="ask")
    return Agent(EchoModel(delay), session=session, tools=[tool])


_FAILED_ONCE: set[str] = set()


def flaky_agent(session: Session) -> Agent:
    """The echo agent, but its first build for each session (in this process) fails as a lost
    database connection does: the worker must try the request again, not drop it."""
    if session.id not in _FAILED_ONCE:
        _FAILED_ONCE.add(session.id)
        raise ConnectionError("the database went away (a test's injected failure)")
    return echo_agent(session)


AGENTS = {"echo": echo_agent, "flaky": flaky_agent}


class ClockModel:
    """Answers with the wall-clock time at which its request arrived (the serve bench's probe)."""

    provider = "clock"
    model = "clock-1"

    def stream(self, request: Any, cancel: Any = None) -> Any:
        return self._answer(time.time())

    async def _answer(self, arrived: float) -> Any:
        yield {"type": "text_delta", "text": f"request at {arrived:.6f}"}


def clock_agent(session: Session) -> Agent:
    return Agent(ClockModel(), session=session)


AGENTS["clock"] = clock_agent
