"""Who may talk to the server: bearer tokens (a default one for this machine's own agents, per-person ones for a
team), the dashboard's sign-in cookie (session.py), and the guard in front of every route (Host and Origin checks
against DNS rebinding and cross-site requests, well-known probes answered with a JSON 404, body size limits).

Tokens live in `<data dir>/tokens.json` with mode 0600, never in the log. Per-person tokens are kept only as
SHA-256 digests (shown once); the default one is kept so `hivenote token show` and connect snippets can use it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect

from ..core.errors import HivenoteError
from ..render import size_words
from ..responses import send_error
from ..settings import Settings
from ..tokens import PEER_PREFIX, Tokens
from .budgets import budget_for, connection_of, refuse
from .session import COOKIE_PATHS, KEY_HEADER, KEY_MISSING, SignIn, cookie_name, from_the_dashboard, read_cookie

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = ("/api/health", "/api/session")  # the session route only trades a one-time code for the cookie
# Everything but the dashboard's static files and the health check; /desktop is what the tray app adds.
PROTECTED_PREFIXES = ("/mcp", "/api", "/sync", "/desktop")


def machine_names() -> frozenset[str]:
    names = {"localhost"}
    with contextlib.suppress(OSError):
        host = socket.gethostname().lower()
        names |= {host, f"{host}.local", socket.getfqdn().lower()}
    return frozenset(names)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


class Guard:
    """ASGI middleware in front of every route. DNS rebinding needs a hostname the attacker controls, so a Host
    must be an IP literal, localhost, this machine's name or a configured name; a browser Origin must be this
    server itself; protected paths need a valid bearer token, or on /api and /desktop the dashboard's cookie on a
    request the dashboard itself makes (when auth is on)."""

    def __init__(self, app: ASGIApp, settings: Settings, tokens: Tokens, sign_in: SignIn | None = None) -> None:
        self.app = app
        self.settings = settings
        self.tokens = tokens
        self.sign_in = sign_in or SignIn(tokens)
        # On loopback only, nobody reaches this server by the machine's names (which others on the LAN can answer
        # for, mDNS): only IP literals and localhost pass. Shared, the machine's names are how teammates call it.
        self.names = (frozenset({"localhost"}) if settings.loopback else machine_names()) | {
            h.lower() for h in settings.allowed_hosts
        }
        if not _is_ip(settings.host):
            self.names |= {settings.host.lower()}

    def host_allowed(self, host: str) -> bool:
        name = host.lower()
        if name.startswith("["):
            name = name[1 : name.index("]")] if "]" in name else name
        else:
            name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
        return bool(name) and (_is_ip(name) or name in self.names)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """A browser Origin is allowed only when it is the very server the request was sent to (same host and port
        as the Host header): a page served elsewhere, even from an IP literal on the same port, is another site."""
        try:
            parts = urlsplit(origin)
            default = 443 if parts.scheme == "https" else 80
            port = parts.port or default
            sent_to = urlsplit(f"//{host}")
            sent_port = sent_to.port or default
        except ValueError:
            return False
        name = (parts.hostname or "").lower()
        return (
            parts.scheme in ("http", "https")
            and bool(name)
            and (_is_ip(name) or name in self.names)
            and (name, port) == ((sent_to.hostname or "").lower(), sent_port)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path: str = scope["path"]
        if not self.host_allowed(headers.get("host", "")):
            await send_error(send, "bad_host", "Invalid Host header: this Hivenote only answers to its own names.")
            return
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, headers.get("host", "")):
            await send_error(
                send, "bad_origin", "Invalid Origin header: only pages served by this Hivenote may call it."
            )
            return
        if path.startswith("/.well-known/"):
            await send_error(send, "not_found", "Not found: Hivenote uses bearer tokens, not OAuth.")
            return
        person: str | None = None
        if path.startswith(PROTECTED_PREFIXES) and path not in OPEN_PATHS:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            cookie = None
            if not presented and path.startswith(COOKIE_PATHS):
                cookie = read_cookie(headers.get("cookie", ""), cookie_name(_port(scope, headers)))
            dashboard = from_the_dashboard(headers)
            if cookie is not None and not dashboard and self.settings.auth:
                # A cookie is ambient: the browser attaches it to whatever a page on any port of this host asks.
                await send_error(
                    send,
                    "forbidden",
                    "The dashboard's sign-in cookie counts only on the dashboard's own requests. Other programs: "
                    "send `Authorization: Bearer <token>` (`hivenote token show`).",
                )
                return
            state = scope.setdefault("state", {})
            try:
                if cookie is not None:
                    person = "" if dashboard and self.sign_in.cookie_valid(cookie) else None
                    state["signed_in_by"] = "cookie"
                    if person == "" and not self.sign_in.key_valid(cookie, headers.get(KEY_HEADER, "")):
                        person = None  # the cookie alone: another port's server may have been sent it
                        if self.settings.auth:
                            await send_error(send, "unauthorized", KEY_MISSING)
                            return
                else:
                    person = self.tokens.owner(presented.strip()) if scheme.lower() == "bearer" and presented else None
            except HivenoteError as exc:  # tokens.json damaged: nobody can be checked, so nobody gets in
                if self.settings.auth:
                    await send_error(send, "unavailable", f"This Hivenote cannot check tokens right now: {exc}")
                    return
                person = None
            # Whether the caller showed the owner's credential: with auth off everyone may call, but what widens who
            # can reach this server (Host names, tokens, sign-in codes, the log's folder) still needs it.
            state["owner_proven"] = person == ""
            if not self.settings.auth and path.startswith("/desktop") and person != "":
                # The tray's own controls (its clipboard, stop and quit, the log's folder) are the owner's alone.
                await send_error(
                    send,
                    "forbidden",
                    "Auth is off, but /desktop is the owner's alone: the tray's own window, or the owner's token.",
                )
                return
        if self.settings.auth and path.startswith(PROTECTED_PREFIXES) and path not in OPEN_PATHS:
            if person is None:
                await send_error(
                    send,
                    "unauthorized",
                    "This Hivenote needs a token: send `Authorization: Bearer <token>`. `hivenote token show` "
                    "prints it and `hivenote connect <client>` prints a ready config.",
                    [(b"www-authenticate", b'Bearer realm="hivenote"')],
                )
                return
            if path.startswith("/sync") and person and not person.startswith(PEER_PREFIX):
                await send_error(
                    send,
                    "forbidden",
                    "/sync serves the raw log (the text of purged notes included) to this user's other machines: it "
                    "needs the peer token they share (`hivenote sync peer add`), not a person's token. Use /mcp or "
                    "/api for the notebook.",
                )
                return
            if path.startswith("/desktop") and person:
                await send_error(
                    send, "forbidden", "Only this machine's owner (the tray's own window) may call /desktop."
                )
                return
            if person.startswith(PEER_PREFIX) and not path.startswith("/sync"):
                await send_error(
                    send,
                    "forbidden",
                    "This is a peer token: it can only sync (/sync). Use your own token for the notebook "
                    "(`hivenote token show`).",
                )
                return
            scope.setdefault("state", {})["person"] = person
        limit = request_limit(self.settings, path)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await too_large(send, path, limit)
            return
        connection = connection_of(scope)
        turn: contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()
        if connection is not None:  # what this credential holds of the server at once (budgets.py)
            size = int(length) if length is not None and length.isdigit() else limit
            budget = budget_for(person, self.settings.auth, self.settings.max_import_bytes)
            stream = scope["method"] == "GET" and "text/event-stream" in headers.get("accept", "")
            refusal = connection.charge(person, budget, stream=stream, size=size)
            if refusal is not None:
                await refuse(send, path, refusal)
                return
            if not stream:  # a stream is answered as long as it is open; it takes no turn
                turn = connection.turn(person, budget)
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with turn:
                await self.app(scope, _limited(receive, limit), tracked_send)
        except BodyTooLarge:  # a streamed body without Content-Length grew past the limit
            if not started:
                await too_large(send, path, limit)
        except ClientDisconnect:  # the client left, or its body stalled and the server closed it: no one to answer
            return


def _port(scope: Scope, headers: dict[str, str]) -> int:
    """The port this request reached (the socket's; the Host header's when the server does not say)."""
    server = scope.get("server")
    if server and server[1]:
        return int(server[1])
    host = urlsplit(f"//{headers.get('host', '')}")
    try:
        return host.port or 80
    except ValueError:
        return 80


def request_limit(settings: Settings, path: str) -> int:
    """The largest body a request to `path` may carry: an import's (a file), and a graph call's (the official
    memory server takes a create_entities of any size; an import of the graph by another name), or any other's."""
    if path.startswith(("/api/import", "/mcp/graph")):
        return settings.max_import_bytes
    return settings.max_body_bytes


def too_large_text(path: str, limit: int) -> str:
    """What a request to `path` past `limit` is told (over HTTP, and on a stdio session the server runs itself)."""
    said = f"Request over this Hivenote's {size_words(limit)} limit ({limit} bytes); nothing was written."
    if path.startswith("/mcp/graph"):
        said += " Send the entities, observations or relations in several calls."
    elif path.startswith("/mcp"):
        said += " A note's body holds at most 64 KiB: keep a note to one decision or fact, or split it into several."
    return said


async def too_large(send: Send, path: str, limit: int) -> None:
    """413, said so that a client can show it: on MCP as a JSON-RPC error (the SDK client puts its request's id on
    an error without one), elsewhere as the REST error."""
    said = too_large_text(path, limit)
    if not path.startswith("/mcp"):
        await send_error(send, "too_large", said)
        return
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": said}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyTooLarge(Exception):
    """A body without Content-Length grew past the limit while streaming."""


def _limited(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(f"request body over {limit} bytes")
        return message

    return wrapped
