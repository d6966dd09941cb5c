"""A context overflow over each wire format, injected by a loopback server: every API's own error
becomes `CONTEXT_WINDOW_EXCEEDED`, the agent compacts (the summary asked of the same model over
HTTP), retries the step and succeeds; the retried body is the one the log rebuilds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent, Compaction, Tool
from dshkit.agent._compaction.summary import SUMMARY_SYSTEM
from dshkit.models import Provider
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.protocol import CONTEXT_WINDOW_EXCEEDED
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.session import Session, project_request
from dshkit.session._verify import check_events
from tests.models.test_agent_over_apis import request_prefixes

LONG = " ".join(["word"] * 800)  # ~1,000 tokens of history to summarize
SUMMARY = "The user asked for a long text and got it."


def _json_reply(loopback_reply: Any, status: int, payload: dict[str, Any]) -> Any:
    return loopback_reply(status=status, headers={"Content-Type": "application/json"}, pieces=[json.dumps(payload).encode()])


def chat(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, failed_event: bool) -> tuple[Any, list[Any]]:
    model = OpenAICompatibleModel("gpt-test", Provider(loopback.base_url, api_key="sk-test", name="openai", timeout=5.0))
    overflow = _json_reply(wire.Reply, 400, {"error": {
        "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
    answers = [wire.sse_reply(wire.answer(text, response_id=f"r{n}")) for n, text in enumerate((LONG, SUMMARY, "Done."))]
    return model, [answers[0], overflow, answers[1], answers[2]]


def anthropic(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, failed_event: bool) -> tuple[Any, list[Any]]:
    model = AnthropicModel("claude-test", Provider(loopback.base_url, api_key="sk-ant-test", timeout=5.0), settings={"max_tokens": 1024})
    a = anthropic_wire
    overflow = a.error_reply(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    answers = [a.sse_reply(a.answer(text, message_id=f"msg_{n}")) for n, text in enumerate((LONG, SUMMARY, "Done."))]
    return model, [answers[0], overflow, answers[1], answers[2]]


def responses(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, failed_event: bool) -> tuple[Any, list[Any]]:
    model = OpenAIResponsesModel("gpt-test", Provider(loopback.base_url, api_key="sk-test", timeout=5.0))
    error = {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}
    if failed_event:  # a 200 stream that fails with the code
        r = responses_wire("resp_f")
        overflow = r.sse_reply([*r.created(), r.event({"type": "response.failed", "response": r.response("failed", error=error)})])
    else:
        overflow = _json_reply(wire.Reply, 400, {"error": {**error, "type": "invalid_request_error", "param": "input"}})
    answers = [responses_wire(f"resp_{n}").sse_reply(responses_wire(f"resp_{n}").answer(text)) for n, text in enumerate((LONG, SUMMARY, "Done."))]
    return model, [answers[0], overflow, answers[1], answers[2]]


APIS: dict[str, Callable[..., tuple[Any, list[Any]]]] = {"chat": chat, "anthropic": anthropic, "responses": responses}
CASES = [("chat", False), ("anthropic", False), ("responses", False), ("responses", True)]
BUDGET_KEY = {"chat": "max_tokens", "anthropic": "max_tokens", "responses": "max_output_tokens"}


@pytest.mark.parametrize(("api", "failed_event"), CASES)
def test_an_overflow_compacts_retries_and_succeeds(
    api: str, failed_event: bool, loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, tmp_path: Path
) -> None:
    model, replies = APIS[api](loopback, wire, anthropic_wire, responses_wire, failed_event)
    loopback.reply(*replies)
    path = tmp_path / "overflow.jsonl"
    settings = Compaction(context_window=200_000, keep_recent_tokens=10, summary_tokens=500)  # only the overflow compacts

    async def main() -> None:
        session = Session.create(path)
        agent = Agent(model, session=session, system="You are terse.", compaction=settings)
        async with model:
            for text in ("Write a long text.", "Now shorten it."):
                agent.followup(create_user_message(text, source={"kind": "user"}))
                await agent.when_idle()
        session.close()

    asyncio.run(main())
    first, overflowed, summary_request, retried = loopback.received
    assert SUMMARY_SYSTEM in summary_request.body.decode() and summary_request.json[BUDGET_KEY[api]] == 500
    assert "Write a long text." in summary_request.body.decode()
    assert "<compacted-summary>" in retried.body.decode() and SUMMARY in retried.body.decode()
    assert "Write a long text." not in retried.body.decode() and "Now shorten it." in retried.body.decode()
    with Session.open(path, read_only=True) as session:
        assert check_events(session.events) == []
        kinds = [event.data["reason"]["kind"] for event in session.events if event.type == "turn/end"]
        assert kinds == ["completed", "completed"]
        (start,) = [event for event in session.events if event.type == "compaction/start"]
        assert start.data["reason"] == "overflow"
        # the refused request was built right before the compaction; the others before their chunks
        prefixes = [request_prefixes(session)[0], start.seq - 1, request_prefixes(session)[-1]]
        assert [model.request_body(project_request(session, at_seq=seq)) for seq in prefixes] == [
            first.body, overflowed.body, retried.body
        ]
        assert session.messages()[-1].text == "Done."


@pytest.mark.parametrize("api", list(APIS))
def test_every_api_names_its_overflow_with_the_one_code(api: str, loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> None:
    model, replies = APIS[api](loopback, wire, anthropic_wire, responses_wire, False)
    loopback.reply(replies[1])

    async def main() -> Any:
        agent = Agent(model)  # no compaction: the step ends in error, with the code
        async with model:
            agent.followup(create_user_message("Hi", source={"kind": "user"}))
            await agent.when_idle()
        return agent

    agent = asyncio.run(main())
    reason = [event for event in agent.session.events if event.type == "turn/end"][-1].data["reason"]
    assert reason["kind"] == "error" and reason["error"]["code"] == CONTEXT_WINDOW_EXCEEDED
    assert reason["error"]["status"] == 400


class _Responder:
    """Stands in for the loopback server's reply queue: each reply is chosen from the request
    just received (a summary request gets a summary; an agent request a tool call until `steps`)."""

    def __init__(self, server: Any, choose: Callable[[Any, int], Any]) -> None:
        self._server, self._choose, self.agent_requests = server, choose, 0

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Any:
        request = self._server.received[-1]
        if SUMMARY_SYSTEM.encode() in request.body:
            return self._choose(request, 0)
        self.agent_requests += 1
        return self._choose(request, self.agent_requests)


STEPS = 40
WINDOW = 6000


def _counted(request: Any) -> int:
    return len(request.body) // 4  # the server's "provider count" of the request it got


def long_chat(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, Callable[[Any, int], Any]]:
    model = OpenAICompatibleModel("gpt-test", Provider(loopback.base_url, api_key="sk-test", name="openai", timeout=5.0))

    def choose(request: Any, number: int) -> Any:
        if number == 0 or number > STEPS:
            return wire.sse_reply(wire.answer(SUMMARY if number == 0 else "All read."))
        call = [wire.tool_call_start(0, f"call_{number}", "read"), wire.tool_call_args(0, json.dumps({"page": number}))]
        return wire.sse_reply([wire.chunk(role="assistant", tool_calls=call[:1]), wire.chunk(tool_calls=call[1:]),
                               wire.chunk(finish="tool_calls"), wire.usage({"prompt_tokens": _counted(request), "completion_tokens": 20}), wire.DONE])

    return model, choose


def long_anthropic(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, Callable[[Any, int], Any]]:
    model = AnthropicModel("claude-test", Provider(loopback.base_url, api_key="sk-ant-test", timeout=5.0), settings={"max_tokens": 1024})
    a = anthropic_wire

    def choose(request: Any, number: int) -> Any:
        if number == 0 or number > STEPS:
            return a.sse_reply(a.answer(SUMMARY if number == 0 else "All read."))
        usage = {"input_tokens": _counted(request), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
        return a.sse_reply([a.message_start(f"msg_{number}", usage), *a.tool_use(0, f"toolu_{number}", "read", [json.dumps({"page": number})]),
                            a.message_delta("tool_use", 20), a.MESSAGE_STOP])

    return model, choose


def long_responses(loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any) -> tuple[Any, Callable[[Any, int], Any]]:
    model = OpenAIResponsesModel("gpt-test", Provider(loopback.base_url, api_key="sk-test", timeout=5.0))

    def choose(request: Any, number: int) -> Any:
        r = responses_wire(f"resp_{number}_{len(request.body)}")
        if number == 0 or number > STEPS:
            return r.sse_reply(r.answer(SUMMARY if number == 0 else "All read."))
        usage = {"input_tokens": _counted(request), "output_tokens": 20, "total_tokens": _counted(request) + 20}
        return r.sse_reply([*r.created(), *r.function_call(0, f"fc_{number}", f"call_{number}", "read", [json.dumps({"page": number})]),
                            r.completed(usage)])

    return model, choose


LONG_APIS = {"chat": long_chat, "anthropic": long_anthropic, "responses": long_responses}


@pytest.mark.parametrize("api", list(LONG_APIS))
def test_a_long_run_compacts_by_the_meter_over_http(
    api: str, loopback: Any, wire: Any, anthropic_wire: Any, responses_wire: Any, tmp_path: Path
) -> None:
    model, choose = LONG_APIS[api](loopback, wire, anthropic_wire, responses_wire)
    responder = _Responder(loopback, choose)
    loopback.replies = responder
    path = tmp_path / "long.jsonl"

    def read(arguments: dict[str, Any], ctx: Any) -> str:
        return (f"page {arguments['page']}: lorem ipsum dolor sit amet. " * 60)[:2000]

    async def main() -> None:
        session = Session.create(path)
        agent = Agent(model, session=session, system="Read.", tools=[Tool("read", "Read a page.", {"type": "object"}, read)],
                      compaction=Compaction(context_window=WINDOW))
        async with model:
            agent.followup(create_user_message("Read every page.", source={"kind": "user"}))
            await agent.when_idle()
        session.close()

    asyncio.run(main())
    assert responder.agent_requests == STEPS + 1
    with Session.open(path, read_only=True) as session:
        assert check_events(session.events) == []
        assert [event.data["reason"]["kind"] for event in session.events if event.type == "turn/end"] == ["completed"]
        summaries = [event for event in session.events if event.type == "compaction/summary"]
        assert len(summaries) >= 3 and all(event.data["tokens_after"] < 0.8 * WINDOW for event in summaries)
        agent_bodies = [request.body for request in loopback.received if SUMMARY_SYSTEM.encode() not in request.body]
        assert max(len(body) // 4 for body in agent_bodies) < WINDOW  # the provider's count stayed in the window
        rebuilt = [model.request_body(project_request(session, at_seq=seq)) for seq in request_prefixes(session)]
        assert [body for body in rebuilt if SUMMARY_SYSTEM.encode() not in body] == agent_bodies
        assert session.messages()[-1].text == "All read."


def test_the_one_overflow_mapping() -> None:
    from dshkit.models.errors import http_error_for_status, is_context_overflow
    from dshkit.models.stream_translation import provider_stream_error

    vllm = "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."
    assert http_error_for_status(400, vllm).code == CONTEXT_WINDOW_EXCEEDED  # no provider code, its words
    assert http_error_for_status(413, "too large", provider_code="context_length_exceeded").code == CONTEXT_WINDOW_EXCEEDED
    assert http_error_for_status(400, "bad temperature", provider_code="invalid_value").code == "http_400"
    assert http_error_for_status(500, vllm).code == "http_500"  # a server error stays one (and is retried)
    failed = provider_stream_error("{}", {"code": "context_length_exceeded", "message": "too long"}, status=200, request_id=None)
    assert failed.code == CONTEXT_WINDOW_EXCEEDED and failed.provider_code == "context_length_exceeded"
    assert not is_context_overflow("rate_limit_exceeded", "slow down") and is_context_overflow(None, "Prompt is too long: 1 > 0")
