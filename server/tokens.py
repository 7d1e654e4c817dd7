"""Bearer tokens: `<data dir>/tokens.json` (mode 0600, never in the log) holds one default token (this machine's
owner: its agents and connect snippets use it) and any number of per-person tokens, kept only as SHA-256 digests
(shown once). web/auth.py's guard checks them on every request; the CLI, the stdio bridge and the tray read them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .core.errors import InvalidInput, NotFound
from .core.hlc import wall_ms
from .storage import statefile
from .storage.identity import make_data_dir

PEER_PREFIX = "peer-"  # tokens named so (`hivenote sync peer add`) may only call /sync
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
            self._people[name] = (_digest(token), wall_ms())
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
            self._people[name] = (digest, wall_ms())
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
