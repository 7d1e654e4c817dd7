"""Who may talk to the server: bearer tokens (a default one for this machine's own agents, per-person ones for a
team) and the guard in front of every route (Host and Origin checks against DNS rebinding and cross-site
requests, well-known probes answered with a JSON 404, body size limits).

Tokens live in `<data dir>/tokens.json` with mode 0600, never in the log. Per-person tokens are kept only as
SHA-256 digests (shown once); the default one is kept so `hivenote token show` and connect snippets can use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import ClientDisconnect

from ..core.errors import HivenoteError, InvalidInput, NotFound
from ..settings import Settings
from ..storage import statefile
from ..storage.identity import make_data_dir

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PEER_PREFIX = "peer-"  # tokens named so (`hivenote sync peer add`) may only call /sync
OPEN_PATHS = ("/api/health", "/api/session")
# Everything but the dashboard's static files and the health check; /desktop is what the tray app adds.
PROTECTED_PREFIXES = ("/mcp", "/api", "/sync", "/desktop")
TOKENS_FIX = (
    "restore it from a backup if you have one, or delete it: Hivenote then issues a new owner token (paste it into "
    "your agents' configs again: `hivenote connect <client>`) and each person needs a new one (`hivenote token add`)"
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._@-]{0,63}$")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return "hn_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Person:
    name: str
    created: int


class Tokens:
    """The token file: one default token (this machine's owner) and any number of per-person tokens."""

    MIN_ADOPTED_CHARS = 16  # a token made elsewhere (the shared peer token) must at least look like one

    def __init__(self, path: Path) -> None:
        self.path = path
        self._default = ""
        self._people: dict[str, tuple[str, int]] = {}  # name -> (sha256 hex, created ms)
        self._seen: tuple[int, int, int] | None = None  # (inode, mtime_ns, size) of the file as last read
        self._lock = threading.RLock()  # the guard checks tokens on the event loop while REST may change them
        self._load()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size  # every save is a new file: the inode tells even a same-size one

    def _load(self) -> None:
        """Read the file if it changed since the last read (`hivenote token add` while the server runs). A damaged
        file raises StateFileCorrupt on every call until it is fixed; it is never taken for an empty one."""
        seen = self._stat()
        if seen == self._seen and seen is not None:
            return
        raw = statefile.read_json(self.path, TOKENS_FIX)
        default, people = "", {}
        if raw is not None:
            try:
                default = raw.get("default", "")
                if not isinstance(default, str):
                    raise TypeError("default is not a string")
                for item in raw.get("people", []):
                    people[str(item["name"])] = (str(item["sha256"]), int(item.get("created", 0)))
            except (TypeError, KeyError, ValueError, AttributeError) as exc:
                raise statefile.StateFileCorrupt(self.path, f"not a token file ({exc!r})", TOKENS_FIX) from None
        self._default, self._people, self._seen = default, people, seen

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """A read-modify-write of the file, under this object's lock and the file's lock (other processes: the CLI,
        the server, the tray) so no change of theirs is lost; the block saves with `_save`."""
        with self._lock:
            make_data_dir(self.path.parent)
            with statefile.locked(self.path):
                self._seen = None  # read it again under the lock, whatever the stat says
                self._load()
                yield

    def _save(self) -> None:
        doc = {
            "default": self._default,
            "people": [{"name": n, "sha256": h, "created": c} for n, (h, c) in sorted(self._people.items())],
        }
        statefile.write_json(self.path, doc)  # 0600, fsynced, renamed over the old file, folder fsynced
        self._seen = self._stat()

    def default(self) -> str:
        """The owner's token, created on first use."""
        with self._lock:
            self._load()
            if self._default:
                return self._default
            with self._changing():
                if not self._default:
                    self._default = new_token()
                    self._save()
                return self._default

    def add(self, name: str) -> str:
        """A new token for `name`; returned once, stored only as a digest."""
        with self._changing():
            if not _NAME.fullmatch(name):  # not .match: its $ also matches before a final newline
                raise InvalidInput("a token name is 1-64 letters, digits, spaces or . _ @ - (e.g. a person's name)")
            if name.startswith(PEER_PREFIX):
                raise InvalidInput(f"names starting with {PEER_PREFIX!r} are for peer tokens (hivenote sync peer add)")
            if name in self._people:
                raise InvalidInput(f"{name!r} already has a token; revoke it first to issue a new one")
            token = new_token()
            self._people[name] = (_digest(token), time.time_ns() // 1_000_000)
            self._save()
            return token

    def adopt(self, name: str, token: str) -> None:
        """Accept a token made elsewhere under `name` (the peer token a user's machines share), stored as a digest
        like any person's. Adopting the same token under the same name again changes nothing."""
        with self._changing():
            if not _NAME.fullmatch(name):  # not .match: its $ also matches before a final newline
                raise InvalidInput("a token name is 1-64 letters, digits, spaces or . _ @ - (e.g. a person's name)")
            if len(token) < self.MIN_ADOPTED_CHARS or not (token.isascii() and token.isprintable()) or " " in token:
                raise InvalidInput(
                    f"a shared token must be at least {self.MIN_ADOPTED_CHARS} printable ASCII characters without "
                    "spaces; use a long random one (`hivenote token add peers` on one machine prints one)"
                )
            digest = _digest(token)
            held = self._people.get(name)
            if held is not None:
                if hmac.compare_digest(held[0], digest):
                    return
                raise InvalidInput(f"{name!r} already has another token; revoke it first to adopt a new one")
            self._people[name] = (digest, time.time_ns() // 1_000_000)
            self._save()

    def revoke(self, name: str) -> None:
        with self._changing():
            if self._people.pop(name, None) is None:
                raise NotFound(f"no token named {name!r}; `hivenote token list` shows them")
            self._save()

    def people(self) -> list[Person]:
        with self._lock:
            self._load()
            return [Person(n, c) for n, (_, c) in sorted(self._people.items())]

    def owner(self, presented: str) -> str | None:
        """The person a token belongs to ("" for the default token), or None. Constant-time comparisons."""
        with self._lock:
            self._load()
            found: str | None = None
            if self._default and hmac.compare_digest(presented.encode(), self._default.encode()):
                found = ""
            digest = _digest(presented)
            for name, (stored, _) in self._people.items():
                if hmac.compare_digest(digest, stored):
                    found = name
            return found


IDENTITY_CHALLENGE = re.compile(r"[0-9a-f]{32,128}")


def identity_proof(token: str, port: int, challenge: str) -> str:
    """What the Hivenote of a data dir answers to `challenge` on `port` (GET /api/health?challenge=...): an HMAC
    keyed with the owner's token, which only this data dir holds. The bridge checks it before it sends that token,
    so a program holding the port (another account's, another data dir's Hivenote) gets nothing; the port is in it,
    so a program relaying the challenge to the real server on another port cannot pass either."""
    message = f"hivenote-identity\n{port}\n{challenge}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


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
    server itself; protected paths need a valid bearer token (when auth is on)."""

    def __init__(self, app: ASGIApp, settings: Settings, tokens: Tokens) -> None:
        self.app = app
        self.settings = settings
        self.tokens = tokens
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
            await reply(send, 421, "bad_host", "Invalid Host header: this Hivenote only answers to its own names.")
            return
        origin = headers.get("origin")
        if origin is not None and not self.origin_allowed(origin, headers.get("host", "")):
            await reply(
                send, 403, "bad_origin", "Invalid Origin header: only pages served by this Hivenote may call it."
            )
            return
        if path.startswith("/.well-known/"):
            await reply(send, 404, "not_found", "Not found: Hivenote uses bearer tokens, not OAuth.")
            return
        if self.settings.auth and path.startswith(PROTECTED_PREFIXES) and path not in OPEN_PATHS:
            scheme, _, presented = headers.get("authorization", "").partition(" ")
            try:
                person = self.tokens.owner(presented.strip()) if scheme.lower() == "bearer" and presented else None
            except HivenoteError as exc:  # tokens.json damaged: nobody can be checked, so nobody gets in
                await reply(send, 503, "unavailable", f"This Hivenote cannot check tokens right now: {exc}")
                return
            if person is None:
                await reply(
                    send,
                    401,
                    "unauthorized",
                    "This Hivenote needs a token: send `Authorization: Bearer <token>`. `hivenote token show` "
                    "prints it and `hivenote connect <client>` prints a ready config.",
                    [(b"www-authenticate", b'Bearer realm="hivenote"')],
                )
                return
            if path.startswith("/sync") and person and not person.startswith(PEER_PREFIX):
                await reply(
                    send,
                    403,
                    "forbidden",
                    "/sync serves the raw log (the text of purged notes included) to this user's other machines: it "
                    "needs the peer token they share (`hivenote sync peer add`), not a person's token. Use /mcp or "
                    "/api for the notebook.",
                )
                return
            if path.startswith("/desktop") and person:
                await reply(
                    send, 403, "forbidden", "Only this machine's owner (the tray's own window) may call /desktop."
                )
                return
            if person.startswith(PEER_PREFIX) and not path.startswith("/sync"):
                await reply(
                    send,
                    403,
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
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, _limited(receive, limit), tracked_send)
        except BodyTooLarge:  # a streamed body without Content-Length grew past the limit
            if not started:
                await too_large(send, path, limit)
        except ClientDisconnect:  # the client left, or its body stalled and the server closed it: no one to answer
            return


def request_limit(settings: Settings, path: str) -> int:
    """The largest body a request to `path` may carry: an import's (a file), and a graph call's (the official
    memory server takes a create_entities of any size; an import of the graph by another name), or any other's."""
    if path.startswith(("/api/import", "/mcp/graph")):
        return settings.max_import_bytes
    return settings.max_body_bytes


def size_words(size: int) -> str:
    """1048576 -> "1 MiB", 65536 -> "64 KiB", anything else in bytes."""
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} bytes"


async def too_large(send: Send, path: str, limit: int) -> None:
    """413, said so that a client can show it: on MCP as a JSON-RPC error (the SDK client puts its request's id on
    an error without one), elsewhere as the REST error."""
    said = f"Request over this Hivenote's {size_words(limit)} limit ({limit} bytes); nothing was written."
    if path.startswith("/mcp/graph"):
        said += " Send the entities, observations or relations in several calls."
    elif path.startswith("/mcp"):
        said += " A note's body holds at most 64 KiB: keep a note to one decision or fact, or split it into several."
    if not path.startswith("/mcp"):
        await reply(send, 413, "too_large", said)
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


async def reply(
    send: Send, status: int, code: str, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
