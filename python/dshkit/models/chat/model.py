"""`OpenAICompatibleModel`: streaming chat completions over HTTP (httpx), no vendor SDK.

Works with DeepSeek, OpenAI, Groq, Mistral, vLLM, Ollama, llama.cpp's server, OpenRouter and any
endpoint that speaks ``POST {base_url}/chat/completions`` with ``"stream": true``. The request
body is a pure function of the `ModelRequest` and the provider profile
(`dshkit.models.chat.projection`, `dshkit.models.chat.profiles`); the response's server-sent
events become protocol chunks (`dshkit.models.chat.stream`); transport, retries and cancellation
are shared with the other HTTP models (`dshkit.models.http.model`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dshkit.models.chat.profiles import ChatProfile, profile_for, provider_for_url
from dshkit.models.chat.projection import chat_body
from dshkit.models.projection_parts import encode_body
from dshkit.models.chat.stream import ChatStreamTranslator
from dshkit.models.stream_translation import excerpt
from dshkit.models.errors import MalformedResponseError
from dshkit.models.http.model import HTTPModel, RetryCallback, StreamTranslator
from dshkit.models.http.urls import endpoint, provider_from_url
from dshkit.models.protocol import Chunk
from dshkit.models.provider import Provider, provider_argument, split_options
from dshkit.models.settings import ModelSettings
from dshkit.models.http.sse import ServerSentEvent

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["OpenAICompatibleModel", "RetryCallback"]

_FROM_PROFILE: Any = object()  # "not given": the provider profile decides


class OpenAICompatibleModel(HTTPModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    `model` is the provider's model name; `provider` says where and how to connect: a
    `Provider` (its `base_url` the API root, ``https://api.deepseek.com``,
    ``http://127.0.0.1:8000/v1``; a URL already ending in ``/chat/completions`` is used as is),
    or the name of a known one (``"deepseek"``: `Provider.named`, its key from the environment).
    The provider's `name` (recorded in each assistant message's source) defaults to one derived
    from the host (``deepseek``, ``openai``, ...; ``ollama`` for port 11434;
    ``openai-compatible`` for another IP or ``localhost``); a known name
    (`dshkit.models.chat.profiles.PROFILES`) selects that provider's quirks. `settings` are
    default call settings (`dshkit.models.settings.ModelSettings`). `reasoning_field` is the
    assistant-message key reasoning is sent back under (``None``: not sent back) and
    `include_usage` whether ``stream_options`` asks for usage; both default to the profile's.

    The model's own HTTP connection pool belongs to the event loop that first used the model:
    close it with ``await model.aclose()`` or ``async with model:``.
    """

    default_timeout = 120.0

    def __init__(
        self,
        model: str,
        provider: Provider | str,
        *,
        settings: ModelSettings | Mapping[str, Any] | None = None,
        reasoning_field: str | None = _FROM_PROFILE,
        include_usage: bool = _FROM_PROFILE,
        context_window: int | None = None,
    ) -> None:
        provider = provider_argument("OpenAICompatibleModel", provider)
        url = endpoint("OpenAICompatibleModel", provider.base_url, "/chat/completions")
        name = provider.name or provider_for_url(url) or provider_from_url(url)
        super().__init__(
            model,
            provider,
            url=url,
            name=name,
            auth_headers={"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {},
            settings=settings,
            context_window=context_window,
        )
        self.profile: ChatProfile = profile_for(name)
        self.reasoning_field = self.profile.reasoning_out if reasoning_field is _FROM_PROFILE else reasoning_field
        self.include_usage = self.profile.stream_options if include_usage is _FROM_PROFILE else include_usage

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> OpenAICompatibleModel:
        """A model configured by ``DSHKIT_BASE_URL``, ``DSHKIT_MODEL``, ``DSHKIT_API_KEY`` and
        ``DSHKIT_PROVIDER`` (a profile name; by default the base URL's host decides).

        The key may be unset (local servers); whitespace around it (the newline a key file
        ends in) is dropped. Keyword `options` go to the `Provider` (``timeout``, ``on_retry``,
        ...) or, when they are not its fields, to the constructor.
        """
        env = os.environ if environ is None else environ
        missing = [name for name in ("DSHKIT_BASE_URL", "DSHKIT_MODEL") if not env.get(name)]
        if missing:
            raise ValueError(
                f"{' and '.join(missing)} not set: dshkit needs DSHKIT_BASE_URL (e.g. "
                "https://api.deepseek.com), DSHKIT_MODEL (e.g. deepseek-chat) and, for hosted "
                "providers, DSHKIT_API_KEY"
            )
        transport, own = split_options(options)
        provider = (env.get("DSHKIT_PROVIDER") or "").strip()
        if provider and "name" not in transport:
            transport["name"] = provider
        api_key = (env.get("DSHKIT_API_KEY") or "").strip() or None
        return cls(env["DSHKIT_MODEL"], Provider(env["DSHKIT_BASE_URL"], **{"api_key": api_key, **transport}), **own)

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        return encode_body(
            chat_body(
                request,
                model=self._model,
                reasoning_field=self.reasoning_field,
                include_usage=self.include_usage,
                empty_reasoning_with_tool_calls=self.profile.empty_reasoning_with_tool_calls,
                defaults=self.settings,
                native_output=self.native_output,
            )
        )

    def _new_translator(self, status: int, request_id: str | None, **options: Any) -> StreamTranslator:
        return ChatStreamTranslator(status=status, request_id=request_id)

    def _json_chunks(self, payload: dict[str, Any], request_id: str | None, options: dict[str, Any]) -> list[Chunk]:
        return _completion_chunks(payload, request_id)


def _completion_chunks(payload: dict[str, Any], request_id: str | None) -> list[Chunk]:
    """Chunks of a non-streamed completion (``choices[0].message``), for servers ignoring ``stream``.

    The message is translated as the one delta of a stream, so both shapes follow the same rules.
    """
    choices = payload.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    if not isinstance(message, dict):
        received = json.dumps(payload)
        raise MalformedResponseError(
            f"the JSON response has no choices[0].message: {excerpt(received)!r}",
            received=received,
            status=200,
            request_id=request_id,
        )
    delta = dict(message)
    calls = message.get("tool_calls")
    if isinstance(calls, list):  # whole calls carry no index: their position is it
        delta["tool_calls"] = [{**call, "index": i} if isinstance(call, dict) else call for i, call in enumerate(calls)]
    event = {**payload, "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason") or "stop"}]}
    translator = ChatStreamTranslator(status=200, request_id=request_id)
    return translator.feed(ServerSentEvent(data=json.dumps(event))) + translator.finish()

