"""`HTTPModel`: what every streaming HTTP model shares (transport, retries, cancellation, errors).

A subclass says where to post (`url`), which headers to send, how to build the body and how to
translate the event stream (`_new_translator`); this module does the rest, the same way for
every API:

Retries: a failure that may pass (429, 5xx and 529, 408, 409, connection failure, timeout, a body
cut off before anything was streamed, an error event the provider marks transient) is retried up
to `max_retries` times, waiting ``Retry-After`` (or ``retry-after-ms``) when the server says how
long, otherwise an exponential backoff from `retry_backoff` seconds. Nothing is retried once a
chunk has been handed to the caller: the caller has seen it, so a retry would not be the same
response.

Cancellation: when `cancel` fires, or the caller stops reading and closes the iterator, the HTTP
response is closed at once (the connection is dropped, so the provider stops generating) and the
stream ends without a finish chunk.

Connections: the model's own pool belongs to the event loop that first used it (``aclose()`` or
``async with model:`` closes it). A caller's `http_client` is used as given (proxies, auth, mock
transports) and never closed by the model.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from dshkit.models.stream_translation import excerpt
from dshkit.models.errors import (
    IncompleteStreamError,
    MalformedResponseError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
)
from dshkit.models.http.error_body import http_error, read_error_text, read_json, request_id_of
from dshkit.models.protocol import CancelSignal, Chunk, ModelError
from dshkit.models.provider import Provider, RetryCallback, without_password
from dshkit.models.http.sse import (
    SSEDecodeError,
    SSEDecoder,
    SSEEventTooLargeError,
    ServerSentEvent,
)

if TYPE_CHECKING:
    from dshkit.session import ModelRequest

__all__ = ["HTTPModel", "RetryCallback", "StreamTranslator", "without_password"]

_DRAIN_LIMIT = 64 * 1024
_DRAIN_SECONDS = 1.0


class StreamTranslator(Protocol):
    """Turns the server-sent events of one response into protocol chunks (pure, no I/O)."""

    @property
    def done(self) -> bool:
        """Whether the stream's own end marker arrived (later events are ignored)."""
        ...

    @property
    def finished(self) -> bool:
        """Whether the response said it was complete (a broken body after that is not an error)."""
        ...

    def feed(self, event: ServerSentEvent) -> list[Chunk]:
        """The chunks one event carries."""
        ...

    def finish(self) -> list[Chunk]:
        """The closing chunks once the body ended (raises when it ended too early)."""
        ...


def _version() -> str:
    try:
        from dshkit import __version__

        return __version__
    except ImportError:  # pragma: no cover - the native core is always there when installed
        return "0"


class HTTPModel:
    """Base of the HTTP models: validation, headers, the exchange, retries and the pool.

    Where and how to connect comes from a `Provider` (`provider_config`); `settings` are default
    call settings in the common vocabulary (`dshkit.models.settings`), under the request's own.
    """

    default_timeout = 600.0
    """Seconds for `Provider.timeout` when the provider leaves it ``None``."""

    native_output = True
    """Structured output goes in the API's native form (`dshkit.models.protocol.supports_native_output`)."""

    def __init__(
        self,
        model: str,
        provider: Provider,
        *,
        url: str,
        name: str,
        auth_headers: Mapping[str, str],
        settings: Mapping[str, Any] | None = None,
        context_window: int | None = None,
    ) -> None:
        owner = type(self).__name__
        if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1):
            raise ValueError(f"{owner} context_window: expected an int >= 1 (tokens) or None, got {context_window!r}")
        self.context_window = context_window  # what `Compaction` measures against when it is given none
        if not isinstance(model, str) or not model:
            raise ValueError(f"{owner} model: expected a non-empty str, got {model!r}")
        if settings is not None and (not isinstance(settings, Mapping) or not all(isinstance(k, str) for k in settings)):
            raise TypeError(f"{owner} settings: expected a mapping of setting names (str) to values")
        self.settings: dict[str, Any] = dict(settings or {})
        self.provider_config = provider
        self._model = model
        self._url = url
        self._shown_url = without_password(url)
        self._provider = name
        self.timeout = float(provider.timeout if provider.timeout is not None else self.default_timeout)
        self.stream_timeout = None if provider.stream_timeout is None else float(provider.stream_timeout)
        self.max_event_bytes = provider.max_event_bytes
        self.max_retries = provider.max_retries
        self.retry_backoff = float(provider.retry_backoff)
        self.max_retry_wait = float(provider.max_retry_wait)
        self.on_retry = provider.on_retry
        self._headers = httpx.Headers(
            {"Content-Type": "application/json", "Accept": "text/event-stream", "User-Agent": f"dshkit/{_version()}"}
        )
        self._headers.update(auth_headers)
        self._headers.update(provider.headers or {})  # case-insensitive: a caller's header replaces ours
        self._own_client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._caller_client: httpx.AsyncClient | None = provider.http_client

    @property
    def provider(self) -> str:
        """Provider name recorded in each assistant message's source."""
        return self._provider

    @property
    def model(self) -> str:
        """Model name sent in every request and recorded in each assistant message's source."""
        return self._model

    @property
    def url(self) -> str:
        """The endpoint, as shown to people (a password in it is masked)."""
        return self._shown_url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._model!r}, base_url={self._shown_url!r}, provider={self._provider!r})"

    def request_body(self, request: ModelRequest) -> bytes:
        """The exact bytes `stream` posts for `request` (byte-identical for an equal request)."""
        raise NotImplementedError

    def stream(self, request: ModelRequest, cancel: CancelSignal | None = None) -> AsyncIterator[Chunk]:
        """Stream one response to `request` (the body is built now, so bad input fails here)."""
        body = self.request_body(request)
        return self._stream(body, cancel, self._translation_options(request))

    async def aclose(self) -> None:
        """Close the model's own pooled HTTP connections (a caller's `http_client` stays open)."""
        client, self._own_client, self._client_loop = self._own_client, None, None
        if client is not None:
            await client.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- what a subclass provides -----------------------------------------------------------------

    def _new_translator(self, status: int, request_id: str | None, **options: Any) -> StreamTranslator:
        raise NotImplementedError

    def _translation_options(self, request: ModelRequest) -> dict[str, Any]:
        """What the stream translator must know of the request (by default nothing)."""
        return {}

    def _json_chunks(self, payload: dict[str, Any], request_id: str | None, options: dict[str, Any]) -> list[Chunk]:
        """Chunks of a whole JSON answer to a streaming request (by default: not accepted)."""
        received = json.dumps(payload)
        raise MalformedResponseError(
            f"expected an event stream from {self._shown_url}, got one JSON object: {excerpt(received)!r}",
            received=received,
            status=200,
            request_id=request_id,
        )

    # -- the exchange ------------------------------------------------------------------------------

    async def _stream(self, body: bytes, cancel: CancelSignal | None, options: dict[str, Any]) -> AsyncIterator[Chunk]:
        # The exchange runs in its own task feeding a queue, so that a cancel can stop it at once
        # even while it waits for bytes: cancelling the task closes the response (and the socket).
        if cancel is not None and cancel.cancelled:
            return
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        exchange = asyncio.ensure_future(self._exchange(body, queue, options))
        helpers: list[asyncio.Future[Any]] = [exchange]
        if cancel is not None:
            helpers.append(asyncio.ensure_future(_stop_on_cancel(cancel, exchange, queue)))
        try:
            while True:
                kind, item = await queue.get()
                if cancel is not None and cancel.cancelled:
                    return
                if kind == "chunk":
                    yield item
                elif kind == "error":
                    raise item
                else:  # "end": the exchange is complete
                    return
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _exchange(self, body: bytes, queue: asyncio.Queue[tuple[str, Any]], options: dict[str, Any]) -> None:
        try:
            await self._attempts(body, queue, options)
        except ModelError as error:
            queue.put_nowait(("error", error))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug or an unexpected transport failure: still a typed error
            wrapped = ModelError(f"{type(error).__name__}: {error}", code="model_error")
            wrapped.__cause__ = error
            queue.put_nowait(("error", wrapped))
        else:
            queue.put_nowait(("end", None))

    async def _attempts(self, body: bytes, queue: asyncio.Queue[tuple[str, Any]], options: dict[str, Any]) -> None:
        client = self._http_client()
        attempt = 0
        while True:
            output = _Output(queue)
            try:
                await self._attempt_within_deadline(client, body, output, options)
                return
            except ModelError as error:
                delay = None if output.emitted else self._retry_delay(error, attempt)
                if delay is None:
                    raise
                attempt += 1
                if self.on_retry is not None:
                    self.on_retry(attempt, delay, error)
                await asyncio.sleep(delay)

    def _retry_delay(self, error: ModelError, attempt: int) -> float | None:
        """How long to wait before retrying `error`, or ``None`` when it is not retried."""
        if not error.retryable or attempt >= self.max_retries:
            return None
        retry_after = error.retry_after if isinstance(error, ModelHTTPError) else None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_wait else None
        delay = self.retry_backoff * 2.0**attempt
        # Jitter spreads the retries of many clients hit by one outage.
        return min(delay * (0.75 + random.random() / 2), self.max_retry_wait)

    async def _attempt_within_deadline(
        self, client: httpx.AsyncClient, body: bytes, output: _Output, options: dict[str, Any]
    ) -> None:
        """One attempt, cut off (the response closed) once it has taken `stream_timeout` seconds."""
        if self.stream_timeout is None:
            await self._attempt(client, body, output, options)
            return
        try:
            await asyncio.wait_for(self._attempt(client, body, output, options), self.stream_timeout)
        except asyncio.TimeoutError:
            # Only the deadline ends up here: the attempt turns every timeout of its own into a ModelError.
            raise ModelTimeoutError(
                f"the response from {self._shown_url} took longer than stream_timeout={self.stream_timeout:g}s "
                f"(the limit for one whole response; `timeout` bounds each wait for the next bytes)",
                request_id=output.request_id,
            ) from None

    async def _attempt(self, client: httpx.AsyncClient, body: bytes, output: _Output, options: dict[str, Any]) -> None:
        request_id: str | None = None
        responded = False
        try:
            async with client.stream(
                "POST", self._url, content=body, headers=self._headers, timeout=httpx.Timeout(self.timeout)
            ) as response:
                responded = True
                request_id = output.request_id = request_id_of(response.headers)
                if response.status_code >= 400:
                    raise await http_error(response, request_id)
                if response.status_code != 200:
                    raise MalformedResponseError(
                        f"unexpected HTTP status {response.status_code} from {self._shown_url}",
                        status=response.status_code,
                        request_id=request_id,
                    )
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if content_type == "application/json":
                    # The server ignored "stream": a complete response (or an error) in one piece.
                    payload = await read_json(response, request_id, self.max_event_bytes, type(self).__name__)
                    output.emit_all(self._json_chunks(payload, request_id, options))
                    return
                if content_type in ("text/html", "text/xml", "application/xml"):
                    text = await read_error_text(response)
                    raise MalformedResponseError(
                        f"expected an event stream from {self._shown_url}, got {content_type}: {excerpt(text)!r}",
                        received=text,
                        status=200,
                        request_id=request_id,
                    )
                translator = self._new_translator(response.status_code, request_id, **options)
                decoder = SSEDecoder(self.max_event_bytes)
                await _read_event_stream(response, request_id, decoder, translator, output, type(self).__name__)
        except httpx.TimeoutException as error:
            phase = "connecting to" if isinstance(error, (httpx.ConnectTimeout, httpx.PoolTimeout)) else "waiting for"
            raise ModelTimeoutError(
                f"timed out after {self.timeout:g}s {phase} {self._shown_url}", request_id=request_id
            ) from error
        except httpx.TransportError as error:
            reason = str(error) or type(error).__name__
            if responded:
                raise IncompleteStreamError(
                    f"the connection to {self._shown_url} broke mid-response: {reason}",
                    status=200,
                    request_id=request_id,
                ) from error
            raise ModelConnectionError(f"cannot reach {self._shown_url}: {reason}") from error

    def _http_client(self) -> httpx.AsyncClient:
        if self._caller_client is not None:
            return self._caller_client
        loop = asyncio.get_running_loop()
        if self._own_client is None or self._client_loop is not loop or self._own_client.is_closed:
            # A pool is bound to the loop that opened its connections; a new loop needs its own.
            self._own_client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), follow_redirects=False)
            self._client_loop = loop
        return self._own_client


class _Output:
    """Where one attempt puts its chunks; remembers whether any reached the caller's queue."""

    __slots__ = ("emitted", "request_id", "_queue")

    def __init__(self, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        self._queue = queue
        self.emitted = False
        self.request_id: str | None = None

    def emit_all(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            self.emitted = True
            self._queue.put_nowait(("chunk", chunk))


async def _stop_on_cancel(cancel: CancelSignal, exchange: asyncio.Future[None], queue: asyncio.Queue[Any]) -> None:
    await cancel.wait()
    exchange.cancel()
    queue.put_nowait(("cancelled", None))


async def _read_event_stream(
    response: httpx.Response,
    request_id: str | None,
    decoder: SSEDecoder,
    translator: StreamTranslator,
    output: _Output,
    owner: str,
) -> None:
    body = response.aiter_bytes()
    try:
        async for data in body:
            for event in decoder.feed(data):
                output.emit_all(translator.feed(event))
                if translator.done:
                    break
            if translator.done:
                break
        else:
            for event in decoder.close():
                output.emit_all(translator.feed(event))
    except SSEEventTooLargeError as error:
        raise MalformedResponseError(
            f"malformed event stream: {error}; if the provider really sends events this large, "
            f"pass a larger max_event_bytes to the Provider of {owner}",
            status=response.status_code,
            request_id=request_id,
        ) from None
    except SSEDecodeError as error:
        raise MalformedResponseError(
            f"malformed event stream: {error}", status=response.status_code, request_id=request_id
        ) from None
    except httpx.TransportError:
        if not translator.finished:
            raise
        # The response already said it was finished: only what follows (usage, the end marker) was lost.
        output.emit_all(translator.finish())
        return
    output.emit_all(translator.finish())
    if translator.done:
        await _drain(body)


async def _drain(body: AsyncIterator[bytes]) -> None:
    """Read what follows the end marker (normally just the end of the body) so the connection can
    be reused; a server that keeps the body open gets a short grace period, then is cut off."""

    async def read_rest() -> None:
        received = 0
        async for data in body:
            received += len(data)
            if received > _DRAIN_LIMIT:
                return

    try:
        await asyncio.wait_for(read_rest(), _DRAIN_SECONDS)
    except (asyncio.TimeoutError, httpx.HTTPError):
        pass
