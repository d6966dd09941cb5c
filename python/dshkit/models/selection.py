"""`from_env`: the model a program (and ``dshkit chat``) is configured for by the environment.

``DSHKIT_API`` (or the `api` argument) picks the wire format: ``chat`` (default, Chat
Completions through `OpenAICompatibleModel`, with the provider profile from ``DSHKIT_PROVIDER``
or the base URL's host), ``anthropic`` (`AnthropicModel`) or ``responses``
(`OpenAIResponsesModel`). ``DSHKIT_MODEL`` names the model, ``DSHKIT_BASE_URL`` the endpoint
(required for ``chat``; the vendor's own by default for the other two), ``DSHKIT_API_KEY`` the
key. The HTTP models are imported only here, when called.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["APIS", "from_env"]

APIS = ("chat", "anthropic", "responses")


def from_env(environ: Mapping[str, str] | None = None, *, api: str | None = None, **options: Any) -> Any:
    """The model the environment describes; keyword `options` (``on_retry``, ``timeout``,
    ``http_client``, ...) go to its constructor. Raises `ValueError` naming what is missing."""
    env = os.environ if environ is None else environ
    chosen = (api if api is not None else env.get("DSHKIT_API") or "chat").strip().lower()
    if chosen not in APIS:
        source = "api" if api is not None else "DSHKIT_API"
        raise ValueError(f"{source}: expected one of {', '.join(APIS)}, got {chosen!r}")
    if chosen == "chat":
        from dshkit.models.chat.model import OpenAICompatibleModel

        return OpenAICompatibleModel.from_env(env, **options)
    model = env.get("DSHKIT_MODEL")
    if not model:
        example = "claude-sonnet-4-5" if chosen == "anthropic" else "gpt-5-mini"
        raise ValueError(f"DSHKIT_MODEL not set: dshkit needs DSHKIT_MODEL (e.g. {example}) and DSHKIT_API_KEY")
    settings: dict[str, Any] = {"api_key": (env.get("DSHKIT_API_KEY") or "").strip() or None}
    if env.get("DSHKIT_BASE_URL"):
        settings["base_url"] = env["DSHKIT_BASE_URL"]
    if (env.get("DSHKIT_PROVIDER") or "").strip():
        settings["provider"] = env["DSHKIT_PROVIDER"].strip()
    settings.update(options)
    if chosen == "anthropic":
        from dshkit.models.anthropic.model import AnthropicModel

        return AnthropicModel(model, **settings)
    from dshkit.models.responses.model import OpenAIResponsesModel

    return OpenAIResponsesModel(model, **settings)
