"""The synced-folder transport of the live fault runs (live_faults.py): two machines' folders synced by two real
Syncthing instances, and the faults only a sync tool brings (an older copy put in place of a shard, a conflict copy).
Used by tests/sync/test_integrity_live.py and the seeded randomized run (fault_run.py, bench/bench_faults.py)."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path

from hivenote.server.storage.identity import read_node
from hivenote.server.sync.folder import use_folder
from tests.support.live_faults import Cluster, Install
from tests.support.syncthing import START_S, Syncthing, syncthing_pair
from tests.support.wait import wait_until


class Folder(Cluster):
    """Two machines' folders synced by two Syncthing instances; a and b each keep their log in one, and a copy of a
    data dir (same host) keeps it in the same folder as its source. A partition is a Syncthing instance stopped."""

    transport = "folder"
    initial = 2
    max_installs = 4
    log_in_data_dir = False

    def __init__(self, root: Path, seed: int) -> None:
        super().__init__(root, seed)
        self.folders = [root / "Sync-a", root / "Sync-b"]
        self.syncthing: list[Syncthing] = []
        self.stack = contextlib.ExitStack()

    def configure(self, install: Install) -> None:
        use_folder(install.data_dir, self.folders[len(self.installs) - 1])

    def prepare(self) -> None:
        self.syncthing = list(self.stack.enter_context(syncthing_pair(self.root, *self.folders)))

    def close(self) -> None:
        super().close()
        self.stack.close()

    def kept_aside(self, install: Install) -> list[bytes]:
        """The copies an install holds of every shard it saw in the folder (`<data dir>/sync/held`, sync/held.py): a
        shard deleted from the folder is put back from them, the deleted machine's own included once it writes as a
        new node id."""
        return [p.read_bytes() for p in sorted((install.data_dir / "sync" / "held").glob("*.jsonl"))]

    def sync_tool_of(self, install: Install) -> Syncthing:
        return self.syncthing[self.folders.index(self.log_dir(install))]

    def faults(self) -> list[str]:
        lose = ["lose", "lose-offline"] if self.wide else []  # an own shard deleted: the held copies put it back
        return [*super().faults(), "older-copy", "conflict-copy", *lose]

    def go_away(self, victim: Install) -> None:
        other = next(s for s in self.syncthing if s is not self.sync_tool_of(victim))
        other.stop()
        self.say(f"syncthing {other.name} stopped: the other machine is away")

    def come_back(self, victim: Install) -> None:
        self.heal_transport()

    def heal_transport(self) -> None:
        """Start the stopped instances; a (the one that dials) last, so it dials a b that listens already: b never
        dials, and a dials again only about once a minute."""
        a, b = self.syncthing
        stopped = [s.name for s in self.syncthing if s.process is None]
        if not stopped:
            return
        if a.process is not None:
            a.stop()
        for instance in (b, a):
            if instance.process is None:
                instance.start()
                wait_until(instance.answers, START_S, instance.log_tail)
        wait_until(lambda: a.connected_to(b) and b.connected_to(a), START_S, "syncthing a and b connected again")
        self.say(f"syncthing {', '.join(stopped)} running again")

    def fault(self, kind: str) -> None:
        if kind == "partition":
            instance = self.rng.choice(self.syncthing)
            instance.stop()
            self.say(f"partition: syncthing {instance.name} stopped")
            self.writes(4)
            self.heal_transport()
        elif kind == "older-copy":
            self.older_copy()
        else:
            assert kind == "conflict-copy", kind
            self.conflict_copy()

    def older_copy(self) -> None:
        """The sync tool puts an older copy of a running install's own shard in its place (a version from the other
        machine, or a backup it restores); the install writes next. Nothing it acknowledged may go."""
        victim = self.rng.choice(self.running())
        self.writes(2, [victim])
        shard = self.log_dir(victim) / f"{read_node(victim.data_dir)}.jsonl"
        data = shard.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 1 if data.count(b"\n") > 1 else 0
        temp = shard.with_name(f".syncthing.{shard.name}.tmp")
        temp.write_bytes(data[:cut])
        temp.replace(shard)
        self.writes(2, [victim])
        self.say(f"older copy of {victim.name}'s shard put in its place ({cut} of {len(data)} bytes)")

    def conflict_copy(self) -> None:
        """A sync-conflict copy of some shard (an older version of it) appears in one folder."""
        folder = self.rng.choice(self.folders)
        shards = sorted(p for p in folder.glob("*.jsonl") if p.read_bytes().count(b"\n") > 1 and "." not in p.stem)
        if not shards:
            return
        shard = self.pen.choice(shards)
        data = shard.read_bytes()
        older = data[: data.index(b"\n", len(data) // 2) + 1]
        conflict = folder / f"{shard.stem}.sync-conflict-20261201-101010-{secrets.token_hex(3).upper()}.jsonl"
        temp = folder / f".syncthing.{conflict.name}.tmp"
        temp.write_bytes(older)
        temp.replace(conflict)
        self.say(f"conflict copy {conflict.name} in {folder.name} ({len(older)} of {len(data)} bytes)")
