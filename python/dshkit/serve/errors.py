"""Clear JSON errors: every refusal is `{"error": {"status", "code", "message"}}`, never a traceback."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse

logger = logging.getLogger("dshkit.serve")


class ApiError(Exception):
    """A refused request: its HTTP status, a stable code and a message naming what was wrong."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def error_response(status: int, code: str, message: str) -> JSONResponse:
    """The JSON body every error has."""
    return JSONResponse({"error": {"status": status, "code": code, "message": message}}, status_code=status)


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """An `ApiError` as its JSON response."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Anything else: logged with its traceback here, a plain 500 to the client."""
    logger.error("unexpected error serving %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, "internal_error", "the server failed to handle the request (see its log)")


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404 / 405 in the same JSON shape."""
    status = getattr(exc, "status_code", 500)
    codes = {404: "not_found", 405: "method_not_allowed"}
    return error_response(status, codes.get(status, "http_error"), str(getattr(exc, "detail", "")) or "refused")
