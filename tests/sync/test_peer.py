"""Peer-to-peer sync: real `hivenote serve` processes pulling from each other over `/sync` (gossip, convergence
across a kill, a lost own shard back as a copy under a new node id, a compaction replacing every copy), the puller
in this process against real servers and a hostile peer (incremental transfer, compaction, a restarted shard,
impersonation, cut-off ranges, peers down), bad input on `/sync`, and the peers file and shared token."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from hivenote.server.core.errors import InvalidInput, NotFound
from hivenote.server.core.hlc import Clock, wall_ms
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.sync.peer import MAX_BACKOFF_S, add_peer, list_peers, remove_peer
from hivenote.server.sync.peerbook import load_peers, peer_token_name
from hivenote.server.sync.pull import Puller
from hivenote.server.sync.replica import Replicas
from hivenote.server.sync.routes import MAX_LIMIT
from hivenote.server.sync.status import SyncStatus
from hivenote.server.tokens import Tokens, new_token
from tests.support.live import free_port
from tests.support.peer_inprocess import Hostile, hostile_peer, served
from tests.support.peer_nodes import Node, fetch, running
from tests.support.wait import wait_until


def seqs(shard: bytes) -> list[int]:
    return [json.loads(line)["seq"] for line in shard.splitlines()]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- real servers ---------------------------------------------------------------------------------------------------


def test_three_servers_find_each_other_by_gossip_and_converge_after_one_is_killed(tmp_path: Path) -> None:
    a, b, c = Node(tmp_path / "a"), Node(tmp_path / "b"), Node(tmp_path / "c")
    token = new_token()  # the one peer token this user's machines share
    add_peer(a.data_dir, b.url, token)  # a and c know only b; b knows both
    add_peer(b.data_dir, a.url, token)
    add_peer(b.data_dir, c.url, token)
    add_peer(c.data_dir, b.url, token)
    nodes = (a, b, c)
    with running(*nodes):
        titles = {f"written on {n.data_dir.name}" for n in nodes}
        for n in nodes:
            n.remember(f"written on {n.data_dir.name}")
        wait_until(lambda: all(n.titles() == titles for n in nodes), what=lambda: str([n.titles() for n in nodes]))

        # Gossip: b told a about c and c about a; each was then reached with b's token and reported its node id.
        wait_until(lambda: a.peers().get(c.url, {}).get("node") == c.node, what=lambda: str(a.peers()))
        wait_until(lambda: c.peers().get(a.url, {}).get("node") == a.node, what=lambda: str(c.peers()))
        assert a.peers()[c.url]["learned_from"] == b.url and a.peers()[c.url]["up"] is True
        assert a.peers()[b.url]["learned_from"] == ""

        assert b.stop(signal.SIGKILL) == -signal.SIGKILL
        c.remember("written on c while b is down")
        titles.add("written on c while b is down")
        wait_until(lambda: a.titles() == titles, what=lambda: str(a.titles()))  # only the link gossip made is left
        refused = f"cannot reach {b.url}: connection refused"
        wait_until(lambda: a.peers()[b.url]["error"] == refused, what=lambda: str(a.peers()[b.url]))
        assert a.peers()[b.url]["up"] is False
        a.remember("written on a while b is down")
        titles.add("written on a while b is down")

        b.start()
        b.wait_ready()
        wait_until(lambda: b.titles() == titles, what=lambda: str(b.titles()))
        b.remember("written on b after coming back")
        titles.add("written on b after coming back")
        wait_until(lambda: all(n.titles() == titles for n in nodes), what=lambda: str([n.titles() for n in nodes]))
        wait_until(lambda: a.peers()[b.url]["up"] is True, what=lambda: str(a.peers()[b.url]))

        def identical() -> bool:  # every copy of every shard is its owner's bytes
            return all(n.shard(owner.node) == owner.shard(owner.node) for owner in nodes for n in nodes)

        wait_until(identical, what="byte-identical shards everywhere")
        assert all(seqs(n.shard(n.node)) == list(range(1, len(seqs(n.shard(n.node))) + 1)) for n in nodes)


def test_a_peer_back_after_an_outage_is_pulled_from_as_soon_as_it_pulls_from_us(tmp_path: Path) -> None:
    """Issue: after a peer came back, `sync status` kept saying `cannot reach` it for up to a whole back-off (8 s),
    although it was pulling from this machine already. A peer that reaches us is up: its pull ends the back-off."""
    a, b = Node(tmp_path / "a"), Node(tmp_path / "b")
    token = new_token()
    add_peer(a.data_dir, b.url, token)
    add_peer(b.data_dir, a.url, token)
    name = f"peer {b.url}"

    def entry() -> dict[str, Any]:
        return next(t for t in a.call("GET", "/api/status")["sync"]["transports"] if t["name"] == name)

    with running(a, b):
        wait_until(lambda: a.peers()[b.url]["node"] == b.node, what="a pulling from b once")
        assert b.stop() == 0
        # a backs off to the longest wait between tries of a peer that does not answer
        wait_until(
            lambda: entry()["failing"] and entry()["detail"].get("retry_in_s") == MAX_BACKOFF_S,
            MAX_BACKOFF_S * 4,
            what=lambda: str(entry()),
        )
        b.start()
        b.wait_ready()
        took = wait_until(lambda: not entry()["failing"], MAX_BACKOFF_S * 2, what=lambda: str(entry()))
        assert took < 2.0, f"a said `cannot reach` b for {took:.1f} s after b was back"
        assert entry()["error"] == ""


def test_a_lost_own_shard_never_restarts_its_seq_and_comes_back_from_a_peer_as_a_copy(tmp_path: Path) -> None:
    """Lost while stopped: the server starts under a new node id at once (it cannot prove what it wrote last), and
    the peer's copy of the old shard comes back like any other machine's: every note everywhere, no seq reused."""
    a, b = Node(tmp_path / "a"), Node(tmp_path / "b")
    token = new_token()
    add_peer(a.data_dir, b.url, token)
    add_peer(b.data_dir, a.url, token)
    with running(a, b):
        for i in range(3):
            a.remember(f"note {i}")
        old, before = a.node, a.shard(a.node)
        wait_until(lambda: b.shard(old) == before, what="b holding a's whole shard")
        assert a.stop() == 0
        (a.data_dir / "log" / f"{old}.jsonl").unlink()

        a.start()
        a.wait_ready()
        assert a.node != old and "missing" in a.log_tail()
        a.remember("after the loss")
        wait_until(lambda: a.shard(old) == before, what="a holding its old shard again, as a copy")
        assert seqs(a.shard(a.node)) == [1]
        everything = {"note 0", "note 1", "note 2", "after the loss"}
        wait_until(lambda: a.titles() == everything == b.titles(), what=lambda: f"{a.titles()} {b.titles()}")


def test_a_compaction_replaces_every_peers_copy_and_a_purged_text_survives_in_no_file(tmp_path: Path) -> None:
    """Issue 32, finding 3. a's last line is its note that b purged: a's compaction puts a content-free `seq.keep`
    line in its place. b's copy is replaced by the compacted shard (it was kept as "another history" of a, a branch
    holding the purged text that then travelled to every machine), and a copy that is only behind (the shard
    before the compaction, offered by a third server) is behind, not another history."""
    a, b = Node(tmp_path / "a"), Node(tmp_path / "b")
    token = new_token()
    add_peer(a.data_dir, b.url, token)
    add_peer(b.data_dir, a.url, token)
    with running(a, b):
        a.remember("kept on a")
        secret = a.remember("the secret")
        node, before = a.node, a.shard(a.node)
        wait_until(lambda: b.titles() == {"kept on a", "the secret"}, what=lambda: str(b.titles()))
        b.call("POST", f"/api/notes/{secret}/trash")
        b.call("DELETE", f"/api/notes/{secret}")  # b purges a's note: a's last line no longer matters
        wait_until(lambda: a.titles() == {"kept on a"}, what=lambda: str(a.titles()))
        assert a.stop() == 0
        done = subprocess.run(
            [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(a.data_dir), "compact"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        compacted = a.shard(node)
        assert b"the secret" not in compacted and b"seq.keep" in compacted
        a.start()
        a.wait_ready()
        wait_until(lambda: b.shard(node) == compacted, what=lambda: f"b's copy of {node}: {b.shard(node)!r}")
        a.remember("after the compaction")
        wait_until(lambda: b.titles() == {"kept on a", "after the compaction"}, what=lambda: str(b.titles()))
        for n in (a, b):
            files = sorted(p.name for p in (n.data_dir / "log").glob("*.jsonl"))
            assert not [f for f in files if "~" in f], f"{n.data_dir.name} keeps a branch from a compaction: {files}"
            assert not any(b"the secret" in (n.data_dir / "log" / f).read_bytes() for f in files), n.data_dir.name

    # The shard as it was before the compaction, offered again (a third machine that was away): behind, not a fork.
    old = Hostile(shards={node: before})
    with hostile_peer(old):
        add_peer(b.data_dir, old.url, token)
        with running(b):
            wait_until(lambda: b.peers().get(old.url, {}).get("up") is True, what=lambda: str(b.peers()))
            wait_until(lambda: any(r.startswith(f"/sync/shards/{node}") for r in old.requests), what="b asked")
            wait_until(lambda: b.peers()[old.url].get("error") == "", what=lambda: str(b.peers()[old.url]))
            assert not list((b.data_dir / "log").glob("*~*.jsonl"))
            assert b.shard(node).startswith(compacted)


# -- bad input on /sync (one real server) ---------------------------------------------------------------------------


@dataclass
class Lone:
    node: Node
    shard: bytes
    peer_url: str
    peer_token: str


@pytest.fixture(scope="module")
def lone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lone]:
    node = Node(tmp_path_factory.mktemp("lone") / "data")
    peer_url, peer_token = f"http://127.0.0.1:{free_port()}", new_token()  # nothing listens there
    add_peer(node.data_dir, peer_url, peer_token)
    with running(node):
        for title in ("one", "two", "three"):
            node.remember(title)
        shard = node.shard(node.node)
        # A sync tool's conflict copy of someone's shard (offered: every machine must fold it), and a stray file
        # whose lines name another writer than its name (not offered).
        line = json.loads(shard.splitlines()[0]) | {"node": "someone-0001"}
        (node.data_dir / "log" / "someone-0001.sync-conflict-1.jsonl").write_text(json.dumps(line) + "\n", "utf-8")
        (node.data_dir / "log" / "stray-0002.jsonl").write_text(json.dumps(line) + "\n", "utf-8")
        yield Lone(node, shard, peer_url, peer_token)


def log_files(node: Node) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((node.data_dir / "log").iterdir()) if p.suffix == ".jsonl"}


def test_the_listing_describes_each_shard_and_announces_peers_without_tokens(lone: Lone) -> None:
    status, _, body = fetch(f"{lone.node.url}/sync/shards", lone.node.token)
    listing = json.loads(body)
    assert status == 200 and listing["node"] == lone.node.node
    first = lone.shard.splitlines(keepends=True)[0]
    conflict = (lone.node.data_dir / "log" / "someone-0001.sync-conflict-1.jsonl").read_bytes()
    assert listing["shards"] == {
        lone.node.node: {"size": len(lone.shard), "head": sha(first), "seq": 3},
        "someone-0001.sync-conflict-1": {"size": len(conflict), "head": sha(conflict), "seq": 1},
    }
    assert listing["peers"] == [lone.peer_url]
    assert lone.peer_token not in body.decode() and lone.node.token not in body.decode()


def test_ranges_hold_complete_lines_and_continue_where_a_copy_ends(lone: Lone) -> None:
    url, node = lone.node.url, lone.node.node
    lines = lone.shard.splitlines(keepends=True)
    status, headers, body = fetch(f"{url}/sync/shards/{node}?offset=0&limit=10", lone.node.token)
    assert status == 200 and body == lines[0]  # shorter than one line: that line whole
    assert headers["x-shard-size"] == str(len(lone.shard)) and headers["x-shard-head"] == sha(lines[0])
    assert headers["x-shard-seq"] == "3" and headers["content-type"] == "application/octet-stream"
    held = len(lines[0])
    status, _, rest = fetch(f"{url}/sync/shards/{node}?offset={held}&prefix={sha(lines[0])}", lone.node.token)
    assert status == 200 and lines[0] + rest == lone.shard
    status, _, body = fetch(
        f"{url}/sync/shards/{node}?offset={len(lone.shard)}&prefix={sha(lone.shard)}", lone.node.token
    )
    assert (status, body) == (200, b"")  # a copy that ends where this one does is confirmed with an empty answer
    status, _, _ = fetch(f"{url}/sync/shards/{node}?offset={len(lone.shard)}&prefix={'0' * 64}", lone.node.token)
    assert status == 409  # the proof is checked even at the end


def test_sync_needs_a_valid_token(lone: Lone) -> None:
    for token in (None, "wrong", lone.peer_token[:-1]):
        status, _, body = fetch(f"{lone.node.url}/sync/shards/{lone.node.node}", token)
        assert status == 401 and json.loads(body)["error"]["code"] == "unauthorized"
    status, _, _ = fetch(f"{lone.node.url}/sync/shards", lone.peer_token)  # the shared peer token is accepted
    assert status == 200


def test_bad_range_requests_are_refused_with_clear_errors_and_change_nothing(lone: Lone) -> None:
    node, size = lone.node.node, len(lone.shard)
    first = lone.shard.splitlines(keepends=True)[0]
    proof, cut = sha(first), len(first)
    mid = cut - 3  # a copy cut mid-line: the offset does not end a line
    cases: list[tuple[str, int, str, str]] = [
        ("bad$name", 400, "invalid", "is not a node name"),
        ("..", 400, "invalid", "is not a node name"),
        ("nobody-0000", 404, "not_found", "no shard of nobody-0000 here"),
        (f"{node}?offset=abc", 400, "invalid", "whole numbers of bytes"),
        (f"{node}?offset=-1", 400, "invalid", "offset must be 0 or more"),
        (f"{node}?limit=0", 400, "invalid", f"limit must be between 1 and {MAX_LIMIT} bytes"),
        (f"{node}?limit={MAX_LIMIT + 1}", 400, "invalid", f"limit must be between 1 and {MAX_LIMIT} bytes"),
        (f"{node}?offset=0&secret=1", 400, "invalid", "unknown parameter 'secret'"),
        (f"{node}?offset={cut}", 400, "invalid", "send prefix"),
        (f"{node}?offset={cut}&head=x&tail=y", 400, "invalid", "update Hivenote on the machine that asked"),
        (f"{node}?offset={size + 1}&prefix={proof}", 416, "out_of_range", f"beyond {node}'s shard"),
        (f"{node}?offset={cut}&prefix={'0' * 64}", 409, "shard_replaced", "fetch it again from offset 0"),
        (f"{node}?offset={mid}&prefix={sha(lone.shard[:mid])}", 400, "invalid", "not where a line"),
    ]
    before = log_files(lone.node)
    for path, status, code, message in cases:
        got, headers, body = fetch(f"{lone.node.url}/sync/shards/{path}", lone.node.token)
        error = json.loads(body)["error"]
        assert (got, error["code"]) == (status, code) and message in error["message"], (path, got, error)
        assert headers["content-type"] == "application/json"
    with contextlib.closing(http.client.HTTPConnection("127.0.0.1", lone.node.port, timeout=10)) as conn:
        conn.putrequest("POST", "/sync/shards")  # 2 MiB announced: refused before a byte of it is read
        for name, value in (("Authorization", f"Bearer {lone.node.token}"), ("Content-Length", str(2 << 20))):
            conn.putheader(name, value)
        conn.endheaders()
        with conn.getresponse() as response:
            assert response.status == 413 and json.loads(response.read())["error"]["code"] == "too_large"
    status, _, body = fetch(f"{lone.node.url}/sync/shards/{node}", lone.node.token, "POST", b"{}")
    assert status == 405
    assert log_files(lone.node) == before


# -- the puller against servers in this process ----------------------------------------------------------------------


@dataclass
class Harness:
    """A puller over its own data dir, run one exchange at a time."""

    data_dir: Path
    own: str = "puller-0001"
    status: SyncStatus = field(default_factory=SyncStatus)
    clock: Clock = field(default_factory=lambda: Clock(wall_ms))

    def exchange(self, url: str) -> bool:
        async def one() -> bool:
            async with httpx2.AsyncClient(timeout=10) as http:
                replicas = Replicas(self.data_dir / "log", self.own)
                puller = Puller(self.data_dir, replicas, self.status, http, clock=self.clock)
                puller.book = load_peers(self.data_dir)
                return await puller.exchange(puller.book.peers[url])

        return anyio.run(one)

    def state(self, url: str) -> dict[str, Any]:
        return next(s for s in self.status.snapshot() if s["target"] == url)

    def copy(self, node: str) -> bytes:
        path = self.data_dir / "log" / f"{node}.jsonl"
        return path.read_bytes() if path.exists() else b""


def test_the_puller_moves_only_new_bytes_and_takes_a_compacted_shard_in_place_of_its_copy(tmp_path: Path) -> None:
    puller = Harness(tmp_path / "puller")
    with served(tmp_path / "peer") as peer:
        add_peer(puller.data_dir, peer.url, peer.token)
        first = peer.remember("first")
        peer.remember("second")
        assert puller.exchange(peer.url) and puller.copy(peer.store.node) == peer.shard()
        assert puller.state(peer.url)["bytes_in"] == len(peer.shard())
        assert puller.exchange(peer.url) and puller.state(peer.url)["bytes_in"] == len(peer.shard())  # nothing new
        peer.remember("third")
        assert puller.exchange(peer.url) and puller.copy(peer.store.node) == peer.shard()
        assert puller.state(peer.url)["bytes_in"] == len(peer.shard())  # only the new line moved
        assert puller.state(peer.url)["detail"] == {"up": True, "lag_bytes": 0, "node": peer.store.node}

        notebook = Notebook(peer.store)
        for title in ("first, again", "first, at last"):
            notebook.update(first, title=title, by=Author(agent="cli"))
        assert puller.exchange(peer.url) and puller.copy(peer.store.node) == peer.shard()
        held = peer.shard()
        lines, kept = peer.store.compact()  # drops "first, again": same first line and last op, fewer bytes
        assert kept < lines and len(peer.shard()) < len(held)
        assert puller.exchange(peer.url) and puller.copy(peer.store.node) == peer.shard()
        assert puller.state(peer.url)["bytes_in"] == len(held) + len(peer.shard())


def test_a_peer_that_is_this_server_itself_is_no_clock_measured_elsewhere(tmp_path: Path) -> None:
    """A machine learns its own URL by gossip (its peer lists it back) and pulls from it once: that answer's `Date`
    is its own clock. Counted, a day-ahead machine with one peer had two clocks, its own and the peer's, took the
    median for its own and said nothing (its clock entry went from failing to ok with the message cleared)."""
    with served(tmp_path / "peer") as peer, served(tmp_path / "itself") as itself:
        puller = Harness(tmp_path / "itself", own=itself.store.node)
        add_peer(puller.data_dir, peer.url, peer.token)
        add_peer(puller.data_dir, itself.url, itself.token)
        assert puller.exchange(peer.url) and list(puller.clock.offsets) == [f"peer {peer.url}"]
        assert puller.exchange(itself.url)
        assert next(p for p in list_peers(puller.data_dir) if p.url == itself.url).is_self
        assert list(puller.clock.offsets) == [f"peer {peer.url}"]


def longer(held: bytes) -> bytes:
    """Every op another, and one more: a resume by offset would splice it onto ours."""
    other = held.replace(b'"title":"', b'"title":"other ').replace(b'"id":"', b'"id":"X')
    return other + held.splitlines(keepends=True)[-1].replace(b'"seq":3', b'"seq":4').replace(b'"id":"', b'"id":"Y')


def as_long(held: bytes) -> bytes:
    """Another note made at the last position, its line as long as ours: the same size, not the same bytes (two
    machines writing as one node each wrote one op; the fault run, peers seeds 3000, 3007, 3011 and 3017, where it
    was taken for the copy held and its acknowledged note reached no other machine)."""
    *first, last = held.splitlines(keepends=True)
    other = b"".join(first) + last.replace(b'"title":"six"', b'"title":"ten"').replace(b'"id":"01', b'"id":"02')
    assert other != held and len(other) == len(held)
    return other


@pytest.mark.parametrize(
    ("forge", "titles", "positions"),
    [
        (longer, {"one", "two", "six", "other one", "other two", "other six"}, 3),
        (as_long, {"one", "two", "six", "ten"}, 1),
    ],
)
def test_another_history_of_a_node_is_kept_beside_the_copy_never_spliced_into_it(
    tmp_path: Path, forge: Callable[[bytes], bytes], titles: set[str], positions: int
) -> None:
    """A peer serving a different shard under a node name this puller holds (a clone wrote as that node): not a
    continuation, not a compaction, so it is kept whole as `<node>~<hex>.jsonl` and both are folded."""
    puller = Harness(tmp_path / "puller")
    with served(tmp_path / "peer") as peer:
        add_peer(puller.data_dir, peer.url, peer.token)
        for title in ("one", "two", "six"):
            peer.remember(title)
        assert puller.exchange(peer.url)
        held, node, shard_path = peer.shard(), peer.store.node, peer.store.shard_path
    assert shard_path is not None
    other = forge(held)
    shard_path.write_bytes(other)
    with served(tmp_path / "peer") as peer:
        add_peer(puller.data_dir, peer.url, peer.token)
        for _ in range(2):
            assert puller.exchange(peer.url), puller.state(peer.url)["error"]
            assert puller.copy(node) == held
        branches = list((puller.data_dir / "log").glob(f"{node}~*.jsonl"))
        assert [p.read_bytes() for p in branches] == [other]
    with Store(puller.data_dir, readonly=True) as reader:
        assert titles == {n.title for n in reader.state.iter_notes()}
        assert reader.state.forks[node].positions == positions


def test_the_puller_refuses_impersonation_skips_bad_names_and_keeps_only_complete_lines(tmp_path: Path) -> None:
    puller = Harness(tmp_path / "puller")
    good = b"".join(json.dumps({"node": "hostile-0001", "seq": n, "op": "x"}).encode() + b"\n" for n in (1, 2, 3))
    liar = b"".join(json.dumps({"node": w, "seq": n, "op": "x"}).encode() + b"\n" for n, w in ((1, "v-2"), (2, "z-3")))
    mine = json.dumps({"node": "puller-0001", "seq": 1, "op": "x"}).encode() + b"\n"
    peer = Hostile(shards={"hostile-0001": good, "v-2": liar, "../escape": good, "puller-0001": mine})
    peer.cut = lambda node, offset, body: body[:-5] if node == "hostile-0001" else body  # each range cut mid-line
    with hostile_peer(peer):
        add_peer(puller.data_dir, peer.url, new_token())
        assert not puller.exchange(peer.url)
        error = puller.state(peer.url)["error"]
        assert "refused v-2's shard" in error and "line 2 of v-2's shard says it was written by 'z-3'" in error
        assert "sent no complete line of hostile-0001's shard" in error
        assert puller.copy("hostile-0001") == good[: good.rfind(b"\n", 0, -1) + 1]  # the complete lines only
        assert puller.copy("v-2") == b"" and puller.copy("puller-0001") == b""
        # Lines of this install's own node it never wrote: another history of it (a clone), kept beside it.
        branch = f"puller-0001~{hashlib.sha256(mine).hexdigest()[:12]}.jsonl"
        assert sorted(p.name for p in tmp_path.rglob("*.jsonl")) == sorted([branch, "hostile-0001.jsonl"])
        peer.cut = lambda node, offset, body: body
        peer.shards.pop("v-2")
        assert puller.exchange(peer.url) and puller.copy("hostile-0001") == good
        assert not any("offset=0" in r for r in peer.requests[-2:] if "hostile-0001" in r)  # went on from what it held

        for listing in (b"<html>not a peer</html>", {"node": "../x", "shards": {}}, {"node": "n-1", "shards": []}):
            peer.listing = listing
            assert not puller.exchange(peer.url)
            assert "is not a Hivenote peer" in puller.state(peer.url)["error"]


def test_a_peer_that_is_down_or_refuses_the_token_is_marked_down_with_a_clear_message(tmp_path: Path) -> None:
    puller = Harness(tmp_path / "puller")
    down = f"http://127.0.0.1:{free_port()}"
    add_peer(puller.data_dir, down, new_token())
    assert not puller.exchange(down)
    assert puller.state(down)["error"] == f"cannot reach {down}: connection refused"
    recorded = load_peers(puller.data_dir).peers[down]
    assert (recorded.up, recorded.error) == (False, f"cannot reach {down}: connection refused") and recorded.changed
    with served(tmp_path / "peer") as peer:
        add_peer(puller.data_dir, peer.url, new_token())  # not a token that peer accepts
        assert not puller.exchange(peer.url)
        assert puller.state(peer.url)["error"].startswith(f"{peer.url} refused our token")
        assert load_peers(puller.data_dir).peers[peer.url].up is False
        assert not (puller.data_dir / "log").exists()


def test_a_peer_learned_by_gossip_that_takes_another_token_is_not_an_error(tmp_path: Path) -> None:
    """A-B share one token, B-C another: A learns C through B and C refuses B's token. C's notes reach A through
    B, so that pairing is how the machines are set up, not a failure: no red mark, a note that says why."""
    puller = Harness(tmp_path / "puller")
    with served(tmp_path / "b") as b, served(tmp_path / "c") as c:
        add_peer(puller.data_dir, b.url, b.token)
        add_peer(b.store.data_dir, c.url, c.token)  # b announces c
        assert puller.exchange(b.url)
        assert load_peers(puller.data_dir).peers[c.url].learned_from == b.url
        assert not puller.exchange(c.url)
        state = puller.state(c.url)
        assert not state["failing"] and state["detail"]["relayed_by"] == b.url
        assert f"its notes arrive through {b.url}" in state["detail"]["note"]
        assert load_peers(puller.data_dir).peers[c.url].error == ""
        assert not any(name.startswith(f"peer {c.url}") for name in puller.status.problems())


def test_a_peer_running_an_older_hivenote_is_told_to_update_and_nothing_is_spliced(tmp_path: Path) -> None:
    """Mixed versions refuse clearly: an older server knows no prefix proof, so nothing past offset 0 is taken."""
    puller = Harness(tmp_path / "puller")

    def line(n: int) -> str:
        return json.dumps({"v": 1, "node": "old-0001", "seq": n, "hlc": [n, 0], "op": "entity.del", "name": "x"})

    shard = (line(1) + "\n").encode()
    peer = Hostile(node="old-0001", shards={"old-0001": shard}, older=True)
    with hostile_peer(peer):
        add_peer(puller.data_dir, peer.url, new_token())
        assert puller.exchange(peer.url) and puller.copy("old-0001") == shard  # from 0 no proof is needed
        peer.shards["old-0001"] = shard + (line(2) + "\n").encode()
        assert not puller.exchange(peer.url)
        assert "runs an older Hivenote" in puller.state(peer.url)["error"]
        assert "update Hivenote on that machine" in puller.state(peer.url)["error"]
        assert puller.copy("old-0001") == shard


def test_gossip_learns_peers_with_the_announcers_token_but_not_removed_ones_or_itself(tmp_path: Path) -> None:
    puller = Harness(tmp_path / "puller")
    x, y, z = (f"http://127.0.0.1:{free_port()}" for _ in range(3))
    shared = new_token()
    for url in (x, y, z):
        add_peer(tmp_path / "peer", url, shared)
    add_peer(puller.data_dir, z, shared)
    remove_peer(puller.data_dir, z)  # the user removed it here: gossip must not bring it back
    with served(tmp_path / "peer") as peer:
        add_peer(puller.data_dir, peer.url, peer.token)
        assert puller.exchange(peer.url)
        book = load_peers(puller.data_dir)
        assert sorted(book.peers) == sorted([peer.url, x, y]) and book.removed == {z}
        assert all(book.peers[u].learned_from == peer.url and book.peers[u].token == peer.token for u in (x, y))

        itself = Harness(tmp_path / "peer-again", own=peer.store.node)  # the peer reached under another name
        add_peer(itself.data_dir, peer.url, peer.token)
        assert itself.exchange(peer.url) and load_peers(itself.data_dir).peers[peer.url].is_self
        assert not (itself.data_dir / "log").exists()


# -- the peers file and the shared token ----------------------------------------------------------------------------


def test_adding_a_peer_keeps_its_token_private_and_accepts_that_token_here(tmp_path: Path) -> None:
    token = new_token()
    peer = add_peer(tmp_path, "HTTP://Laptop.Tailnet.ts.net:7788/", token)
    assert peer.url == "http://laptop.tailnet.ts.net:7788" and "token" not in peer.public()
    assert stat.S_IMODE((tmp_path / "peers.json").stat().st_mode) == 0o600
    assert Tokens(tmp_path / "tokens.json").owner(token) == peer_token_name(token)
    add_peer(tmp_path, "http://laptop.tailnet.ts.net:7788", token)  # again: no change, no error
    assert [p.url for p in list_peers(tmp_path)] == [peer.url]
    remove_peer(tmp_path, peer.url)
    assert list_peers(tmp_path) == []
    with pytest.raises(NotFound, match=re.escape("no peer http://laptop.tailnet.ts.net:7788")):
        remove_peer(tmp_path, peer.url)


@pytest.mark.parametrize(
    ("url", "token", "message"),
    [
        ("laptop:7788", new_token(), "is not a peer URL"),
        ("ftp://laptop", new_token(), "is not a peer URL"),
        ("http://laptop:99999", new_token(), "is not a peer URL"),
        ("http://me:secret@laptop:7788", new_token(), "has no user, query or fragment"),
        ("http://laptop:7788", "short", "at least 16 printable ASCII characters"),
        ("http://laptop:7788", "a token with spaces in it", "without spaces"),
    ],
)
def test_bad_peers_are_refused_and_nothing_is_written(tmp_path: Path, url: str, token: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        add_peer(tmp_path, url, token)
    assert not (tmp_path / "peers.json").exists() and not (tmp_path / "tokens.json").exists()


def test_adopting_a_token_is_idempotent_and_refuses_a_second_token_under_the_same_name(tmp_path: Path) -> None:
    tokens = Tokens(tmp_path / "tokens.json")
    shared = new_token()
    tokens.adopt("peers", shared)
    tokens.adopt("peers", shared)
    assert tokens.owner(shared) == "peers" and [p.name for p in tokens.people()] == ["peers"]
    assert shared not in (tmp_path / "tokens.json").read_text(encoding="utf-8")  # kept as a digest only
    with pytest.raises(InvalidInput, match="already has another token"):
        tokens.adopt("peers", new_token())
    with pytest.raises(InvalidInput, match="token name"):
        tokens.adopt("", shared)
    assert tokens.owner(shared) == "peers"


def test_a_puller_never_resumes_inside_a_compacted_shard_whose_line_ends_where_its_copy_did(tmp_path: Path) -> None:
    """The owner compacted and wrote on until a line ended at the size the puller holds, with the same last 64 bytes
    (ops from one client share a long suffix): resuming there skipped the ops before it for good. The whole prefix
    is proven now, so the puller takes the new generation whole and misses nothing."""

    def mk(seq: int, title: str, pad: int) -> bytes:
        line = {"v": 1, "node": "w-0001", "seq": seq, "hlc": [1000 + seq, 0], "op": "note.set", "id": f"N{seq:04d}"}
        line["fields"] = {"kind": "fact", "title": title, "body": "x" * pad}
        return json.dumps(line, separators=(",", ":")).encode() + b"\n"

    first = mk(1, "one", 10) + mk(2, "two", 10) + mk(3, "three", 10)
    last = mk(3, "three", 10)
    pad = len(first) - len(last) - len(mk(1, "one", 10) + mk(4, "four", 5))
    compacted = mk(1, "one", 10) + mk(4, "four", 5 + pad) + last + mk(5, "five", 10)
    assert compacted[len(first) - 64 : len(first)] == first[-64:]
    puller = Harness(tmp_path / "puller")
    peer = Hostile(node="w-0001", shards={"w-0001": first})
    with hostile_peer(peer):
        add_peer(puller.data_dir, peer.url, new_token())
        assert puller.exchange(peer.url) and puller.copy("w-0001") == first
        peer.shards["w-0001"] = compacted
        puller.exchange(peer.url)
        assert puller.copy("w-0001") == compacted  # taken whole, as a new generation: nothing skipped
    with Store(puller.data_dir, readonly=True) as reader:
        assert {"one", "three", "four", "five"} <= {n.title for n in reader.state.iter_notes()}


def test_a_peer_that_goes_away_after_its_listing_is_down_not_up(tmp_path: Path) -> None:
    """Killed between its listing and its bytes (the live gossip test's kill -9 can land there): the peer answered
    this exchange once, but the failure says it cannot be reached, and peers.json must not call it up."""
    puller = Harness(tmp_path / "puller")
    good = b"".join(json.dumps({"node": "hostile-0001", "seq": n, "op": "x"}).encode() + b"\n" for n in (1, 2))

    def gone(node: str, offset: int, body: bytes) -> bytes:
        raise ConnectionAbortedError("the peer process died")  # the handler ends: the connection closes unanswered

    with hostile_peer(Hostile(shards={"hostile-0001": good}, cut=gone)) as peer:
        add_peer(puller.data_dir, peer.url, new_token())
        assert not puller.exchange(peer.url)
        assert puller.state(peer.url)["error"].startswith(f"cannot reach {peer.url}")
        book = load_peers(puller.data_dir).peers[peer.url]
        assert book.up is False
