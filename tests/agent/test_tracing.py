"""OpenTelemetry spans of a scripted run, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from dshkit.agent import Agent, Tool
from dshkit.agent._tracing import tracer_for
from dshkit.models import ScriptedModel

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="the test extra installs opentelemetry-sdk")
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Any:
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


def tools() -> list[Tool]:
    def lookup(arguments: Any, ctx: Any) -> str:
        return "42"

    def broken(arguments: Any, ctx: Any) -> str:
        raise RuntimeError("disk on fire")

    return [Tool("lookup", "look up", {"type": "object"}, lookup), Tool("broken", "fails", {"type": "object"}, broken)]


def scripted_run(kit: Any, tracer: Any) -> Agent:
    calls = kit.calls_response(("c1", "lookup", "{}"), ("c2", "broken", "{}"))
    calls.insert(-1, {"type": "usage", "usage": {"prompt_tokens": 30, "completion_tokens": 7}})
    answer = [{"type": "text_delta", "text": "it is 42"}, {"type": "usage", "usage": {"input_tokens": 50, "output_tokens": 4}}, {"type": "finish", "reason": "stop"}]
    model = ScriptedModel([calls, answer], provider="scripted", model="m-1")
    agent = Agent(model, tools=tools(), tracer=tracer, config={"max_tokens": 100})
    kit.run_followup(agent, kit.user("what is the answer?"))
    return agent


def tree(spans: Any) -> dict[Any, list[Any]]:
    children: dict[Any, list[Any]] = {}
    for span in sorted(spans, key=lambda s: s.start_time):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)
    return children


def test_a_scripted_run_gives_a_turn_with_steps_model_calls_and_tool_calls(kit: Any, tracer: Any, exporter: InMemorySpanExporter) -> None:
    agent = scripted_run(kit, tracer)
    session = agent.session
    spans = exporter.get_finished_spans()
    children = tree(spans)
    [turn] = children[None]
    assert turn.name == "invoke_agent dshkit"
    assert turn.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert turn.attributes["gen_ai.conversation.id"] == session.id
    assert turn.attributes["dshkit.turn.outcome"] == "completed" and turn.status.status_code != StatusCode.ERROR
    steps = children[turn.context.span_id]
    assert [step.name for step in steps] == ["step 1.1", "step 1.2"]
    assert all(span.context.trace_id == turn.context.trace_id for span in spans)

    messages = [event for event in session.events if event.message is not None]
    user, first_answer, result_1, result_2, final = (event.message for event in messages)
    assert steps[0].attributes["dshkit.step.message_ids"] == (user.id,)

    chat, tool_1, tool_2 = children[steps[0].context.span_id]
    assert chat.name == "chat m-1" and chat.kind.name == "CLIENT"
    assert dict(chat.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "m-1",
        "gen_ai.request.max_tokens": 100,
        "dshkit.request.message_ids": (user.id,),
        "dshkit.request.header_seq": next(e.seq for e in session.events if e.type == "request/header"),
        "gen_ai.response.model": "m-1",
        "dshkit.message.id": first_answer.id,
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert (tool_1.name, tool_2.name) == ("execute_tool lookup", "execute_tool broken")
    assert tool_1.attributes["gen_ai.tool.call.id"] == "c1" and tool_1.attributes["dshkit.message.id"] == result_1.id
    assert tool_1.status.status_code != StatusCode.ERROR
    assert tool_2.attributes["gen_ai.tool.call.id"] == "c2" and tool_2.attributes["dshkit.message.id"] == result_2.id
    assert tool_2.status.status_code == StatusCode.ERROR and tool_2.attributes["error.type"] == "RuntimeError"
    assert tool_2.status.description == "RuntimeError: disk on fire"
    # Each span lies inside its parent's time.
    assert turn.start_time <= steps[0].start_time <= chat.start_time < chat.end_time <= tool_1.start_time
    assert tool_2.end_time <= steps[0].end_time <= steps[1].start_time and steps[1].end_time <= turn.end_time

    [chat_2] = children[steps[1].context.span_id]
    assert chat_2.attributes["dshkit.request.message_ids"] == (user.id, first_answer.id, result_1.id, result_2.id)
    assert chat_2.attributes["dshkit.message.id"] == final.id
    assert chat_2.attributes["gen_ai.usage.input_tokens"] == 50 and chat_2.attributes["gen_ai.response.finish_reasons"] == ("stop",)


def test_a_failed_model_call_marks_the_chat_and_the_turn(kit: Any, tracer: Any, exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel([[RuntimeError("connection reset")]], provider="scripted", model="m-1")
    kit.run_followup(Agent(model, tracer=tracer), kit.user("hello"))
    by_name = {span.name: span for span in exporter.get_finished_spans()}
    assert by_name["chat m-1"].status.status_code == StatusCode.ERROR
    turn = by_name["invoke_agent dshkit"]
    assert turn.attributes["dshkit.turn.outcome"] == "error" and turn.status.status_code == StatusCode.ERROR


def test_without_a_tracer_nothing_listens() -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(model)
    assert tracer_for(None) is None  # no tracer provider was installed in this process
    assert not agent._hub.active


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_agent_without_tracing_never_imports_opentelemetry() -> None:
    out = run_python(
        """
        import asyncio, sys
        import dshkit
        from dshkit.agent import Agent
        from dshkit.models import ScriptedModel
        agent = Agent(ScriptedModel(["hi"]))
        async def main():
            agent.followup(dshkit.create_user_message("hello", source={"kind": "user"}))
            await agent.when_idle()
        asyncio.run(main())
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    assert out.strip() == "[]"


def test_an_installed_tracer_provider_is_used_by_default() -> None:
    out = run_python(
        """
        import asyncio
        import dshkit
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from dshkit.agent import Agent
        from dshkit.models import ScriptedModel
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        agent = Agent(ScriptedModel(["hi"], model="m-2"))
        async def main():
            agent.followup(dshkit.create_user_message("hello", source={"kind": "user"}))
            await agent.when_idle()
        asyncio.run(main())
        spans = exporter.get_finished_spans()
        print(sorted(span.name for span in spans), {span.instrumentation_scope.name for span in spans})
        """
    )
    assert out.strip() == "['chat m-2', 'invoke_agent dshkit', 'step 1.1'] {'dshkit'}"
