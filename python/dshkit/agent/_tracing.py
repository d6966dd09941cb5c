"""OpenTelemetry spans of an agent's work: turns, steps, model calls and tool calls.

Spans follow the OpenTelemetry GenAI semantic conventions (``invoke_agent`` for a turn, ``chat``
for a model call, ``execute_tool`` for a tool call, with the ``gen_ai.*`` attributes: model,
token usage, finish reasons, tool name and call id) and carry dshkit's message ids as
``dshkit.*`` attributes, so a trace leads back to the log.

Nothing here runs unless a tracer is configured: `tracer_for` returns None when neither a tracer
was passed nor a tracer provider was installed (``opentelemetry`` is not even imported then), and
the agent then subscribes nothing. With a tracer, `AgentTracing` is one more subscriber of the
agent's live events (`NotificationHub`); it reads usage and finish reasons from the logged events.
The spans are started with explicit parents and never made current, so nothing depends on which
task runs when. Installing ``dshkit[otel]`` brings ``opentelemetry-api``; choosing an exporter
(and the SDK) is the application's business.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dshkit.agent.notifications import AgentEvent
from dshkit.session.session import Session

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

INSTRUMENTATION_NAME = "dshkit"
AGENT_NAME = "dshkit"


def tracer_for(tracer: Tracer | None) -> Tracer | None:
    """The tracer an agent reports to: `tracer` if given, else the global provider's, else None.

    None (no tracing, no cost) unless a real tracer provider was installed
    (``opentelemetry.trace.set_tracer_provider``) before the agent was created; the check looks
    in ``sys.modules`` first, so an application that never imported OpenTelemetry pays nothing.
    """
    if tracer is not None:
        return tracer
    if "opentelemetry.trace" not in sys.modules:
        return None  # nobody imported OpenTelemetry: no provider can have been installed
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    from dshkit import __version__

    return provider.get_tracer(INSTRUMENTATION_NAME, __version__)


def _error(span: Span, kind: str, description: str = "") -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, description or kind))


class AgentTracing:
    """Turns one agent's live events into spans (subscribe it to the agent's `NotificationHub`)."""

    def __init__(self, tracer: Tracer, session: Session, provider: str, model: str) -> None:
        self._tracer = tracer
        self._session = session
        self._provider = provider
        self._model = model
        self._turn: Span | None = None
        self._step: Span | None = None
        self._chat: Span | None = None
        self._tools: dict[str, Span] = {}
        self._step_messages: list[str] = []

    def __call__(self, event: AgentEvent) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    def _start(self, name: str, parent: Span | None, attributes: dict[str, Any], *, client: bool = False) -> Span:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        kind = trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL
        return self._tracer.start_span(name, context=context, kind=kind, attributes=attributes)

    # -- turns and steps ------------------------------------------------------------------------

    def _turn_start(self, event: AgentEvent) -> None:
        self._turn = self._start(f"invoke_agent {AGENT_NAME}", None, {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.conversation.id": self._session.id,
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model,
            "dshkit.turn": event.turn or 0,
        })

    def _turn_end(self, event: AgentEvent) -> None:
        span, self._turn = self._turn, None
        if span is None:
            return
        self._end_step()
        reason = event.data.get("reason") or {}
        kind = str(reason.get("kind"))
        span.set_attribute("dshkit.turn.outcome", kind)
        if kind == "error":
            error = reason.get("error") or {}
            _error(span, str(error.get("name") or error.get("code") or "error"), str(error.get("message", "")))
        elif kind == "aborted":
            span.set_attribute("dshkit.turn.cause", str(reason.get("cause")))
        span.end()

    def _step_start(self, event: AgentEvent) -> None:
        self._end_step()
        self._step_messages = []
        self._step = self._start(f"step {event.turn}.{event.step}", self._turn, {
            "dshkit.turn": event.turn or 0, "dshkit.step": event.step or 0,
        })

    def _end_step(self, _event: AgentEvent | None = None) -> None:
        for call_id, tool_span in self._tools.items():  # cancelled before its result was logged
            _error(tool_span, "cancelled", f"tool call {call_id} ended without a result in the step")
            tool_span.end()
        self._tools = {}
        self._end_chat("no response was completed")
        span, self._step = self._step, None
        if span is not None:
            span.set_attribute("dshkit.step.message_ids", self._step_messages)
            span.end()

    # -- model calls ------------------------------------------------------------------------------

    def _request(self, event: AgentEvent) -> None:
        self._end_chat("retried")  # a previous attempt of this step failed
        request = event.data["request"]
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model,
            "dshkit.request.message_ids": [message.id for message in request.messages],
        }
        if request.header_seq is not None:
            attributes["dshkit.request.header_seq"] = request.header_seq
        for key, name in (("max_tokens", "gen_ai.request.max_tokens"), ("temperature", "gen_ai.request.temperature"), ("top_p", "gen_ai.request.top_p")):
            value = request.config.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[name] = value
        self._chat = self._start(f"chat {self._model}", self._step, attributes, client=True)

    def _end_chat(self, failure: str | None) -> None:
        span, self._chat = self._chat, None
        if span is None:
            return
        if failure is not None:
            _error(span, "model_error", failure)
        span.end()

    def _assistant_message(self, event: AgentEvent, data: Any) -> None:
        span = self._chat
        if span is None:
            return
        from dshkit.models.stream_translation import usage_summary

        span.set_attribute("gen_ai.response.model", self._model)
        span.set_attribute("dshkit.message.id", event.message.id if event.message is not None else "")
        usage = data.get("usage")
        if usage is not None:
            summary = usage_summary(usage)
            for key in ("input_tokens", "output_tokens"):
                if key in summary:
                    span.set_attribute(f"gen_ai.usage.{key}", summary[key])
        if data.get("interrupted"):
            span.set_attribute("dshkit.interrupted", True)
            span.set_attribute("gen_ai.response.finish_reasons", ["interrupted"])
        elif data.get("finish_reason") is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [str(data["finish_reason"])])
        self._end_chat(None)

    # -- tool calls ------------------------------------------------------------------------------

    def _tool_call(self, event: AgentEvent) -> None:
        call_id, name = str(event.data["call_id"]), str(event.data["name"])
        self._tools[call_id] = self._start(f"execute_tool {name}", self._step, {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "dshkit.call_seq": event.data["seq"],
        })

    def _tool_result(self, event: AgentEvent, data: Any) -> None:
        message = event.message
        if message is None:
            return
        span = self._tools.pop(str(message.source.get("call_id")), None)
        if span is None:
            return  # answered without running (cancelled before it started)
        span.set_attribute("dshkit.message.id", message.id)
        [block] = [block for block in message.content if block.get("type") == "tool_result"]
        error = data.get("error") or {}
        if error or block.get("is_error"):
            said = " ".join(str(part.get("text", "")) for part in block.get("content", ()) if part.get("type") == "text")
            _error(span, str(error.get("name") or error.get("code") or "tool_error"), said)
        span.end()

    def _message(self, event: AgentEvent) -> None:
        kind = event.data.get("event_type")
        if kind == "user/message":
            if event.message is not None:
                self._step_messages.append(event.message.id)
            return
        data = self._session.events[event.data["seq"]].data
        if kind == "assistant/message":
            self._assistant_message(event, data)
        elif kind == "tool/result":
            self._tool_result(event, data)


_HANDLERS: dict[str, Callable[[AgentTracing, AgentEvent], None]] = {
    "turn_start": AgentTracing._turn_start,
    "turn_end": AgentTracing._turn_end,
    "step_start": AgentTracing._step_start,
    "step_end": AgentTracing._end_step,
    "request": AgentTracing._request,
    "message": AgentTracing._message,
    "tool_call": AgentTracing._tool_call,
}


def trace_agent(hub: Any, session: Session, model: Any, tracer: Tracer | None) -> None:
    """Subscribe `AgentTracing` to `hub` when a tracer is configured (`tracer_for`); else nothing."""
    chosen = tracer_for(tracer)
    if chosen is not None:
        hub.subscribe(AgentTracing(chosen, session, model.provider, model.model))


__all__ = ["AgentTracing", "trace_agent", "tracer_for"]
