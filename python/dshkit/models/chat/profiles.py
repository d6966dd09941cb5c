"""Provider profiles for Chat Completions: the quirks an OpenAI-compatible endpoint is known for.

A profile says which key reasoning is sent back under (``None``: not at all, for providers that
refuse an unknown message key), whether an assistant message with tool calls must carry that key
even when empty (DeepSeek's thinking mode answers 400 "Missing reasoning_content" otherwise), and
whether ``stream_options`` is accepted (Mistral answers 422). Reading is the same for every
provider: the stream translator reads reasoning from every field providers use
(`dshkit.models.chat.stream`), so `reasoning_in` only documents where each one sends it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit

__all__ = ["GENERIC", "PROFILES", "ChatProfile", "profile_for", "provider_for_url"]


@dataclass(frozen=True)
class ChatProfile:
    """The request-side quirks of one Chat Completions provider."""

    name: str
    reasoning_in: tuple[str, ...]
    reasoning_out: str | None
    empty_reasoning_with_tool_calls: bool = False
    stream_options: bool = True


GENERIC = ChatProfile("openai-compatible", ("reasoning_content", "reasoning"), "reasoning_content")

PROFILES: dict[str, ChatProfile] = {
    profile.name: profile
    for profile in (
        ChatProfile("deepseek", ("reasoning_content",), "reasoning_content", empty_reasoning_with_tool_calls=True),
        ChatProfile("openai", (), None),
        # Groq answers 400 to a `reasoning_content` property on a message.
        ChatProfile("groq", ("reasoning",), None),
        # Mistral's magistral streams thinking as `content` parts and answers 422 to stream_options.
        ChatProfile("mistral", ("content[].thinking",), None, stream_options=False),
        ChatProfile("openrouter", ("reasoning", "reasoning_details"), "reasoning"),
        ChatProfile("vllm", ("reasoning_content", "reasoning"), "reasoning_content"),
        ChatProfile("ollama", ("reasoning",), None),
    )
}

# Hosts whose provider the URL names; ports that name a local server's default.
_HOSTS = {
    "api.deepseek.com": "deepseek",
    "api.openai.com": "openai",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral",
    "openrouter.ai": "openrouter",
}
_PORTS = {11434: "ollama"}


def profile_for(provider: str) -> ChatProfile:
    """The profile named `provider`; any other name gets the generic profile under that name."""
    known = PROFILES.get(provider.lower())
    return known if known is not None else replace(GENERIC, name=provider)


def provider_for_url(url: str) -> str | None:
    """The profile a base URL names by its host (or a local server's default port), if any."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for known, name in _HOSTS.items():
        if host == known or host.endswith("." + known):
            return name
    try:
        port = parts.port
    except ValueError:
        return None
    return _PORTS.get(port) if port is not None else None
