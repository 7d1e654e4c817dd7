"""Big JSON values written into an answer at the ASGI boundary. A handler deep in the MCP SDK answers with small
placeholders and hands the encoded values over beside them, in its HTTP request's scope; the SDK then checks,
validates and serializes a few bytes instead of a whole knowledge graph (twice, through pydantic), and every check it
makes on the request still runs."""

from __future__ import annotations

import secrets
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE_KEY: Final = "hivenote.splices"


class Splices:
    """The encoded values one request's answer gets, each behind a placeholder no client can write or guess (128
    random bits, new for every value, never sent anywhere)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[bytes, bytes]] = []  # (placeholder as serialized JSON, encoded value)

    def string(self, escaped: bytes) -> str:
        """A placeholder for a string, given as it sits inside a JSON string (escaped, no quotes), to put where that
        string goes."""
        mark = f"hivenote-splice-{secrets.token_hex(16)}"
        self.pairs.append((mark.encode(), escaped))
        return mark

    def object(self, encoded: bytes) -> dict[str, Any]:
        """A placeholder for `encoded`, a JSON object's bytes, to put where that object goes."""
        mark = f"hivenote-splice-{secrets.token_hex(16)}"
        self.pairs.append((b'{"' + mark.encode() + b'":true}', encoded))
        return {mark: True}

    def apply(self, body: bytes) -> bytes:
        """`body` with each placeholder it holds replaced by its value (one copy of the whole, however many). The
        values placed are done with; the others wait for a later part of the answer."""
        found = sorted((at, pair) for pair in self.pairs if (at := body.find(pair[0])) >= 0)
        placed = {pair for _, pair in found}
        self.pairs = [pair for pair in self.pairs if pair not in placed]
        pieces: list[bytes] = []
        start = 0
        for at, (placeholder, encoded) in found:
            pieces += (body[start:at], encoded)
            start = at + len(placeholder)
        pieces.append(body[start:])
        return b"".join(pieces)


def splices_of(scope: Any) -> Splices | None:
    """The request's `Splices`, when it came through `Splicing` (not in memory, not over stdio)."""
    splices = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return splices if isinstance(splices, Splices) else None


class Splicing:
    """ASGI middleware giving each HTTP request a `Splices` and writing its values into the answer's body. An answer
    whose placeholders are known before it starts (a JSON body: the handler ran first) has its start held back until
    the body is known, so its Content-Length counts the values."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        splices = Splices()
        held: Message | None = None

        async def send_spliced(message: Message) -> None:
            nonlocal held
            if splices.pairs and message["type"] == "http.response.start":
                held = message
                return
            if message["type"] == "http.response.body" and (splices.pairs or held is not None):
                body = splices.apply(message.get("body", b""))
                message = {**message, "body": body}
                if held is not None:
                    headers = [(k, v) for k, v in held["headers"] if k.lower() != b"content-length"]
                    if not message.get("more_body", False):
                        headers.append((b"content-length", str(len(body)).encode()))
                    await send({**held, "headers": headers})
                    held = None
            await send(message)

        await self.app({**scope, SCOPE_KEY: splices}, receive, send_spliced)
