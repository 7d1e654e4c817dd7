"""Errors as HTTP answers: one JSON shape (`{"error": {"code", "message"}}`) for every route, REST, sync and the
desktop's, with the status each error class declares (core/errors.py is the table)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .core.errors import HivenoteError

# Starlette's own HTTP errors (no route, wrong method, a crash) in the same vocabulary.
HTTP_CODES = {
    400: "invalid",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    500: "internal",
    503: "unavailable",
}


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


async def hivenote_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HivenoteError)
    return error_response(exc.status, exc.code, str(exc))


async def http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", "") or "error"
    return error_response(status, HTTP_CODES.get(status, "error"), str(detail))
