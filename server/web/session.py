"""The dashboard's sign-in without pasting a token: whoever holds the owner's token (the tray, `hivenote open`) asks
the server for a one-time code, hands it to the page it opens (in the URL the window or browser loads, never on a
command line), and the page exchanges it for a cookie (HttpOnly, SameSite=Strict) that stands for the owner on /api
and /desktop. Who a caller is is never read from the network (addresses, ports, socket tables): a request holds a
token, this cookie, or nothing.

A browser sends a cookie for 127.0.0.1 to every port of 127.0.0.1 (cookies do not keep ports apart), so a server of
another account on another port that the user's browser visits receives it. The cookie alone therefore opens
nothing: the trade also answers a key (`KEY_HEADER`, an HMAC over the cookie's value) that the page keeps in its
origin's localStorage, which browsers do keep apart by port, and sends with each call; the guard wants both. The
cookie is HttpOnly, so a script in the page cannot read it; the key alone opens nothing either.

The cookie is an HMAC keyed with the owner's token over when it was issued, so it outlives a restart of the server
and dies with the token; the server refuses it after `COOKIE_LIFETIME_S`. A browser sends a cookie for 127.0.0.1 to
every port of 127.0.0.1 (cookies do not keep ports apart): its name carries the port, so two Hivenotes do not
overwrite each other's, and the guard takes it only from a request the dashboard itself makes (its client header,
which no other page can send without a preflight this server never grants, and no cross-origin Origin or
Sec-Fetch-Site).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable, Mapping

from ..core.hlc import wall_ms
from ..tokens import Tokens
from .rest_schema import CLIENT_HEADER

CODE_LIFETIME_S = 120  # a code is used within a second or two by the window or browser it was made for
COOKIE_LIFETIME_S = 7 * 24 * 3600
MAX_CODES = 32  # outstanding at once; the oldest goes first
COOKIE_PATHS = ("/api", "/desktop")  # what the cookie opens: the dashboard's backend, never /mcp or /sync
KEY_HEADER = "x-hivenote-key"  # the key that goes with the cookie (the trade's answer, and every call after it)
KEY_MISSING = (
    "This page's sign-in is incomplete (the key that goes with the sign-in cookie is missing or wrong; a page of "
    "another port may have been sent the cookie). Open the dashboard again from the tray or with `hivenote open`."
)
DASHBOARD_CLIENT = "hivenote-dashboard/"


def cookie_name(port: int) -> str:
    return f"hivenote-{port}"


def cookie_header(name: str, value: str, max_age: int) -> str:
    return f"{name}={value}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict"


def read_cookie(header: str, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header (other programs on 127.0.0.1 may set cookies of any shape)."""
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value.strip()
    return None


def from_the_dashboard(headers: Mapping[str, str]) -> bool:
    """A request the dashboard's own script made: its client header (a custom header: another origin's page
    cannot send it without a CORS preflight, never granted) and, where the browser says, from this very origin.
    The guard has already refused an Origin other than this server."""
    client = headers.get(CLIENT_HEADER, "")
    return client.startswith(DASHBOARD_CLIENT) and headers.get("sec-fetch-site", "same-origin") == "same-origin"


class SignIn:
    """One server's codes (in memory only: each is good once, for CODE_LIFETIME_S) and its cookies' checks."""

    def __init__(self, tokens: Tokens, now_ms: Callable[[], int] = wall_ms) -> None:
        self.tokens = tokens
        self.now_ms = now_ms
        self._codes: dict[str, int] = {}  # sha256 of the code -> when it expires (ms)
        self._lock = threading.Lock()

    def code(self) -> str:
        code = secrets.token_urlsafe(32)
        now = self.now_ms()
        with self._lock:
            self._forget_expired(now)
            while len(self._codes) >= MAX_CODES:
                del self._codes[next(iter(self._codes))]
            self._codes[_digest(code)] = now + CODE_LIFETIME_S * 1000
        return code

    def redeem(self, code: str) -> bool:
        """True once for a code this server made in the last CODE_LIFETIME_S; it is spent either way."""
        with self._lock:
            expires = self._codes.pop(_digest(code), None)
        return expires is not None and self.now_ms() < expires

    @property
    def pending(self) -> int:
        """Codes made and neither traded nor expired yet."""
        now = self.now_ms()
        with self._lock:
            return sum(1 for expires in self._codes.values() if expires > now)

    def _forget_expired(self, now: int) -> None:
        for digest in [d for d, expires in self._codes.items() if expires <= now]:
            del self._codes[digest]

    def cookie(self) -> str:
        """A new cookie value: when it was issued, and the owner token's HMAC over that. Raises HivenoteError
        while tokens.json is damaged."""
        issued = str(self.now_ms() // 1000)
        return f"{issued}.{self._mac(issued)}"

    def key(self, cookie: str) -> str:
        """The key that goes with a cookie value (kept by the page, per origin; see the module's doc)."""
        message = f"hivenote-dashboard-key\n{cookie}".encode()
        return hmac.new(self.tokens.default().encode(), message, hashlib.sha256).hexdigest()

    def key_valid(self, cookie: str, key: str) -> bool:
        return hmac.compare_digest(key.encode(), self.key(cookie).encode())

    def cookie_valid(self, value: str) -> bool:
        issued, _, mac = value.partition(".")
        if not issued.isdigit() or not mac:
            return False
        age = self.now_ms() // 1000 - int(issued)
        return -60 <= age < COOKIE_LIFETIME_S and hmac.compare_digest(mac, self._mac(issued))

    def _mac(self, issued: str) -> str:
        message = f"hivenote-dashboard-cookie\n{issued}".encode()
        return hmac.new(self.tokens.default().encode(), message, hashlib.sha256).hexdigest()


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()
