"""Chat Completions provider profiles, the reasoning fields of every provider, and `from_env`."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

import httpx
import pytest

from dshkit import create_assistant_message, create_tool_result_message, create_user_message
from dshkit.models import Provider, from_env
from dshkit.models.anthropic.model import AnthropicModel
from dshkit.models.chat.profiles import PROFILES, profile_for, provider_for_url
from dshkit.models.chat.stream import ChatStreamTranslator
from dshkit.models.errors import MalformedResponseError
from dshkit.models.chat.model import OpenAICompatibleModel
from dshkit.models.responses.model import OpenAIResponsesModel
from dshkit.models.http.sse import ServerSentEvent


@dataclass(frozen=True)
class Request:
    messages: tuple[Any, ...]
    system: Any = None
    tools: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)


def delta_event(delta: dict[str, Any], finish: str | None = None) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))


def translate(*deltas: dict[str, Any]) -> list[dict[str, Any]]:
    translator = ChatStreamTranslator()
    out: list[dict[str, Any]] = []
    for delta in deltas:
        out.extend(translator.feed(delta_event(delta)))  # type: ignore[arg-type]
    out.extend(translator.feed(delta_event({}, "stop")))  # type: ignore[arg-type]
    return [c for c in out if c["type"] != "finish"]


def test_mistral_list_valued_content_with_thinking_and_text_parts() -> None:
    chunks = translate(
        {"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Let me think"}]}]},
        {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": " more."}]}, {"type": "text", "text": "Answer"}]},
        {"content": " done."},
    )
    assert chunks == [
        {"type": "reasoning_delta", "text": "Let me think"},
        {"type": "reasoning_delta", "text": " more."},
        {"type": "text_delta", "text": "Answer"},
        {"type": "text_delta", "text": " done."},
    ]


def test_reasoning_details_alone_and_never_twice_beside_reasoning() -> None:
    # Snowflake Cortex: only reasoning_details.
    assert translate({"reasoning_details": [{"type": "reasoning.text", "text": "deep"}, {"type": "reasoning.encrypted", "data": "xx"}]}) == [
        {"type": "reasoning_delta", "text": "deep"}
    ]
    # OpenRouter: the same text in both fields counts once.
    both = {"reasoning": "step one", "reasoning_details": [{"type": "reasoning.text", "text": "step one", "format": "x"}]}
    assert translate(both) == [{"type": "reasoning_delta", "text": "step one"}]
    assert translate({"reasoning_details": [{"type": "reasoning.summary", "summary": "short"}]}) == [{"type": "reasoning_delta", "text": "short"}]
    # vLLM in transition sends reasoning_content and reasoning alike.
    assert translate({"reasoning_content": "r", "reasoning": "r"}) == [{"type": "reasoning_delta", "text": "r"}]


def test_bad_content_parts_are_malformed() -> None:
    with pytest.raises(MalformedResponseError, match=r"delta.content\[0\].thinking\[0\] has no text"):
        translate({"content": [{"type": "thinking", "thinking": [{"type": "text"}]}]})
    with pytest.raises(MalformedResponseError, match="reasoning_details is not a list"):
        translate({"reasoning_details": "x"})


TOOL_TURN = (
    create_user_message("hi", source={"kind": "user"}),
    create_assistant_message([{"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"}], provider="p", model="m"),
    create_tool_result_message("c1", [{"type": "text", "text": "ok"}]),
    create_assistant_message([{"type": "reasoning", "text": "why"}, {"type": "text", "text": "done"}], provider="p", model="m"),
)


def body_for(provider: str) -> dict[str, Any]:
    model = OpenAICompatibleModel("m", Provider("http://127.0.0.1:9/v1", name=provider))
    return json.loads(model.request_body(Request(TOOL_TURN)))


def test_deepseek_gets_an_empty_reasoning_content_on_tool_call_turns() -> None:
    body = body_for("deepseek")
    assert body["messages"][1]["reasoning_content"] == ""
    assert body["messages"][3]["reasoning_content"] == "why"


@pytest.mark.parametrize("provider", ["groq", "mistral", "openai", "ollama"])
def test_providers_that_refuse_reasoning_content_never_get_it(provider: str) -> None:
    assert all("reasoning_content" not in message for message in body_for(provider)["messages"])


def test_stream_options_only_where_accepted_and_explicit_arguments_win() -> None:
    assert "stream_options" not in body_for("mistral")
    assert body_for("groq")["stream_options"] == {"include_usage": True}
    assert body_for("openrouter")["messages"][3]["reasoning"] == "why"
    model = OpenAICompatibleModel("m", Provider("https://api.mistral.ai/v1"), include_usage=True, reasoning_field="reasoning_content")
    assert model.provider == "mistral" and model.include_usage is True and model.reasoning_field == "reasoning_content"
    assert set(PROFILES) >= {"deepseek", "openai", "groq", "mistral", "openrouter", "vllm", "ollama"}
    assert profile_for("my-gateway").reasoning_out == "reasoning_content"


@pytest.mark.parametrize(
    ("url", "provider"),
    [
        ("https://api.groq.com/openai/v1", "groq"),
        ("https://api.mistral.ai/v1", "mistral"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("http://localhost:11434/v1", "ollama"),
        ("http://127.0.0.1:8000/v1", None),
    ],
)
def test_profile_from_the_base_url(url: str, provider: str | None) -> None:
    assert provider_for_url(url) == provider


def test_from_env_picks_the_api_and_the_profile() -> None:
    env = {"DSHKIT_MODEL": "m", "DSHKIT_API_KEY": " k \n"}
    chat = from_env({**env, "DSHKIT_BASE_URL": "http://10.0.0.5:8000/v1", "DSHKIT_PROVIDER": "vllm"})
    assert isinstance(chat, OpenAICompatibleModel) and chat.provider == "vllm" and chat.profile.name == "vllm"
    anthropic = from_env({**env, "DSHKIT_API": "anthropic"}, timeout=3)
    assert isinstance(anthropic, AnthropicModel) and anthropic.url == "https://api.anthropic.com/v1/messages" and anthropic.timeout == 3
    responses = from_env({**env, "DSHKIT_API": "chat"}, api="responses")  # the argument wins
    assert isinstance(responses, OpenAIResponsesModel) and responses.provider == "openai"
    with pytest.raises(ValueError, match="DSHKIT_API: expected one of chat, anthropic, responses, got 'gemini'"):
        from_env({**env, "DSHKIT_API": "gemini"})
    with pytest.raises(ValueError, match="^DSHKIT_MODEL not set"):
        from_env({"DSHKIT_API": "anthropic"})


def test_chat_model_sends_through_a_callers_client_and_leaves_it_open(loopback: Any, wire: Any) -> None:
    loopback.reply(wire.sse_reply(wire.answer("hi")))

    async def main() -> bool:
        async with httpx.AsyncClient(headers={"X-Trace": "t1"}) as client:
            async with OpenAICompatibleModel("m", Provider(loopback.base_url, timeout=5.0, http_client=client)) as model:
                assert [c async for c in model.stream(Request(TOOL_TURN[:1]))][-1]["reason"] == "stop"
            return client.is_closed

    assert asyncio.run(main()) is False
    assert loopback.received[0].headers["X-Trace"] == "t1"


def test_usage_summary_reads_all_three_apis() -> None:
    from dshkit.models.stream_translation import usage_summary

    anthropic = {"input_tokens": 12, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 2048, "output_tokens": 17}
    assert usage_summary(anthropic) == {
        "input_tokens": 2160, "cached_input_tokens": 2048, "cache_write_tokens": 100, "output_tokens": 17,
    }
    responses = {"input_tokens": 2000, "input_tokens_details": {"cached_tokens": 1536}, "output_tokens": 50,
                 "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 2050}
    assert usage_summary(responses) == {
        "input_tokens": 2000, "cached_input_tokens": 1536, "output_tokens": 50, "reasoning_tokens": 30, "total_tokens": 2050,
    }
