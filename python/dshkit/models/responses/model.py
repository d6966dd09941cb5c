"""`OpenAIResponsesModel`: the OpenAI Responses API, streamed over httpx (no SDK).

Stateless: every request carries the whole conversation from the log (``store: false``, no
``previous_response_id``), with encrypted reasoning items and the API's own item ids replayed
from each assistant message's ``source.replay_state`` (`dshkit.models.responses.projection`).
Events become chunks in `dshkit.models.responses.stream`; transport, retries and cancellation are
shared with the other HTTP models (`dshkit.models.http.model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

from dshkit.models.projection import encode_body
from dshkit.models.http.model import HTTPModel, RetryCallback, StreamTranslator, endpoint, provider_from_url
from dshkit.models.responses.projection import responses_body
from dshkit.models.responses.stream import ResponsesStreamTranslator
from dshkit.models.http.sse import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["OpenAIResponsesModel"]


class OpenAIResponsesModel(HTTPModel):
    """A model behind the Responses API (``POST {base_url}/responses``).

    `base_url` defaults to ``https://api.openai.com/v1``; `api_key` is sent as a bearer token;
    `provider` defaults to a name derived from the host. Reasoning effort and summaries are call
    settings (``config={"reasoning": {"effort": "low", "summary": "auto"}}``). The other options
    are those of `OpenAICompatibleModel`.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        provider: str | None = None,
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
        url = endpoint("OpenAIResponsesModel", base_url, "/responses")
        if provider is not None and (not isinstance(provider, str) or not provider):
            raise ValueError(f"OpenAIResponsesModel provider: expected a non-empty str, got {provider!r}")
        api_key = self._check_api_key("OpenAIResponsesModel", api_key)
        super().__init__(
            model,
            url=url,
            provider=provider or provider_from_url(url),
            auth_headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
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

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        return encode_body(responses_body(request, model=self._model))

    def _new_translator(self, status: int, request_id: str | None) -> StreamTranslator:
        return ResponsesStreamTranslator(status=status, request_id=request_id)
