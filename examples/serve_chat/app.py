"""A chat agent served with `dshkit serve`, with a tool a person must approve.

    DSHKIT_SERVE_TOKENS=demo=demo dshkit serve examples.serve_chat.app:AGENTS --static examples/serve_chat

then open http://127.0.0.1:8000/ (the page signs in with the token `demo`). Offline by default: a
small deterministic model stands in for a real one; set DSHKIT_SERVE_MODEL=openai:gpt-4.1-mini (any
`provider:model` name, its key from the environment) to talk to a real model instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

from dshkit.agent import Agent, Tool
from dshkit.session import Session


def _send(arguments: dict[str, Any], ctx: Any) -> str:
    return f"sent to {arguments['to']}: {arguments['subject']!r}"


EMAIL_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
    "required": ["to", "subject"],
}
send_email = Tool("send_email", "Send an email (a person approves each one).", EMAIL_SCHEMA, _send, approval="ask")


class OfflineModel:
    """Answers from the request alone: "email X about Y" calls send_email, anything else is echoed."""

    provider = "offline"
    model = "offline-1"

    def stream(self, request: Any, cancel: Any = None) -> AsyncIterator[dict[str, Any]]:
        return self._answer(request.messages)

    async def _answer(self, messages: Any) -> AsyncIterator[dict[str, Any]]:
        last = messages[-1]
        if last.source["kind"] == "tool":
            result = last.content[0]
            text = "".join(part["text"] for part in result["content"] if part["type"] == "text")
            yield {"type": "text_delta", "text": f"Done ({text})." if not result["is_error"] else f"Not sent: {text}"}
            return
        said = "".join(block["text"] for block in last.content if block["type"] == "text")
        words = said.split()
        if len(words) >= 4 and words[0].lower() == "email" and words[2].lower() == "about":
            arguments = json.dumps({"to": words[1], "subject": " ".join(words[3:])})
            yield {"type": "tool_call_delta", "index": 0, "id": f"call-{len(messages)}", "name": "send_email", "arguments": arguments}
            yield {"type": "finish", "reason": "tool_calls"}
            return
        yield {"type": "text_delta", "text": f"You said: {said}. Try \"email ada@example.com about lunch\"."}


def assistant(session: Session) -> Agent:
    """The agent serving one session (built afresh by the worker for each request)."""
    model: Any = os.environ.get("DSHKIT_SERVE_MODEL") or OfflineModel()
    return Agent(model, session=session, tools=[send_email], system="You are a helpful assistant. Ask before sending email.")


AGENTS = {"assistant": assistant}
