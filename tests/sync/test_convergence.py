"""Convergence, the heart of sync: three nodes (separate data dirs, separate `hivenote serve` processes) take random
concurrent notebook and graph writes while a test transport moves shard bytes between their log folders the way
real ones do — partial copies cut mid-line, shards in random order, copies delayed behind later writes,
duplicates (sync-conflict copies, re-sent ranges) — and then every node holds the same state, with every
acknowledged write in it. Also with relaying only (A→B→C: C never hears from A directly)."""

from __future__ import annotations

import contextlib
import functools
import json
import random
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hivenote.server.storage.identity import read_node
from hivenote.server.sync.replica import Replicas, SyncRefused, complete_size
from hivenote.server.tokens import Tokens
from tests.support.live import call, free_port, health
from tests.support.system import SERVE, needs
from tests.support.wait import eventually

WAIT_S = 60
WRITES_PER_WRITER = 30
NAMES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]  # few, so nodes touch the same entities


def answers(port: int) -> bool:
    return health(port) == 200


@dataclass
class Node:
    name: str
    data_dir: Path
    port: int
    process: subprocess.Popen[bytes]
    token: str = ""
    node: str = ""
    acked: dict[str, str] = field(default_factory=dict)  # note id -> the last title this node's writer saw acked

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    def call(self, method: str, path: str, body: Any = None) -> Any:
        raw = call(self.port, self.token, method, path, body)
        return json.loads(raw) if raw and path.startswith("/api/") and "export" not in path else raw

    def state(self) -> tuple[Any, bytes]:
        notebook = json.loads(self.call("GET", "/api/export?format=notebook"))
        for volatile in ("exported_at", "node"):
            notebook.pop(volatile)
        return notebook, self.call("GET", "/api/export?format=memory-jsonl")


@pytest.fixture
@needs(SERVE)
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    started: list[Node] = []
    try:
        for name in ("a", "b", "c"):
            data_dir, port = tmp_path / name, free_port()
            argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
            log = (tmp_path / f"{name}.log").open("wb")
            with log:
                process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            started.append(Node(name, data_dir, port, process))
        for node in started:
            assert eventually(functools.partial(answers, node.port), WAIT_S), (tmp_path / f"{node.name}.log").read_text(
                encoding="utf-8"
            )
            node.token = Tokens(node.data_dir / "tokens.json").default()
            node.node = read_node(node.data_dir)
        yield started
    finally:
        for node in started:
            node.process.terminate()
        for node in started:
            try:
                node.process.wait(30)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        for node in started:
            assert node.process.returncode == 0, (tmp_path / f"{node.name}.log").read_text(encoding="utf-8")


def writer(node: Node, seed: int, errors: list[BaseException]) -> None:
    """Random notebook and graph writes; remembers what was acknowledged."""
    rng = random.Random(seed)
    try:
        for i in range(WRITES_PER_WRITER):
            roll = rng.random()
            if roll < 0.35 or not node.acked:
                title = f"{node.name} note {i}"
                body = {"kind": rng.choice(["fact", "decision", "preference"]), "title": title, "body": f"{seed}-{i}"}
                note_id = node.call("POST", "/api/notes", body)["note"]["id"]
                node.acked[note_id] = title
            elif roll < 0.5:
                note_id = rng.choice(sorted(node.acked))
                title = f"{node.name} note {i} (edited)"
                node.call("PATCH", f"/api/notes/{note_id}", {"title": title})
                node.acked[note_id] = title
            elif roll < 0.6:
                note_id = rng.choice(sorted(node.acked))
                node.call("POST", f"/api/notes/{note_id}/{rng.choice(['trash', 'restore'])}")
            elif roll < 0.75:
                name = rng.choice(NAMES)
                node.call(
                    "POST",
                    "/api/graph/entities",
                    {"entities": [{"name": name, "entityType": "company", "observations": [f"{node.name} saw {i}"]}]},
                )
            elif roll < 0.85:
                source, target = rng.sample(NAMES, 2)
                with contextlib.suppress(urllib.error.HTTPError):  # an end that does not exist here yet: refused
                    node.call(
                        "POST",
                        "/api/graph/relations",
                        {"relations": [{"from": source, "to": target, "relationType": "partners with"}]},
                    )
            elif roll < 0.93:
                with contextlib.suppress(urllib.error.HTTPError):  # unknown here yet: 404, nothing written
                    node.call(
                        "POST",
                        "/api/graph/observations",
                        {"observations": [{"entityName": rng.choice(NAMES), "contents": [f"{node.name} noted {i}"]}]},
                    )
            else:
                node.call("DELETE", f"/api/graph/entities/{rng.choice(NAMES)}")
    except BaseException as exc:  # reported by the test
        errors.append(exc)


class Transport:
    """Moves shard bytes between log folders like a sync tool: random pair, random shard, random cut."""

    def __init__(self, nodes: list[Node], routes: list[tuple[int, int]], seed: int) -> None:
        self.nodes = nodes
        self.routes = routes
        self.rng = random.Random(seed)
        self.replicas = [Replicas(n.log_dir, n.node) for n in nodes]
        self.deliveries = self.refused = self.conflict_copies = 0

    def shards(self, index: int) -> list[str]:
        own = self.nodes[index].node
        names = [p.stem for p in self.nodes[index].log_dir.glob("*.jsonl") if "sync-conflict" not in p.name]
        return sorted(n for n in names if n) or [own]

    def step(self, *, whole: bool = False) -> bool:
        """One delivery; True if bytes moved."""
        src, dst = self.rng.choice(self.routes)
        shard = self.rng.choice(self.shards(src))
        if shard == self.nodes[dst].node:
            return False  # a node's own shard only ever comes from its writer
        source = self.nodes[src].log_dir / f"{shard}.jsonl"
        have, there = self.replicas[dst].size(shard), complete_size(source)
        if there <= have:
            return False
        data = source.read_bytes()[have:there]
        roll = self.rng.random()
        if not whole and roll < 0.08 and have:
            with pytest.raises(SyncRefused):  # a range sent again: refused, nothing written
                self.replicas[dst].append(shard, data, max(0, have - 10))
            self.refused += 1
        if not whole and roll > 0.92:  # a duplicate: the sync tool's conflict copy of the whole shard so far
            copy = self.nodes[dst].log_dir / f"{shard}.sync-conflict-{self.rng.randrange(10**6)}-X.jsonl"
            tmp = copy.with_name("." + copy.name + ".tmp")
            tmp.write_bytes(source.read_bytes()[:there])
            tmp.rename(copy)
            self.conflict_copies += 1
        cut = len(data) if whole else self.rng.randint(1, len(data))  # mid-line cuts keep only whole lines
        moved = self.replicas[dst].append(shard, data[:cut], have)
        self.deliveries += bool(moved)
        return bool(moved)

    def settle(self) -> None:
        """Deliver everything along the routes until nothing is left to move."""
        while True:
            moved = False
            for src, dst in self.routes:
                for shard in self.shards(src):
                    if shard == self.nodes[dst].node:
                        continue
                    source = self.nodes[src].log_dir / f"{shard}.jsonl"
                    have, there = self.replicas[dst].size(shard), complete_size(source)
                    if there > have:
                        self.replicas[dst].append(shard, source.read_bytes()[have:there], have)
                        moved = True
            if not moved:
                return


def op_ids(log_dir: Path) -> set[tuple[str, int]]:
    found = set()
    for path in log_dir.glob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            op = json.loads(line)
            found.add((op["node"], op["seq"]))
    return found


@pytest.mark.parametrize("routes", ["mesh", "relay"])
def test_three_nodes_converge_with_every_acknowledged_write(nodes: list[Node], routes: str) -> None:
    pairs = [(i, j) for i in range(3) for j in range(3) if i != j] if routes == "mesh" else [(0, 1), (1, 2)]
    transport = Transport(nodes, pairs, seed=7)
    errors: list[BaseException] = []
    writers = [threading.Thread(target=writer, args=(n, 100 + k, errors)) for k, n in enumerate(nodes)]
    for thread in writers:
        thread.start()
    while any(t.is_alive() for t in writers):  # deliveries interleave with the writes
        transport.step()
    for thread in writers:
        thread.join()
    assert not errors, errors
    if routes == "relay":  # C only ever hears from B; then let C's own writes reach A and B the same way back
        transport.routes = [(0, 1), (1, 2), (2, 1), (1, 0)]
    transport.settle()
    assert transport.deliveries > 20 and transport.refused > 0 and transport.conflict_copies > 0

    # Every node has every op (by node and seq) and folds them to the same notebook and graph.
    everything = op_ids(nodes[0].log_dir) | op_ids(nodes[1].log_dir) | op_ids(nodes[2].log_dir)
    for node in nodes:
        assert op_ids(node.log_dir) == everything
    assert eventually(lambda: nodes[0].state() == nodes[1].state() == nodes[2].state(), WAIT_S), (
        "the nodes did not converge"
    )

    notebook, graph = nodes[0].state()
    titles = {note["id"]: note["title"] for note in notebook["notes"]}
    for node in nodes:  # every acknowledged write is there, with the last title its writer saw acked
        for note_id, title in node.acked.items():
            assert titles.get(note_id) == title, (node.name, note_id)
    assert len(titles) == sum(len(n.acked) for n in nodes)
    assert graph  # the graph writes arrived too
