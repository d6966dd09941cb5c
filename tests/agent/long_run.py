"""A scripted long agent run for the compaction tests: a model that calls a tool step after step.

`LoopModel` is a real `Model`: it asks for one `read` call a step until `steps` calls were made,
then answers in text; a summary request (the compaction's system prompt) gets a short
checkpoint. It reports usage as the token meter's estimate of the request it received, notes
the largest request it saw and the log's length at each call (to rebuild requests from the log).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from dshkit import to_json
from dshkit.agent import Tool
from dshkit.agent._compaction.summary import SUMMARY_SYSTEM
from dshkit.agent._compaction.tokens import estimate_header, estimate_message
from dshkit.session import ModelRequest, Session


def request_estimate(request: ModelRequest) -> int:
    """The meter's estimate of a request: its header's and its messages'."""
    header = {"system": request.system, "tools": request.tools}
    return estimate_header(header) + sum(estimate_message(message) for message in request.messages)


class LoopModel:
    """Calls the `read` tool `steps` times, then stops; writes summaries when asked."""

    provider = "loop"

    def __init__(self, steps: int, *, summary_chars: int = 600, name: str = "loop") -> None:
        self.model = name
        self.steps = steps
        self.summary_chars = summary_chars
        self.calls = 0  # agent requests (not summaries)
        self.summaries = 0
        self.largest = 0  # the largest agent request seen, by the estimate
        self.session: Session | None = None
        self.prefixes: list[tuple[int, ModelRequest]] = []  # (events in the log, request), sampled
        self.sample_every = 50

    def stream(self, request: ModelRequest, cancel: Any = None) -> AsyncIterator[dict[str, Any]]:
        if request.system == SUMMARY_SYSTEM:
            self.summaries += 1
            return self._summary(request)
        self.calls += 1
        self.largest = max(self.largest, request_estimate(request))
        if self.session is not None and (self.calls % self.sample_every == 1 or self.calls == self.steps + 1):
            self.prefixes.append((len(self.session.events), request))
        return self._step(request, self.calls)

    async def _summary(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        seen = request.messages[0].text.count("[tool call read(")
        text = f"Checkpoint {self.summaries}: the task reads pages one by one; {seen} more read. "
        yield {"type": "text_delta", "text": (text * (1 + self.summary_chars // len(text)))[: self.summary_chars]}
        yield {"type": "usage", "usage": {"prompt_tokens": request_estimate(request), "completion_tokens": self.summary_chars // 4}}
        yield {"type": "finish", "reason": "stop"}

    async def _step(self, request: ModelRequest, number: int) -> AsyncIterator[dict[str, Any]]:
        if number <= self.steps:
            arguments = json.dumps({"page": number})
            yield {"type": "tool_call_delta", "index": 0, "id": f"call_{number}", "name": "read", "arguments": arguments}
            reason = "tool_calls"
        else:
            yield {"type": "text_delta", "text": "All pages read."}
            reason = "stop"
        yield {"type": "usage", "usage": {"prompt_tokens": request_estimate(request), "completion_tokens": 20}}
        yield {"type": "finish", "reason": reason}


def read_tool(result_chars: int = 2000) -> Tool:
    """A `read` tool answering each page with `result_chars` characters."""

    def run(arguments: dict[str, Any], ctx: Any) -> str:
        line = f"page {arguments['page']}: " + to_json(arguments) + " lorem ipsum dolor sit amet. "
        return (line * (1 + result_chars // len(line)))[:result_chars]

    return Tool("read", "Read one page.", {"type": "object", "properties": {"page": {"type": "integer"}}}, run)
