"""What the tray adds to the server: `POST /desktop/clipboard`, so the dashboard window's Copy buttons reach the
system clipboard through the tray process (which keeps serving the copy after the window closes).

Behind the same guard as every route (Host/Origin checks, the token), and only for requests from this machine:
a browser elsewhere on the LAN has a clipboard of its own.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from hivenote.server.app import error_response
from hivenote.server.errors import HivenoteError
from hivenote.server.settings import is_loopback

CLIPBOARD_PATH = "/desktop/clipboard"
MAX_CHARS = 256 << 10  # a connect snippet or a token is a few hundred characters


def desktop_routes(copy: Callable[[str], None]) -> list[BaseRoute]:
    async def clipboard(request: Request) -> Response:
        if request.client is None or not is_loopback(request.client.host):
            return error_response(403, "forbidden", "only a window on this machine can use its clipboard")
        try:
            body = await request.json()
        except ValueError:
            return error_response(400, "invalid_json", 'send JSON like {"text": "..."}')
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text or len(text) > MAX_CHARS:
            return error_response(400, "invalid", f'"text" must be a string of 1 to {MAX_CHARS} characters')
        try:
            await anyio.to_thread.run_sync(copy, text)
        except HivenoteError as exc:
            return error_response(503, exc.code, str(exc))
        return JSONResponse({"copied": len(text)})

    return [Route(CLIPBOARD_PATH, clipboard, methods=["POST"])]
