"""Who is asking: `auth(request) -> principal` (a non-empty str), or None for "not signed in" (401)."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request

from dshkit.serve.errors import ApiError

Auth = Callable[[Request], Any]


def bearer_tokens(tokens: Mapping[str, str]) -> Auth:
    """An `auth` accepting `Authorization: Bearer <token>` for each token of `tokens` (token -> principal)."""
    table = dict(tokens)

    def auth(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        for known, principal in table.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                return principal
        return None

    return auth


async def principal_of(request: Request, auth: Auth) -> str:
    """The request's principal, or 401."""
    principal = auth(request)
    if hasattr(principal, "__await__"):
        principal = await principal
    if principal is None:
        raise ApiError(401, "unauthenticated", "no valid credentials were given (an Authorization header)")
    if not isinstance(principal, str) or not principal:
        raise ApiError(500, "bad_auth", "the app's auth callable returned something other than a principal str")
    return principal
