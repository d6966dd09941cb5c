"""One call-settings vocabulary (`ModelSettings`) mapped to each API's names, and the `Provider`
every HTTP model connects through; a scripted run never imports httpx."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support import DSHKIT_PATH

from dshkit import create_user_message
from dshkit.models import AnthropicModel, OpenAICompatibleModel, OpenAIResponsesModel, Provider
from dshkit.session import ModelRequest

LOCAL = "http://127.0.0.1:9/v1"
MODELS = {
    "chat": lambda **kw: OpenAICompatibleModel("m", Provider(LOCAL), **kw),
    "anthropic": lambda **kw: AnthropicModel("m", Provider(LOCAL), **kw),
    "responses": lambda **kw: OpenAIResponsesModel("m", Provider(LOCAL), **kw),
}


def body(model: Any, config: dict[str, Any]) -> dict[str, Any]:
    request = ModelRequest((create_user_message("Hi", source={"kind": "user"}),), config=config)
    return json.loads(model.request_body(request))


COMMON = {"max_tokens": 50, "temperature": 0.2, "top_p": 0.9, "stop": "END"}


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("chat", {"max_tokens": 50, "temperature": 0.2, "top_p": 0.9, "stop": "END"}),
        ("anthropic", {"max_tokens": 50, "temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"]}),
        ("responses", {"max_output_tokens": 50, "temperature": 0.2, "top_p": 0.9}),
    ],
)
def test_common_settings_go_under_each_apis_names(api: str, expected: dict[str, Any]) -> None:
    config = dict(COMMON) if api != "responses" else {k: v for k, v in COMMON.items() if k != "stop"}
    sent = body(MODELS[api](), config)
    assert {key: sent[key] for key in expected} == expected
    assert "output_schema" not in sent
    if api == "responses":
        assert "max_tokens" not in sent


@pytest.mark.parametrize(("api", "setting"), [("anthropic", "seed"), ("responses", "stop"), ("responses", "frequency_penalty")])
def test_a_common_setting_the_api_lacks_is_refused_by_name(api: str, setting: str) -> None:
    with pytest.raises(ValueError, match=rf"config\['{setting}'\]: the .* has no '{setting}' setting"):
        body(MODELS[api](), {setting: 1})


def test_one_setting_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"config\['max_output_tokens'\]: sets 'max_output_tokens', which config\['max_tokens'\] already sets"):
        body(MODELS["responses"](), {"max_tokens": 5, "max_output_tokens": 6})


def test_provider_keys_pass_through_and_the_models_defaults_yield_to_the_request() -> None:
    model = MODELS["responses"](settings={"max_tokens": 100, "temperature": 0.5})
    sent = body(model, {"max_tokens": 7, "reasoning": {"effort": "low"}})
    assert (sent["max_output_tokens"], sent["temperature"], sent["reasoning"]) == (7, 0.5, {"effort": "low"})
    anthropic = MODELS["anthropic"](settings={"max_tokens": 300})
    assert list(body(anthropic, {}))[:2] == ["model", "max_tokens"] and body(anthropic, {})["max_tokens"] == 300
    assert body(MODELS["anthropic"](), {})["max_tokens"] == 8192


def test_the_provider_holds_the_transport_and_validates_it() -> None:
    provider = Provider(LOCAL, api_key="sk-secret", timeout=3, max_retries=0, headers={"X-A": "1"})
    model = OpenAICompatibleModel("m", provider)
    assert (model.provider_config, model.timeout, model.max_retries) == (provider, 3.0, 0)
    assert "sk-secret" not in repr(provider) and "api_key=***" in repr(provider)
    assert OpenAICompatibleModel("m", Provider(LOCAL)).timeout == 120.0  # each API's own default
    assert AnthropicModel("m", Provider(LOCAL)).timeout == 600.0
    assert provider.with_options(timeout=9).timeout == 9 and provider.timeout == 3
    with pytest.raises(ValueError, match="Provider api_key: contains whitespace"):
        Provider(LOCAL, api_key="sk bad")
    with pytest.raises(ValueError, match=r"Provider headers\['X-A'\]"):
        Provider(LOCAL, headers={"X-A": " padded"})
    with pytest.raises(TypeError, match="OpenAICompatibleModel provider: expected a Provider"):
        OpenAICompatibleModel("m", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AnthropicModel settings: expected a mapping"):
        AnthropicModel("m", settings=["max_tokens"])  # type: ignore[arg-type]


def test_a_scripted_run_that_compacts_never_imports_httpx(tmp_path: Any) -> None:
    # The summary is asked with a token cap in the common vocabulary: naming it no longer
    # inspects the model's class (which imported the HTTP models, and httpx with them).
    script = textwrap.dedent(
        """
        import asyncio, sys
        sys.path.insert(0, sys.argv[1])
        from dshkit import create_user_message
        from dshkit.agent import Agent, Compaction
        from dshkit.models import ScriptedModel

        async def main():
            model = ScriptedModel(["a " * 2000, "The user asked; it was answered.", "Short."])
            agent = Agent(model, compaction=Compaction(context_window=2000, threshold=0.5, keep_recent_tokens=100))
            for text in ("Tell me everything.", "And now?"):
                agent.followup(create_user_message(text, source={"kind": "user"}))
                await agent.when_idle()
            summary_request = model.requests[1]
            assert dict(summary_request.config) == {"max_tokens": 256}, summary_request.config
            assert "httpx" not in sys.modules, "httpx was imported"

        asyncio.run(main())
        """
    )
    result = subprocess.run([sys.executable, "-c", script, DSHKIT_PATH], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
