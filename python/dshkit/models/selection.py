"""Choosing a model without constructing it by hand: from the environment or from a name.

`from_env`: ``DSHKIT_API`` (or the `api` argument) picks the wire format: ``chat`` (default, Chat
Completions through `OpenAICompatibleModel`, with the provider profile from ``DSHKIT_PROVIDER``
or the base URL's host), ``anthropic`` (`AnthropicModel`) or ``responses``
(`OpenAIResponsesModel`). ``DSHKIT_MODEL`` names the model, ``DSHKIT_BASE_URL`` the endpoint
(required for ``chat``; the vendor's own by default for the other two), ``DSHKIT_API_KEY`` the
key.

`infer_model`: ``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``,
``"deepseek:deepseek-chat"``, ...: a known provider (`dshkit.models.provider.KNOWN_PROVIDERS`)
and the model's name, the key read from the provider's usual variable (``OPENAI_API_KEY``, ...).

The HTTP models are imported only here, when called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dshkit.models.protocol import Model
from dshkit.models.provider import KNOWN_PROVIDERS, Provider, split_options

__all__ = ["APIS", "from_env", "infer_model", "model_class"]

APIS = ("chat", "anthropic", "responses")


def model_class(api: str) -> Any:
    """The model class of the wire format `api` (one of `APIS`), imported now."""
    if api == "chat":
        from dshkit.models.chat.model import OpenAICompatibleModel

        return OpenAICompatibleModel
    if api == "anthropic":
        from dshkit.models.anthropic.model import AnthropicModel

        return AnthropicModel
    if api == "responses":
        from dshkit.models.responses.model import OpenAIResponsesModel

        return OpenAIResponsesModel
    raise ValueError(f"api: expected one of {', '.join(APIS)}, got {api!r}")


def from_env(environ: Mapping[str, str] | None = None, *, api: str | None = None, **options: Any) -> Any:
    """The model the environment describes; keyword `options` go to its `Provider` (``on_retry``,
    ``timeout``, ``http_client``, ...) or, when not the provider's, to the model's constructor.
    Raises `ValueError` naming what is missing."""
    env = os.environ if environ is None else environ
    chosen = (api if api is not None else env.get("DSHKIT_API") or "chat").strip().lower()
    if chosen not in APIS:
        source = "api" if api is not None else "DSHKIT_API"
        raise ValueError(f"{source}: expected one of {', '.join(APIS)}, got {chosen!r}")
    cls = model_class(chosen)
    if chosen == "chat":
        return cls.from_env(env, **options)
    model = env.get("DSHKIT_MODEL")
    if not model:
        example = "claude-sonnet-4-5" if chosen == "anthropic" else "gpt-5-mini"
        raise ValueError(f"DSHKIT_MODEL not set: dshkit needs DSHKIT_MODEL (e.g. {example}) and DSHKIT_API_KEY")
    transport, own = split_options(options)
    settings: dict[str, Any] = {"api_key": (env.get("DSHKIT_API_KEY") or "").strip() or None}
    if (env.get("DSHKIT_PROVIDER") or "").strip():
        settings["name"] = env["DSHKIT_PROVIDER"].strip()
    settings.update(transport)
    base_url = env.get("DSHKIT_BASE_URL") or str(KNOWN_PROVIDERS["anthropic" if chosen == "anthropic" else "openai-responses"].base_url)
    return cls(model, Provider(base_url, **settings), **own)


def infer_model(name: str, *, environ: Mapping[str, str] | None = None, **options: Any) -> Model:
    """The model ``"provider:model"`` names (``"openai:gpt-4.1-mini"``), its key and base URL from
    the provider's environment variables (`KNOWN_PROVIDERS`; ``OPENAI_BASE_URL`` and the like
    override the endpoint). Keyword `options` go to the `Provider` or the model's constructor.

    Raises `ValueError` for a name without a known provider (listing them) and naming the
    variable to set when the key is missing.
    """
    if not isinstance(name, str):
        raise TypeError(f"model name: expected a str such as 'openai:gpt-4.1-mini', got {type(name).__name__}")
    prefix, colon, model = name.partition(":")
    known = KNOWN_PROVIDERS.get(prefix.strip().lower())
    if not colon or not model.strip() or known is None:
        raise ValueError(
            f"model name {name!r}: expected 'provider:model' with a provider among "
            f"{', '.join(sorted(KNOWN_PROVIDERS))} (e.g. 'openai:gpt-4.1-mini')"
        )
    transport, own = split_options(options)
    try:
        provider = known.provider(environ, **transport)
    except ValueError as error:
        raise ValueError(f"model {name!r}: {error}") from None
    built: Model = model_class(known.api)(model.strip(), provider, **own)
    return built
