"""The peers this node knows: `<data dir>/peers.json` (mode 0600: it holds tokens; never synced). Each peer is a
URL with the token presented to it, the peer it was learned from (gossip; "" when the user added it), the node id
it reported and its state at the last exchange. The CLI edits it while the server runs, so every change is made
under a file lock.

A user's machines share one peer token: `add_peer` keeps it for pulling and makes this server accept it
(`Tokens.adopt`), so adding each machine's peers on each machine is all the set-up there is.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..core.errors import InvalidInput, NotFound
from ..storage import statefile
from ..storage.identity import make_data_dir
from ..storage.layout import Layout
from ..tokens import PEER_PREFIX, Tokens


@dataclass
class Peer:
    url: str
    token: str
    learned_from: str = ""  # "" = added by the user
    node: str = ""  # the node id it reported
    up: bool | None = None  # at the last exchange (None before the first)
    error: str = ""  # why the last exchange failed
    changed: int = 0  # wall ms of the last change of `up` or `error`
    is_self: bool = False  # this very server under another name (learned by gossip): never pulled

    def public(self) -> dict[str, Any]:
        """Everything but the token (for `hivenote sync peer list`)."""
        return {k: v for k, v in asdict(self).items() if k != "token"}


@dataclass
class PeerBook:
    peers: dict[str, Peer] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)  # removed by the user: gossip does not bring them back


def normalize_url(url: str) -> str:
    """`http(s)://host[:port][/path]` without a trailing slash; raises InvalidInput for anything else."""
    hint = "give the peer's http(s)://host:port, e.g. http://laptop.tailnet.ts.net:7788"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        raise InvalidInput(f"{url!r} is not a peer URL; {hint}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInput(f"{url!r} is not a peer URL; {hint}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InvalidInput(f"{url!r}: a peer URL has no user, query or fragment (the token is passed separately)")
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


PEERS_FIX = "fix it, or delete it and add the peers again"


def load_peers(data_dir: Path) -> PeerBook:
    path = Layout(data_dir).peers
    raw = statefile.read_json(path, PEERS_FIX)  # None: no peers yet; a damaged file raises and is left alone
    if raw is None:
        return PeerBook()
    try:
        known = {f.name for f in fields(Peer)}
        peers = [Peer(**{k: v for k, v in item.items() if k in known}) for item in raw.get("peers", [])]
        return PeerBook({p.url: p for p in peers}, set(raw.get("removed", [])))
    except (ValueError, TypeError, AttributeError) as exc:
        raise statefile.StateFileCorrupt(path, f"not a peer book ({exc})", PEERS_FIX) from None


def _save_peers(data_dir: Path, book: PeerBook) -> None:
    doc = {"peers": [asdict(p) for p in book.peers.values()], "removed": sorted(book.removed)}
    statefile.write_json(Layout(data_dir).peers, doc)  # 0600: it holds tokens


@contextlib.contextmanager
def editing(data_dir: Path) -> Iterator[PeerBook]:
    """peers.json read, changed and saved under its file lock (the CLI and the server both edit it)."""
    make_data_dir(data_dir)
    with statefile.locked(Layout(data_dir).peers):
        book = load_peers(data_dir)
        yield book
        _save_peers(data_dir, book)


def peer_token_name(token: str) -> str:
    """The name a shared peer token is accepted under (`hivenote token list` shows it)."""
    return f"{PEER_PREFIX}{hashlib.sha256(token.encode()).hexdigest()[:8]}"


def add_peer(data_dir: Path, url: str, token: str) -> Peer:
    """Pull from `url` presenting `token`, and accept the same token from peers (the user's machines share it)."""
    url, token = normalize_url(url), token.strip()
    Tokens(Layout(data_dir).tokens).adopt(peer_token_name(token), token)  # checks the token too
    with editing(data_dir) as book:
        book.removed.discard(url)
        old = book.peers.get(url)
        book.peers[url] = peer = Peer(url, token, node=old.node if old else "")
    return peer


def remove_peer(data_dir: Path, url: str) -> None:
    """Stop pulling from `url` (gossip will not add it back). Its token stays accepted until revoked."""
    url = normalize_url(url)
    with editing(data_dir) as book:
        if book.peers.pop(url, None) is None:
            raise NotFound(f"no peer {url}; `hivenote sync peer list` shows them")
        book.removed.add(url)


def list_peers(data_dir: Path) -> list[Peer]:
    return sorted(load_peers(data_dir).peers.values(), key=lambda p: (p.learned_from != "", p.url))


def announced_peers(data_dir: Path) -> list[str]:
    """The peer URLs /sync/shards tells others about (never tokens, never this server itself)."""
    try:
        book = load_peers(data_dir)
    except InvalidInput:
        return []
    return sorted(url for url, p in book.peers.items() if not p.is_self)
