"""Pulling from one peer over its `/sync` endpoints (routes.py has the protocol): what this node lacks of every
shard the peer lists, by continuation when the peer's copy extends every byte of ours (a digest of all of them, never
a few), or whole when the owner compacted it; a copy that is neither is another history of the node (a fork) and is
kept beside ours as `<node>~<12 hex>.jsonl`, so nothing held here or there is lost or spliced. Each exchange is
reported to the status and marks the peer up or down in peers.json; the peers a peer knows are learned (gossip).
"""

from __future__ import annotations

import hashlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import httpx2

from ..core.errors import InvalidInput
from ..core.hlc import Clock, date_offset, wall_ms
from ..core.model import MAX_LINE_BYTES
from .peerbook import Peer, PeerBook, editing, normalize_url
from .replica import Replicas, SyncRefused, overlong_at, same_node
from .routes import MAX_LIMIT, MAX_LISTED, NODE_HEADER, Summary, valid_node
from .status import SyncStatus

log = logging.getLogger(__name__)

MAX_PEERS = 64  # gossip stops learning beyond this many
MAX_WHOLE_BYTES = 1 << 30  # a replaced (compacted) shard is fetched whole (to disk) before it replaces the copy here
MAX_LISTING_BYTES = 8 << 20  # a /sync/shards answer (MAX_LISTED shards of ~200 bytes, and the peers it knows)
MAX_ERROR_BYTES = 64 << 10  # any other answer that is not shard bytes (an error's JSON)


class PeerFailed(Exception):
    """An exchange that did not work; the message says what happened and is reported."""


class PeerUnreachable(PeerFailed):
    """The network or the peer's door (its token check): nothing more can be asked of it this round."""


class TokenRefused(PeerUnreachable):
    """The peer answered 401 to the token we hold for it."""


class Replaced(Exception):
    """The peer's copy differs from ours before the offset: a new generation of the shard."""


def _unreachable(url: str, exc: httpx2.HTTPError) -> PeerUnreachable:
    """`cannot reach <url>: <why>`, with the why found under the client's wrappers."""
    reason = str(exc) or "the connection was closed"
    if isinstance(exc, httpx2.TimeoutException):
        reason = "no answer in time"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            reason = "connection refused"
        elif isinstance(cause, socket.gaierror):
            reason = f"unknown host name ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__
    return PeerUnreachable(f"cannot reach {url}: {reason}")


def _error_message(response: httpx2.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason_phrase


@dataclass
class Listing:
    node: str
    shards: dict[str, Summary]
    peers: list[str]


def parse_listing(url: str, raw: Any) -> Listing:
    try:
        node, shards, peers = raw["node"], raw["shards"], raw.get("peers", [])
        if not (isinstance(node, str) and valid_node(node) and isinstance(shards, dict) and isinstance(peers, list)):
            raise ValueError("node, shards or peers missing")
        if len(shards) > MAX_LISTED:
            raise ValueError(f"it lists {len(shards)} shards, over {MAX_LISTED}")
        return Listing(node, {str(k): Summary.from_json(v) for k, v in shards.items()}, [str(p) for p in peers])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PeerFailed(f"{url} is not a Hivenote peer (its /sync/shards answer is unusable: {exc})") from None


class Puller:
    """Pulls from one peer at a time what this node lacks, into the replicas; reports each exchange."""

    def __init__(
        self,
        data_dir: Path,
        replicas: Replicas,
        status: SyncStatus,
        http: httpx2.AsyncClient,
        now_ms: Callable[[], int] = wall_ms,
        clock: Clock | None = None,
    ) -> None:
        self.clock = clock  # told what the peers' clocks say (HTTP Date), to find this machine's own skew
        self.data_dir = data_dir
        self.replicas = replicas
        self.status = status
        self.http = http
        self.now_ms = now_ms
        self.book = PeerBook()
        self.verified: dict[tuple[str, str], Summary] = {}  # (peer, shard) -> its summary when last checked
        self._locks: dict[str, anyio.Lock] = {}
        self._dates: dict[str, int] = {}  # peer URL -> its clock minus ours, from its last answer's Date

    async def exchange(self, peer: Peer) -> bool:
        """One pull from `peer`, reported to the status and peers.json; True when everything in it worked."""
        name = f"peer {peer.url}"
        moved, lag, reached = 0, 0, False
        try:
            listing = await self.listing(peer)
            reached = True
            measured = self._dates.pop(peer.url, None)
            if self.clock is not None and measured is not None and listing.node != self.replicas.own_node:
                # Only now is the peer known to be another machine: its Date measures this machine's clock.
                self.clock.note_offset(name, measured)
            if listing.node == self.replicas.own_node:
                await self._note(peer.url, up=True, error="", node=listing.node, is_self=True)
                self.status.forget(name)
                if self.clock is not None:  # the peer was never another clock: a measurement of ours is dropped
                    self.clock.forget_offset(name)
                return True
            await self._learn(peer, listing.peers)
            moved, lag = await self._pull_shards(peer, listing)
        except TokenRefused as exc:
            if not peer.learned_from:
                return await self._failed(peer, str(exc), reached=reached)
            # Learned by gossip from a peer that shares another token with it: its notes come through that peer,
            # so this is how the machines are paired, not a failure.
            self.status.ok(
                name,
                kind="peer",
                target=peer.url,
                up=False,
                relayed_by=peer.learned_from,
                note=(
                    f"takes another token than the one learned from {peer.learned_from}; its notes arrive through "
                    f"{peer.learned_from}. To pull from it directly: hivenote sync peer add {peer.url} --token-file -"
                ),
            )
            await self._note(peer.url, up=False, error="")
            return False  # backs off: asking again with the same token changes nothing
        except (PeerFailed, SyncRefused, OSError) as exc:
            message = f"cannot write what {peer.url} sent: {exc}" if isinstance(exc, OSError) else str(exc)
            # A peer that went away after its listing (killed mid-exchange) is down now, not up.
            return await self._failed(peer, message, reached=reached and not isinstance(exc, PeerUnreachable))
        self.status.ok(name, kind="peer", target=peer.url, bytes_in=moved, up=True, lag_bytes=lag, node=listing.node)
        await self._note(peer.url, up=True, error="", node=listing.node)
        return True

    async def _failed(self, peer: Peer, message: str, *, reached: bool) -> bool:
        self.status.failed(f"peer {peer.url}", message, kind="peer", target=peer.url, up=reached)
        await self._note(peer.url, up=reached, error=message)
        return False

    async def _get(
        self, peer: Peer, path: str, params: dict[str, Any] | None = None, cap: int = MAX_ERROR_BYTES
    ) -> httpx2.Response:
        """One GET whose body is read as it comes and never past `cap` bytes (for a 200; an error's JSON at most
        MAX_ERROR_BYTES): a peer that sends more than it was asked for is refused (PeerFailed), never held whole."""
        headers = {"Authorization": f"Bearer {peer.token}", NODE_HEADER: self.replicas.own_node}
        for attempt in (1, 2):
            try:
                sent = self.now_ms()
                response = await self._capped(peer, path, params, headers, cap)
                offset = date_offset(response.headers.get("date"), sent, self.now_ms())
                if offset is not None:  # what the peer's clock said; counted once the peer is known not to be us
                    self._dates[peer.url] = offset
                break
            except (httpx2.ReadError, httpx2.WriteError, httpx2.RemoteProtocolError) as exc:
                if attempt == 2:  # the first may have met a kept-alive connection the peer closed (it restarted)
                    raise _unreachable(peer.url, exc) from None
            except httpx2.HTTPError as exc:
                raise _unreachable(peer.url, exc) from None
        if response.status_code == 401:
            raise TokenRefused(
                f"{peer.url} refused our token; add it again with the token its machines share: "
                f"hivenote sync peer add {peer.url} --token <token>"
            )
        return response

    async def _capped(
        self, peer: Peer, path: str, params: dict[str, Any] | None, headers: dict[str, str], cap: int
    ) -> httpx2.Response:
        async with self.http.stream("GET", f"{peer.url}{path}", params=params, headers=headers) as streamed:
            limit = cap if streamed.status_code == 200 else MAX_ERROR_BYTES
            declared = streamed.headers.get("content-length", "")
            body = bytearray()
            if not (declared.isdigit() and int(declared) > limit):
                async for chunk in streamed.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        break
            if len(body) > limit or (declared.isdigit() and int(declared) > limit):
                raise PeerFailed(
                    f"{peer.url} answered {path} with more than the {limit} bytes asked for (at most one line of "
                    f"{MAX_LINE_BYTES} bytes past the limit); stopped reading, nothing of it taken"
                )
            dropped = ("content-encoding", "content-length")  # the body kept is already decoded
            kept = {k: v for k, v in streamed.headers.items() if k.lower() not in dropped}
            return httpx2.Response(streamed.status_code, headers=kept, content=bytes(body), request=streamed.request)

    async def listing(self, peer: Peer) -> Listing:
        response = await self._get(peer, "/sync/shards", cap=MAX_LISTING_BYTES)
        if response.status_code != 200:
            raise PeerFailed(f"{peer.url} answered {response.status_code} to /sync/shards: {_error_message(response)}")
        try:
            raw = response.json()
        except ValueError:
            raw = None
        return parse_listing(peer.url, raw)

    async def _pull_shards(self, peer: Peer, listing: Listing) -> tuple[int, int]:
        moved = lag = 0
        problems: list[str] = []
        for node, theirs in sorted(listing.shards.items()):
            if not valid_node(node) or theirs.size == 0:
                continue
            if self.verified.get((peer.url, node)) == theirs:
                continue  # the same summary as when it was last checked against ours
            async with self._locks.setdefault(node, anyio.Lock()):
                try:
                    got, behind = await self._pull_shard(peer, node, theirs)
                except SyncRefused as exc:  # this shard only: the others still come
                    problems.append(f"refused {node}'s shard from {peer.url}: {exc}")
                    continue
                except PeerUnreachable:
                    raise
                except PeerFailed as exc:
                    problems.append(str(exc))
                    continue
            if behind == 0:
                self.verified[peer.url, node] = theirs
            moved, lag = moved + got, lag + behind
        if problems:
            raise PeerFailed("; ".join(problems))
        return moved, lag

    async def _pull_shard(self, peer: Peer, node: str, theirs: Summary) -> tuple[int, int]:
        """Bytes moved and bytes still behind for one shard. The peer's copy is taken only as a continuation of ours
        (every byte before our end proven the same), or whole as a compaction of ours; any other copy is another
        history of the node (a fork) and is kept beside ours, never spliced into it."""
        own = same_node(node, self.replicas.own_node)
        held = await anyio.to_thread.run_sync(self.replicas.size, node)
        try:
            if theirs.size <= held or own:
                # Behind us, level with us (the same size is no proof of the same bytes: two writers as one node
                # each wrote an op as long as the other's) or this install's own shard: the peer's copy must be a
                # prefix of ours.
                await self._range(peer, node, min(theirs.size, held), limit=1)
                if theirs.size <= held:
                    return 0, 0
                raise Replaced  # more of this install's node than it wrote: another history
            moved = await self._continue(peer, node, held, theirs)
            return moved, max(0, theirs.size - held - moved)
        except Replaced:
            pass
        copy = await self.fetch_whole(peer, node, theirs)
        if copy is None:
            return 0, theirs.size
        with copy:
            size = copy.tell()  # where the last range was written: its end
            await anyio.to_thread.run_sync(self.replicas.settle_copy, node, copy)
        return size, 0

    async def _range(
        self, peer: Peer, node: str, offset: int, limit: int = MAX_LIMIT, prefix: str | None = None
    ) -> httpx2.Response:
        params: dict[str, Any] = {"offset": offset, "limit": limit}
        if offset:
            if prefix is None:
                prefix = await anyio.to_thread.run_sync(self.replicas.prefix_digest, node, offset)
            params["prefix"] = prefix
        # An honest peer sends at most `limit` bytes, or one line longer than it (no line is longer than an op).
        response = await self._get(peer, f"/sync/shards/{node}", params, cap=limit + MAX_LINE_BYTES + 1)
        if response.status_code == 409:
            raise Replaced
        if response.status_code == 400 and "unknown parameter 'prefix'" in _error_message(response):
            raise PeerUnreachable(
                f"{peer.url} runs an older Hivenote, which cannot prove that a copy holds the very same bytes: update "
                "Hivenote on that machine (nothing is pulled from it until then, so nothing can be spliced)"
            )
        if response.status_code != 200:
            raise PeerFailed(
                f"{peer.url} answered {response.status_code} for {node}'s shard: {_error_message(response)}"
            )
        said = response.headers.get("x-shard-prefix")
        if offset and said is None:
            raise PeerUnreachable(
                f"{peer.url} does not say what its copy of {node}'s shard holds before byte {offset} (an older "
                "Hivenote?): update Hivenote on that machine (nothing past the start is taken from it until then)"
            )
        if offset and said != prefix:
            raise Replaced  # checked here too: whatever the peer did, ours is not the start of its copy
        return response

    async def _continue(self, peer: Peer, node: str, offset: int, theirs: Summary) -> int:
        """Append the peer's lines after ours, range by range, each proven to continue the very bytes held."""
        moved = 0
        while offset < theirs.size:
            response = await self._range(peer, node, offset)
            written = await anyio.to_thread.run_sync(self.replicas.append, node, response.content, offset)
            if written == 0:
                if response.content:
                    raise PeerFailed(f"{peer.url} sent no complete line of {node}'s shard at byte {offset}")
                break  # it has no more than this (it shrank since its listing)
            offset, moved = offset + written, moved + written
        return moved

    async def fetch_whole(self, peer: Peer, node: str, theirs: Summary) -> IO[bytes] | None:
        """The peer's whole shard, written as it comes to a spool file (`Replicas.spool`, returned open) range by
        range, never past the size it listed plus one line, never held in memory; None when it changed while we
        fetched (the next round tries again). A line longer than any op is damage: refused (SyncRefused), nothing
        of the copy kept."""
        if theirs.size > MAX_WHOLE_BYTES:
            raise PeerFailed(f"{peer.url} offers {node}'s shard as {theirs.size} bytes, over {MAX_WHOLE_BYTES}")
        copy = await anyio.to_thread.run_sync(self.replicas.spool)
        try:
            got, proof = 0, hashlib.sha256()
            while got < theirs.size:
                try:
                    limit = min(MAX_LIMIT, theirs.size - got)
                    response = await self._range(peer, node, got, limit=limit, prefix=proof.hexdigest())
                except Replaced:
                    copy.close()
                    return None
                chunk = response.content
                whole = chunk[: chunk.rfind(b"\n") + 1]
                if not whole:
                    if chunk:
                        raise PeerFailed(f"{peer.url} sent no complete line of {node}'s shard at byte {got}")
                    copy.close()
                    return None
                if (damage := overlong_at(whole)) >= 0:
                    raise SyncRefused(
                        f"the line at byte {got + damage} of {peer.url}'s copy of {node}'s shard is longer than any op "
                        f"({MAX_LINE_BYTES} bytes): damage, nothing of that copy kept"
                    )
                await anyio.to_thread.run_sync(copy.write, whole)
                proof.update(whole)
                got += len(whole)
        except BaseException:
            copy.close()
            raise
        return copy

    async def _learn(self, peer: Peer, urls: list[str]) -> None:
        """Gossip: peers a peer knows become ours, tried with the token of the one that told us."""
        fresh: list[str] = []
        for raw in urls[:MAX_PEERS]:
            try:
                url = normalize_url(raw)
            except InvalidInput:
                continue
            if url != peer.url and url not in self.book.peers and url not in self.book.removed and url not in fresh:
                fresh.append(url)
        room = MAX_PEERS - len(self.book.peers)
        if fresh and room > 0:

            def learn(book: PeerBook) -> None:
                for url in fresh[:room]:
                    if url not in book.peers and url not in book.removed:
                        book.peers[url] = Peer(url, peer.token, learned_from=peer.url)

            await self._edit(learn)

    async def _note(self, url: str, **changes: Any) -> None:
        """Record an exchange's outcome in peers.json, only when it differs from what is there."""
        known = self.book.peers.get(url)
        if known is None or all(getattr(known, k) == v for k, v in changes.items()):
            return
        stamp = self.now_ms()

        def note(book: PeerBook) -> None:
            peer = book.peers.get(url)
            if peer is None:
                return
            if (changes.get("up", peer.up), changes.get("error", peer.error)) != (peer.up, peer.error):
                peer.changed = stamp
            for key, value in changes.items():
                setattr(peer, key, value)

        await self._edit(note)

    async def _edit(self, change: Callable[[PeerBook], None]) -> None:
        def edit() -> PeerBook:
            with editing(self.data_dir) as book:
                change(book)
            return book

        self.book = await anyio.to_thread.run_sync(edit)
