"""Per-credential budgets: what one credential may hold of the server at once, so that whatever one token does, the
owner's and every other token's requests are still answered (issue 33: 1,500 slow bodies from one teammate's token
made 58 of 62 of the owner's requests fail; ~1,000 SSE streams from three, all of them).

A connection's credential is known only once its request head has arrived: until then it holds nothing but a
socket, and the head deadline (serve.py) ends it if the head does not come. The guard (auth.py) then charges the
connection to the credential it showed (the owner's token or the dashboard's cookie, a person's or a peer's token, or
none) through `Charged.charge`, which serve.py's connections implement. A credential holds at most:

| budget | the owner (and anyone, with auth off) | a person's or a peer's token, or no token |
|---|---|---|
| connections in a request (answering, or a body arriving) | half the server's bound (500 of 1,000) | an eighth (125) |
| of those, event streams (an MCP session's GET) | a quarter of the bound (250) | a sixteenth (62) |
| request bodies arriving at once | 64, and 4x the import limit in bytes | 16, and 2x the import limit |
| requests being answered at once (the rest wait their turn) | 64 | 4 (8 without a token) |

A request past one of them is answered 429 (`Budget.refusal`: which budget, how many it holds, what to do) and its
connection closed; nothing of anyone else's is touched. The bound on connections itself is shared fairly: a new
connection may be accepted past it by a slack (as many again where open files allow, at least `SLACK`) while its
head arrives, reclaiming first a connection that waits for a request (its first or its next); a charged request
that finds the server still over its bound takes a connection from the credential holding the most (its oldest body
still arriving, or its oldest stream), never from one holding as many as itself or fewer; only when there is none
is it answered 503. A connection that has shown no credential never takes one from another.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..responses import STATUS, error_body

SLACK = 64  # connections accepted past the bound while their heads arrive, at least (serve.py's connection_slack)
CONNECTION = "hivenote.connection"  # the scope's extension naming the connection a request came on
RETRY_AFTER_S = 1

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Budget:
    """What one credential may hold at once, as fractions of the server's bound on connections and counts."""

    name: str  # how the credential is called in a refusal ("this token", "callers without a token")
    connections: int  # divisor of the bound
    streams: int  # divisor of the bound
    bodies: int
    body_bytes: int
    answering: int  # requests answered at once (the rest wait their turn, holding no worker)

    def shares(self, bound: int) -> tuple[int, int]:
        """(connections, streams) this credential may hold under a server bound of `bound` connections."""
        return max(8, bound // self.connections), max(4, bound // self.streams)


def budget_for(person: str | None, auth: bool, import_bytes: int) -> Budget:
    """The budget of a request's credential: `person` is "" for the owner, a name for a person's or peer's token,
    None for no credential (with auth off, every caller may do what the owner may, and gets the owner's budget)."""
    if person == "" or (person is None and not auth):
        return Budget("the owner's credential", 2, 4, 64, 4 * import_bytes, 64)
    if person is None:
        return Budget("callers without a token", 8, 16, 16, 2 * import_bytes, 8)
    return Budget("this token", 8, 16, 16, 2 * import_bytes, 4)


@dataclass(frozen=True)
class Refusal:
    code: str  # a key of responses.STATUS
    message: str
    # Close the connection after the answer. Not while a body is still arriving: closing a socket with unread bytes
    # sends a reset that can destroy the answer before the client reads it; such a connection is drained instead
    # (serve.py: it holds nothing, anybody may reclaim it, the body deadline ends it).
    close: bool = True


def too_many_connections(budget: Budget, held: int, bound: int) -> Refusal:
    return Refusal(
        "too_many_connections",
        f"Too many requests at once: {budget.name} already has {held} requests open at once, its share of this "
        f"Hivenote's {bound} connections. This request was refused and its connection closed; nothing was done. "
        "Wait for those to finish (or close connections it does not use), then retry. Every token has a share of its "
        "own, so other callers are not held up.",
    )


def too_many_streams(budget: Budget, held: int) -> Refusal:
    return Refusal(
        "too_many_streams",
        f"Too many event streams at once: {budget.name} already holds {held} open (each MCP session listening on GET "
        "holds one), its limit. This stream was refused; end the sessions it no longer uses (an agent needs one per "
        "endpoint), then retry.",
    )


def too_many_bodies(budget: Budget, held: int, size: int) -> Refusal:
    return Refusal(
        "too_many_bodies",
        f"Too many request bodies arriving at once: {budget.name} already has {held} still arriving, and with this "
        f"one they announce {size:,} bytes; the limit is {budget.bodies} bodies and {budget.body_bytes >> 20} MiB at "
        "once. This request was refused and its connection closed; nothing was done. Send each body whole and "
        "promptly, a few at a time, then retry.",
    )


def server_busy(bound: int) -> Refusal:
    return Refusal(
        "busy",
        f"This Hivenote's {bound} connections are all in use by other callers' requests, none of them holding more "
        "than this caller's share. This request was refused and its connection closed; nothing was done. Retry in a "
        "moment.",
    )


def ended_for_room(bound: int, held: int) -> Refusal:
    return Refusal(
        "busy",
        f"This Hivenote's {bound} connections are all in use, and the credential of this request holds the most of "
        f"them ({held}): this request was ended to make room for another caller's, before anything was done. Send "
        "each body whole and promptly, and hold fewer requests at once, then retry.",
    )


class Charged(Protocol):
    """A connection the guard charges each request of to the credential it showed (serve.py's connections)."""

    def charge(self, person: str | None, budget: Budget, *, stream: bool, size: int) -> Refusal | None:
        """Charge this connection's request to `person`: None if its budget (and the server's bound) has room, else
        why not (the request is then refused and the connection closed after the answer)."""
        ...

    def turn(self, person: str | None, budget: Budget) -> AbstractAsyncContextManager[None]:
        """Wait until `person` has fewer than `budget.answering` requests being answered, then hold one such turn
        while this request is answered (first come, first served within a credential)."""
        ...


def connection_of(scope: MutableMapping[str, Any]) -> Charged | None:
    """The connection a request came on, when the server is Hivenote's own (serve.py); None elsewhere."""
    extensions = scope.get("extensions") or {}
    found: Charged | None = extensions.get(CONNECTION)
    return found


async def refuse(send: Send, path: str, refusal: Refusal) -> None:
    """The refusal as an answer (that closes its connection, when it says so): on MCP as a JSON-RPC error (as a 413
    is there), elsewhere as the REST error."""
    if path.startswith("/mcp"):
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": refusal.message}}
        body = json.dumps(error).encode()
    else:
        body = error_body(refusal.code, refusal.message)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()),
        *([(b"connection", b"close")] if refusal.close else []),
    ]
    await send({"type": "http.response.start", "status": STATUS[refusal.code], "headers": headers})
    await send({"type": "http.response.body", "body": body})
