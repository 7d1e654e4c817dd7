"""Errors as HTTP answers: one JSON shape (`{"error": {"code", "message"}}`) for every route, REST, sync, the guard's
and the desktop's, and one table of the codes an answer carries with the status of each (`STATUS`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Send

from .core.errors import FAMILIES, HivenoteError

# Every `error.code` of an HTTP answer and its status: the error families' own (core/errors.py, raised), then the
# answers no exception stands for (the guard's, the connection budgets', the sync routes', Starlette's). Two kinds of
# 503: `store` (the notebook's storage refused: a disk, a lock), `unavailable`, `unreadable` and `busy` (this server
# cannot do it right now: check tokens, read a shard, find a free connection); a client retries the second kind.
STATUS: Final[dict[str, int]] = {family.code: family.status for family in FAMILIES} | {
    "invalid_json": 400,  # a body that is not JSON
    "unauthorized": 401,  # no credential, or one that does not count
    "bad_origin": 403,  # a page of another origin
    "owner_only": 403,  # the owner's dashboard alone may (desktop routes)
    "method_not_allowed": 405,
    "timeout": 408,  # a request not sent whole in time (serve.py)
    "conflict": 409,
    "shard_replaced": 409,  # a sync range asked of a copy that is not a prefix of this one
    "changed": 409,  # a plan confirmed after what it changes changed (desktop routes)
    "too_large": 413,
    "out_of_range": 416,
    "bad_host": 421,  # a Host header this server does not answer to
    "damaged": 422,  # a shard whose bytes fail their check: nothing past it is offered
    "too_many_connections": 429,
    "too_many_streams": 429,
    "too_many_bodies": 429,
    "internal": 500,
    "unavailable": 503,
    "unreadable": 503,
    "busy": 503,
    "clipboard": 503,  # no clipboard on this desktop now (desktop routes)
}
# Starlette's own HTTP errors (no route, wrong method, a crash) in the same vocabulary.
HTTP_CODES: Final = {
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


def error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def error_response(code: str, message: str) -> JSONResponse:
    """The answer for `code` (a key of STATUS), with its status."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=STATUS[code])


async def send_error(send: Send, code: str, message: str, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """The same answer sent on a raw ASGI channel (the guard and the budgets answer before any route)."""
    body = error_body(code, message)
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": STATUS[code], "headers": start})
    await send({"type": "http.response.body", "body": body})


async def hivenote_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HivenoteError)
    return JSONResponse({"error": {"code": exc.code, "message": str(exc)}}, status_code=exc.status)


async def http_error(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    detail = getattr(exc, "detail", "") or "error"
    return JSONResponse(
        {"error": {"code": HTTP_CODES.get(status, "error"), "message": str(detail)}}, status_code=status
    )
