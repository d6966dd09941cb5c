"""`Provider`: where and how an HTTP model connects, shared by the three HTTP models.

A provider is a frozen value: the API root (`base_url`), the key, extra headers, the timeouts,
the retry policy, the event size limit and an optional caller's ``httpx.AsyncClient``. The
models take one (``OpenAICompatibleModel("deepseek-chat", Provider("https://api.deepseek.com",
api_key=...))``) and keep only what their API adds (Anthropic's version header, a Chat
Completions profile's quirks). `Provider.named` builds the provider of a known vendor
(`KNOWN_PROVIDERS`) from its usual environment variables. Importing this module does not
import httpx.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urlsplit, urlunsplit

from dshkit.models.http.sse import DEFAULT_MAX_EVENT_BYTES, check_max_event_bytes

if TYPE_CHECKING:
    from dshkit.models.protocol import ModelError

__all__ = [
    "KNOWN_PROVIDERS",
    "PROVIDER_FIELDS",
    "KnownProvider",
    "Provider",
    "RetryCallback",
    "provider_argument",
    "split_options",
    "without_password",
]

RetryCallback = Callable[[int, float, "ModelError"], object]
"""Called before each retry with the attempt number (1 = first retry), the delay and the error."""


@dataclass(frozen=True, eq=False)
class Provider:
    """An HTTP endpoint and how to talk to it (see docs/models.md, "Providers").

    `base_url`: the API root (each model appends its path). `api_key`: the key (sent as each
    API expects; never shown in `repr`). `name`: recorded in message sources and, for Chat
    Completions, the profile (default: from the host). `headers`: extra headers, replacing
    defaults of the same name. `timeout`: seconds to connect and to wait for each next piece
    (``None``: the model's default). `stream_timeout`: seconds for one whole response (off).
    `max_event_bytes`: the largest event or JSON answer accepted. `max_retries`,
    `retry_backoff`, `max_retry_wait`: the retry policy; `on_retry` is told of each retry.
    `http_client`: a caller's ``httpx.AsyncClient`` to send through (never closed by dshkit).
    """

    base_url: str
    api_key: Optional[str] = field(default=None, repr=False)
    name: Optional[str] = None
    headers: Optional[Mapping[str, str]] = None
    timeout: Optional[float] = None
    stream_timeout: Optional[float] = None
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_retries: int = 2
    retry_backoff: float = 0.5
    max_retry_wait: float = 60.0
    on_retry: Optional[RetryCallback] = None
    http_client: Any = None

    def __post_init__(self) -> None:
        _check_url(self.base_url)
        object.__setattr__(self, "api_key", _checked_api_key(self.api_key))
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ValueError(f"Provider name: expected a non-empty str or None, got {self.name!r}")
        object.__setattr__(self, "headers", _checked_headers(self.headers))
        if self.timeout is not None:
            _check_number("timeout", self.timeout, positive=True)
        if self.stream_timeout is not None:
            _check_number("stream_timeout", self.stream_timeout, positive=True)
        check_max_event_bytes("Provider", self.max_event_bytes)
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"Provider max_retries: expected an int >= 0, got {self.max_retries!r}")
        _check_number("retry_backoff", self.retry_backoff)
        _check_number("max_retry_wait", self.max_retry_wait)
        if self.on_retry is not None and not callable(self.on_retry):
            raise TypeError(f"Provider on_retry: expected a callable, got {type(self.on_retry).__name__}")
        if self.http_client is not None:
            import httpx  # only when a client is given, so httpx is there already

            if not isinstance(self.http_client, httpx.AsyncClient):
                raise TypeError(f"Provider http_client: expected an httpx.AsyncClient, got {type(self.http_client).__name__}")

    def __repr__(self) -> str:
        key = ", api_key=***" if self.api_key else ""
        return f"Provider({without_password(self.base_url)!r}{key}, name={self.name!r})"

    def with_options(self, **options: Any) -> Provider:
        """A copy with some fields changed (``timeout=5``, ``http_client=...``)."""
        return replace(self, **options)

    @classmethod
    def named(cls, name: str, environ: Mapping[str, str] | None = None, **options: Any) -> Provider:
        """The provider of the known vendor `name` (`KNOWN_PROVIDERS`), its key and base URL read
        from its environment variables; `options` set the other fields.

        Raises `ValueError` naming the key variable when it is needed and not set, and listing
        the known names for an unknown one.
        """
        known = KNOWN_PROVIDERS.get(name)
        if known is None:
            raise ValueError(f"unknown provider {name!r}: expected one of {', '.join(sorted(KNOWN_PROVIDERS))}")
        return known.provider(environ, **options)


@dataclass(frozen=True)
class KnownProvider:
    """A vendor `Provider.named` and `dshkit.models.infer_model` know: its API, endpoint and variables.

    `api` is ``chat``, ``responses`` or ``anthropic``; `base_url` the default root (``None``:
    `base_url_variable` must be set); `key_variable` the environment variable holding the key
    (``None``: no key needed, though `optional_key_variable` is read when set).
    """

    name: str
    api: str
    base_url: Optional[str]
    key_variable: Optional[str]
    base_url_variable: str
    optional_key_variable: Optional[str] = None

    def provider(self, environ: Mapping[str, str] | None = None, **options: Any) -> Provider:
        """This vendor's `Provider` from the environment (see `Provider.named`)."""
        env = os.environ if environ is None else environ
        base_url = (env.get(self.base_url_variable) or "").strip() or self.base_url
        if base_url is None:
            raise ValueError(f"provider {self.name!r}: {self.base_url_variable} is not set (the server's base URL)")
        key_variable = self.key_variable or self.optional_key_variable
        api_key = (env.get(key_variable) or "").strip() or None if key_variable else None
        if "api_key" in options:
            api_key = options.pop("api_key")
        if self.key_variable is not None and not api_key:
            raise ValueError(f"provider {self.name!r}: {self.key_variable} is not set (the API key)")
        settings = {"name": self.source_name, **options}
        return Provider(base_url, api_key=api_key, **settings)

    @property
    def source_name(self) -> str:
        """The provider name messages record (``openai`` for both OpenAI APIs)."""
        return self.name.split("-", 1)[0] if self.name.startswith("openai") else self.name


KNOWN_PROVIDERS: dict[str, KnownProvider] = {
    known.name: known
    for known in (
        KnownProvider("openai", "chat", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        KnownProvider("openai-responses", "responses", "https://api.openai.com/v1", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        KnownProvider("anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
        KnownProvider("deepseek", "chat", "https://api.deepseek.com", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"),
        KnownProvider("groq", "chat", "https://api.groq.com/openai/v1", "GROQ_API_KEY", "GROQ_BASE_URL"),
        KnownProvider("mistral", "chat", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", "MISTRAL_BASE_URL"),
        KnownProvider("openrouter", "chat", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL"),
        KnownProvider("ollama", "chat", "http://127.0.0.1:11434/v1", None, "OLLAMA_BASE_URL", "OLLAMA_API_KEY"),
        KnownProvider("vllm", "chat", None, None, "VLLM_BASE_URL", "VLLM_API_KEY"),
    )
}
"""The vendors known by name: ``openai`` is Chat Completions, ``openai-responses`` the Responses API."""

PROVIDER_FIELDS = frozenset(f.name for f in fields(Provider))
"""The keyword names a `Provider` takes (what `from_env` / `infer_model` route to it)."""


def provider_argument(owner: str, provider: object) -> Provider:
    """A model's `provider` argument as a `Provider` (a str names a known one, `Provider.named`)."""
    if isinstance(provider, Provider):
        return provider
    if isinstance(provider, str):
        return Provider.named(provider)
    raise TypeError(f"{owner} provider: expected a Provider or a known provider's name, got {type(provider).__name__}")


def split_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword options split into the `Provider`'s fields and the rest (the model's own)."""
    transport = {key: value for key, value in options.items() if key in PROVIDER_FIELDS}
    own = {key: value for key, value in options.items() if key not in PROVIDER_FIELDS}
    return transport, own


def without_password(url: str) -> str:
    """`url` with the password of its ``user:password@`` part masked, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.partition(':')[0]}:***@{host}"))


def _check_url(base_url: object) -> None:
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError(f"Provider base_url: expected an http(s) URL, got {base_url!r}")
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"Provider base_url: expected an http(s) URL, got {without_password(base_url)!r}")


def _checked_api_key(api_key: object) -> str | None:
    if api_key is not None and not isinstance(api_key, str):
        raise TypeError("Provider api_key: expected a str")
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        # httpx would refuse the header later quoting it whole, key included: say where, not what.
        raise ValueError(
            "Provider api_key: contains whitespace, a control character or a non-ASCII character, "
            "which an HTTP header cannot carry"
        )
    return api_key or None


def _checked_headers(headers: object) -> dict[str, str] | None:
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(f"Provider headers: expected a mapping of str to str, got {type(headers).__name__}")
    for header, value in headers.items():
        if not isinstance(value, str) or not (value.isascii() and value.isprintable() and value == value.strip()):
            raise ValueError(f"Provider headers[{header!r}]: the value must be printable ASCII text without surrounding spaces")
    return dict(headers)


def _check_number(name: str, value: object, *, positive: bool = False) -> None:
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and value == value
        and value != float("inf")
        and (value > 0 if positive else value >= 0)
    )
    if not ok:
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"Provider {name}: expected a finite number {bound}, got {value!r}")
