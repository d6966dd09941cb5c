"""`AnthropicModel`: the Anthropic Messages API, streamed over httpx (no SDK).

The body is a pure function of the request (`dshkit.models.anthropic.projection`), the events
become protocol chunks (`dshkit.models.anthropic.stream`), and transport, retries (529
``overloaded_error`` like 429) and cancellation are shared with the other HTTP models
(`dshkit.models.http.model`). Thinking signatures and redacted thinking travel in the assistant
message's ``source.replay_state`` and go back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dshkit.models.anthropic.projection import DEFAULT_MAX_TOKENS, anthropic_body
from dshkit.models.anthropic.stream import AnthropicStreamTranslator
from dshkit.models.projection_parts import encode_body
from dshkit.models.http.model import HTTPModel, StreamTranslator
from dshkit.models.http.urls import endpoint
from dshkit.models.provider import Provider, provider_argument
from dshkit.models.settings import ModelSettings, output_schema

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["ANTHROPIC_URL", "ANTHROPIC_VERSION", "AnthropicModel", "DEFAULT_MAX_TOKENS"]

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_URL = "https://api.anthropic.com"


class AnthropicModel(HTTPModel):
    """A Claude model behind the Messages API (``POST {base_url}/v1/messages``).

    `provider` defaults to Anthropic's endpoint without a key (``Provider.named("anthropic")``
    reads ``ANTHROPIC_API_KEY``); its key goes in ``x-api-key``, `anthropic_version` in
    ``anthropic-version``. ``max_tokens`` is sent with every request (the API requires it):
    8192 unless `settings` or the call settings say otherwise. Thinking is a call setting:
    ``config={"thinking": {"type": "enabled", "budget_tokens": N}}``.
    """

    def __init__(
        self,
        model: str,
        provider: Provider | str | None = None,
        *,
        settings: ModelSettings | Mapping[str, Any] | None = None,
        anthropic_version: str = ANTHROPIC_VERSION,
        context_window: int | None = None,
    ) -> None:
        provider = Provider(ANTHROPIC_URL, name="anthropic") if provider is None else provider_argument("AnthropicModel", provider)
        base = provider.base_url.strip().rstrip("/")
        url = endpoint("AnthropicModel", base, "/messages" if base.endswith("/v1") else "/v1/messages")
        auth = {"anthropic-version": anthropic_version}
        if provider.api_key:
            auth["x-api-key"] = provider.api_key
        super().__init__(
            model,
            provider,
            url=url,
            name=provider.name or "anthropic",
            auth_headers=auth,
            settings=settings,
            context_window=context_window,
        )
        max_tokens = self.settings.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"AnthropicModel settings['max_tokens']: expected an int >= 1, got {max_tokens!r}")

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        return encode_body(anthropic_body(request, model=self._model, defaults=self.settings, native_output=self.native_output))

    def _translation_options(self, request: ModelRequest) -> dict[str, Any]:
        spec = output_schema(request.config, native=self.native_output)
        return {"output_tool": spec["name"]} if spec is not None else {}

    def _new_translator(self, status: int, request_id: str | None, **options: Any) -> StreamTranslator:
        return AnthropicStreamTranslator(status=status, request_id=request_id, **options)
