"""Models by name: ``Agent("openai:gpt-4.1-mini")`` and `infer_model`, through the known providers
and their key variables; a missing key names the variable to set."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshkit import create_user_message
from dshkit.agent import Agent
from dshkit.models import AnthropicModel, OpenAICompatibleModel, OpenAIResponsesModel, Provider, infer_model
from dshkit.models.provider import KNOWN_PROVIDERS

KEYS = {
    "OPENAI_API_KEY": "sk-o",
    "ANTHROPIC_API_KEY": "sk-a",
    "DEEPSEEK_API_KEY": "sk-d",
    "GROQ_API_KEY": "sk-g",
    "MISTRAL_API_KEY": "sk-m",
    "OPENROUTER_API_KEY": "sk-r",
}


@pytest.mark.parametrize(
    ("name", "cls", "url", "provider", "key"),
    [
        ("openai:gpt-4.1-mini", OpenAICompatibleModel, "https://api.openai.com/v1/chat/completions", "openai", "sk-o"),
        ("openai-responses:gpt-5-mini", OpenAIResponsesModel, "https://api.openai.com/v1/responses", "openai", "sk-o"),
        ("anthropic:claude-sonnet-4-5", AnthropicModel, "https://api.anthropic.com/v1/messages", "anthropic", "sk-a"),
        ("deepseek:deepseek-chat", OpenAICompatibleModel, "https://api.deepseek.com/chat/completions", "deepseek", "sk-d"),
        ("groq:llama-3.3-70b", OpenAICompatibleModel, "https://api.groq.com/openai/v1/chat/completions", "groq", "sk-g"),
        ("mistral:magistral-small", OpenAICompatibleModel, "https://api.mistral.ai/v1/chat/completions", "mistral", "sk-m"),
        ("openrouter:deepseek/deepseek-r1", OpenAICompatibleModel, "https://openrouter.ai/api/v1/chat/completions", "openrouter", "sk-r"),
        ("ollama:llama3.2:3b", OpenAICompatibleModel, "http://127.0.0.1:11434/v1/chat/completions", "ollama", None),
    ],
)
def test_a_name_picks_the_api_endpoint_profile_and_key(name: str, cls: type, url: str, provider: str, key: str | None) -> None:
    model = infer_model(name, environ=KEYS)
    assert type(model) is cls
    assert (model.url, model.provider, model.provider_config.api_key) == (url, provider, key)
    assert model.model == name.partition(":")[2]
    if cls is OpenAICompatibleModel:
        assert model.profile.name == provider


def test_options_go_to_the_provider_or_the_model_and_the_base_url_variable_wins() -> None:
    model = infer_model("deepseek:deepseek-chat", environ={**KEYS, "DEEPSEEK_BASE_URL": "http://127.0.0.1:8000/v1"}, timeout=7, context_window=64_000)
    assert (model.url, model.timeout, model.context_window) == ("http://127.0.0.1:8000/v1/chat/completions", 7.0, 64_000)
    assert Provider.named("vllm", {"VLLM_BASE_URL": "http://127.0.0.1:8000/v1"}).name == "vllm"


@pytest.mark.parametrize(
    ("name", "environ", "message"),
    [
        ("anthropic:claude-sonnet-4-5", {}, r"model 'anthropic:claude-sonnet-4-5': provider 'anthropic': ANTHROPIC_API_KEY is not set"),
        ("openai:gpt-4.1-mini", {"OPENAI_API_KEY": "  "}, r"OPENAI_API_KEY is not set"),
        ("vllm:qwen3", {}, r"VLLM_BASE_URL is not set"),
        ("gpt-4.1-mini", {}, r"model name 'gpt-4.1-mini': expected 'provider:model' with a provider among anthropic, deepseek"),
        ("acme:big", {}, r"model name 'acme:big': expected 'provider:model'"),
        ("openai:", KEYS, r"expected 'provider:model'"),
    ],
)
def test_bad_names_and_missing_variables_are_clear(name: str, environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        infer_model(name, environ=environ)


def test_every_known_provider_builds_a_model() -> None:
    environ = {**KEYS, "VLLM_BASE_URL": "http://127.0.0.1:8000/v1"}
    for name in KNOWN_PROVIDERS:
        assert infer_model(f"{name}:m", environ=environ).model == "m"


def test_an_agent_by_name_talks_to_the_named_provider(loopback: Any, wire: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.base_url)
    loopback.reply(wire.sse_reply(wire.answer("Hello by name")))

    async def main() -> Any:
        agent = Agent("openai:gpt-4.1-mini")
        async with agent.model:  # type: ignore[attr-defined]
            agent.followup(create_user_message("Hi", source={"kind": "user"}))
            await agent.when_idle()
            return agent.session.messages()[-1]

    message = asyncio.run(main())
    assert message.to_dict()["content"] == [{"type": "text", "text": "Hello by name"}]
    assert (message.source["provider"], message.source["model"]) == ("openai", "gpt-4.1-mini")
    assert loopback.received[0].headers["Authorization"] == "Bearer sk-from-env"
    assert loopback.received[0].json["model"] == "gpt-4.1-mini"


def test_an_agent_by_name_without_its_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY is not set"):
        Agent("anthropic:claude-sonnet-4-5")
    with pytest.raises(ValueError, match="model name 'claude': expected 'provider:model'"):
        Agent("claude")
