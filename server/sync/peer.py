"""The peer-to-peer transport: this node pulls the shards it lacks from the peers it knows over their own HTTP
(`/sync`, routes.py), about every half second per peer, backing off while one fails; it learns further peers from
them. It only pulls: nothing is pushed, and this node's own shard is written by its store alone (a lost one comes back
as another node's: the store writes under a new node id then, OPLOG.md "Node identity"). Peers and their tokens
are kept in peers.json (peerbook.py); one exchange is pull.py.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import httpx2

from ..core.errors import InvalidInput
from ..storage.layout import Layout
from .peerbook import Peer, add_peer, list_peers, load_peers, remove_peer
from .pull import Puller

if TYPE_CHECKING:
    from ..web.services import Services

__all__ = ["Peer", "add_peer", "list_peers", "remove_peer", "run"]

log = logging.getLogger(__name__)

PULL_INTERVAL_S = 0.5  # a round per peer; the store folds what arrives within another 0.5 s
CONFIG_INTERVAL_S = 1.0  # peers.json is looked at again (the CLI edits it while the server runs)
MAX_BACKOFF_S = 8.0
HEARD_CHECK_S = 0.1  # a peer backing off looks this often whether that peer pulled from us meanwhile
TIMEOUT = httpx2.Timeout(10.0, connect=3.0)


async def _follow(puller: Puller, url: str, scope: anyio.CancelScope) -> None:
    """Pull from one peer about every PULL_INTERVAL_S, backing off while it fails."""
    failures = 0
    with scope:
        while True:
            peer = puller.book.peers.get(url)
            if peer is None or peer.is_self:
                return
            try:
                worked = await puller.exchange(peer)
            except Exception:  # a bug, not the network: keep the loop alive, say so
                log.exception("pulling from %s failed", url)
                puller.status.failed(f"peer {url}", "internal error; see the server log", kind="peer", target=url)
                worked = False
            failures = 0 if worked else failures + 1
            wait = min(MAX_BACKOFF_S, PULL_INTERVAL_S * 2**failures)
            if worked:
                await anyio.sleep(wait)
            else:
                puller.status.note(f"peer {url}", retry_in_s=wait)
                await _back_off(puller, peer.node, wait)


async def _back_off(puller: Puller, node: str, seconds: float) -> None:
    """Wait `seconds` before trying a failing peer again, or less: as soon as that peer pulls from this server (it is
    up and reaches us), so its entry does not say `cannot reach` for a whole back-off after it came back."""
    heard = puller.status.heard(node) if node else 0
    with anyio.move_on_after(seconds):
        while not node or puller.status.heard(node) == heard:
            await anyio.sleep(HEARD_CHECK_S)


async def run(services: Services) -> None:
    """Pull from every peer in peers.json until cancelled; peers added or removed meanwhile are followed."""
    data_dir = services.settings.data_dir
    replicas = services.replicas  # shared with the other transports, and so are its per-shard locks
    following: dict[str, anyio.CancelScope] = {}
    async with httpx2.AsyncClient(timeout=TIMEOUT) as http, anyio.create_task_group() as tasks:
        puller = Puller(data_dir, replicas, services.sync, http, clock=services.store.clock)
        while True:
            try:
                puller.book = await anyio.to_thread.run_sync(load_peers, data_dir)
            except InvalidInput as exc:
                services.sync.failed("peers", str(exc), kind="peer", target=str(Layout(data_dir).peers))
            wanted = {url for url, p in puller.book.peers.items() if not p.is_self}
            for url in sorted(wanted - following.keys()):
                following[url] = anyio.CancelScope()
                tasks.start_soon(_follow, puller, url, following[url])
            for url in sorted(following.keys() - wanted):
                following.pop(url).cancel()
                services.sync.forget(f"peer {url}")
                services.store.clock.forget_offset(f"peer {url}")  # a clock no longer asked is no measurement
            await anyio.sleep(CONFIG_INTERVAL_S)
