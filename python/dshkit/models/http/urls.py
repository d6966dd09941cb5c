"""The URLs of an HTTP model: the endpoint posted to, and the provider name a base URL implies."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from dshkit.models.provider import without_password


def endpoint(owner: str, base_url: object, suffix: str) -> str:
    """`base_url` with `suffix` (``/chat/completions``, ``/v1/messages``, ...) appended to its path
    unless the path already ends with it; the query is kept, a fragment dropped."""
    if not isinstance(base_url, str) or not base_url.strip():
        raise ValueError(f"{owner} base_url: expected an http(s) URL, got {base_url!r}")
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{owner} base_url: expected an http(s) URL, got {without_password(base_url)!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(suffix):
        path += suffix
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def provider_from_url(url: str) -> str:
    """``deepseek`` for ``api.deepseek.com``; ``openai-compatible`` for an IP or ``localhost``."""
    host = (urlsplit(url).hostname or "").lower()
    labels = [label for label in host.split(".") if label]
    if not labels or host == "localhost" or labels[-1].isdigit() or ":" in host:
        return "openai-compatible"
    return labels[-2] if len(labels) >= 2 else labels[0]


__all__ = ["endpoint", "provider_from_url"]
