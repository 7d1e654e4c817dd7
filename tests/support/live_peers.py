"""The peer-to-peer transport of the live fault runs (live_faults.py): every install pulls from every other over HTTP
(real `hivenote serve` processes on 127.0.0.1) with the one peer token the user's machines share. A partition is a
server stopped while the others write. Used by tests/sync/test_integrity_live.py and the seeded randomized run
(fault_run.py, bench/bench_faults.py)."""

from __future__ import annotations

from pathlib import Path

from hivenote.server.sync.peer import add_peer
from hivenote.server.tokens import new_token
from tests.support.live_faults import Cluster, Install


class Peers(Cluster):
    """Every install pulls from every other over HTTP with the one peer token the user's machines share."""

    transport = "peers"

    def __init__(self, root: Path, seed: int) -> None:
        super().__init__(root, seed)
        self.token = new_token()

    def configure(self, install: Install) -> None:
        for other in self.installs:
            if other is not install:
                add_peer(install.data_dir, other.server.url, self.token)
                add_peer(other.data_dir, install.server.url, self.token)

    def configured_clone(self, source: Install, clone: Install) -> None:
        self.configure(clone)  # the copy's peers.json names the source's peers; everyone learns the copy's URL

    def faults(self) -> list[str]:
        return [*super().faults(), "vm-clone", "lose", "lose-offline"]

    def fault(self, kind: str) -> None:
        assert kind == "partition", kind
        victim = self.rng.choice(self.running())
        self.stop(victim)
        self.writes(3)
        self.say(f"partition: {victim.name} away while the others wrote")
        if self.rng.random() < 0.5:
            self.start(victim)
            self.say(f"{victim.name} back")
