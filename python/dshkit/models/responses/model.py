"""`OpenAIResponsesModel`: the OpenAI Responses API, streamed over httpx (no SDK).

Stateless: every request carries the whole conversation from the log (``store: false``, no
``previous_response_id``), with encrypted reasoning items and the API's own item ids replayed
from each assistant message's ``source.replay_state`` (`dshkit.models.responses.projection`).
Events become chunks in `dshkit.models.responses.stream`; transport, retries and cancellation are
shared with the other HTTP models (`dshkit.models.http.model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dshkit.models.projection_parts import encode_body
from dshkit.models.http.model import HTTPModel, StreamTranslator
from dshkit.models.http.urls import endpoint, provider_from_url
from dshkit.models.provider import Provider, provider_argument
from dshkit.models.responses.projection import responses_body
from dshkit.models.responses.stream import ResponsesStreamTranslator
from dshkit.models.settings import ModelSettings

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["OPENAI_URL", "OpenAIResponsesModel"]

OPENAI_URL = "https://api.openai.com/v1"


class OpenAIResponsesModel(HTTPModel):
    """A model behind the Responses API (``POST {base_url}/responses``).

    `provider` defaults to OpenAI's endpoint (``https://api.openai.com/v1``) without a key
    (``Provider.named("openai-responses")`` reads ``OPENAI_API_KEY``); the key is sent as a
    bearer token; the provider name defaults to one derived from the host. Reasoning effort
    and summaries are call settings (``config={"reasoning": {"effort": "low", "summary": "auto"}}``).
    """

    def __init__(
        self,
        model: str,
        provider: Provider | str | None = None,
        *,
        settings: ModelSettings | Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        provider = Provider(OPENAI_URL) if provider is None else provider_argument("OpenAIResponsesModel", provider)
        url = endpoint("OpenAIResponsesModel", provider.base_url, "/responses")
        super().__init__(
            model,
            provider,
            url=url,
            name=provider.name or provider_from_url(url),
            auth_headers={"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {},
            settings=settings,
            context_window=context_window,
        )

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        return encode_body(responses_body(request, model=self._model, defaults=self.settings, native_output=self.native_output))

    def _new_translator(self, status: int, request_id: str | None, **options: Any) -> StreamTranslator:
        return ResponsesStreamTranslator(status=status, request_id=request_id)
