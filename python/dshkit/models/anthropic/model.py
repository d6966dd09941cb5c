"""`AnthropicModel`: the Anthropic Messages API, streamed over httpx (no SDK).

The body is a pure function of the request (`dshkit.models.anthropic.projection`), the events
become protocol chunks (`dshkit.models.anthropic.stream`), and transport, retries (529
``overloaded_error`` like 429) and cancellation are shared with the other HTTP models
(`dshkit.models.http.model`). Thinking signatures and redacted thinking travel in the assistant
message's ``source.replay_state`` and go back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from dshkit.models.anthropic.projection import anthropic_body
from dshkit.models.anthropic.stream import AnthropicStreamTranslator
from dshkit.models.projection import encode_body
from dshkit.models.http.model import HTTPModel, RetryCallback, StreamTranslator, endpoint
from dshkit.models.http.sse import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicModel(HTTPModel):
    """A Claude model behind the Messages API (``POST {base_url}/v1/messages``).

    `max_tokens` is sent with every request (the API requires it; a call setting of the same
    name wins). `api_key` goes in ``x-api-key``; `anthropic_version` in ``anthropic-version``.
    Thinking is a call setting: ``config={"thinking": {"type": "enabled", "budget_tokens": N}}``.
    The other options are those of `OpenAICompatibleModel`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.anthropic.com",
        api_key: str | None = None,
        provider: str = "anthropic",
        max_tokens: int = 8192,
        anthropic_version: str = ANTHROPIC_VERSION,
        timeout: float = 600.0,
        stream_timeout: float | None = None,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        headers: Mapping[str, str] | None = None,
        on_retry: RetryCallback | None = None,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
    ) -> None:
        base = base_url.strip().rstrip("/") if isinstance(base_url, str) else base_url
        suffix = "/messages" if isinstance(base, str) and base.endswith("/v1") else "/v1/messages"
        url = endpoint("AnthropicModel", base, suffix)
        if not isinstance(provider, str) or not provider:
            raise ValueError(f"AnthropicModel provider: expected a non-empty str, got {provider!r}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"AnthropicModel max_tokens: expected an int >= 1, got {max_tokens!r}")
        api_key = self._check_api_key("AnthropicModel", api_key)
        auth = {"anthropic-version": anthropic_version}
        if api_key:
            auth["x-api-key"] = api_key
        super().__init__(
            model,
            url=url,
            provider=provider,
            auth_headers=auth,
            timeout=timeout,
            stream_timeout=stream_timeout,
            max_event_bytes=max_event_bytes,
            max_retries=max_retries,
            retry_backoff=retry_backoff,
            max_retry_wait=max_retry_wait,
            headers=headers,
            on_retry=on_retry,
            http_client=http_client,
            context_window=context_window,
        )
        self.max_tokens = max_tokens

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        return encode_body(anthropic_body(request, model=self._model, max_tokens=self.max_tokens))

    def _new_translator(self, status: int, request_id: str | None) -> StreamTranslator:
        return AnthropicStreamTranslator(status=status, request_id=request_id)
