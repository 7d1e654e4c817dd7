"""The S3 transport of the live fault runs (live_faults.py): every install syncs through one bucket of the real S3
server the bucket tests use (moto's server mode on 127.0.0.1, s3env.py); a partition is that server going down.
Used by tests/sync/test_integrity_live.py and the seeded randomized run (fault_run.py, bench/bench_faults.py)."""

from __future__ import annotations

import json
from pathlib import Path

from hivenote.server.storage.identity import read_node
from tests.support.live_faults import Cluster, Install
from tests.support.s3env import Moto, objects, read


class Bucket(Cluster):
    """Every install syncs through one bucket of moto's S3 server; a partition is the server going down."""

    transport = "s3"

    def __init__(self, root: Path, seed: int, moto: Moto, bucket: str) -> None:
        super().__init__(root, seed)
        self.moto, self.bucket = moto, bucket

    def configure(self, install: Install) -> None:
        install.data_dir.mkdir(parents=True)
        settings = {"s3_bucket": self.bucket, "s3_endpoint": self.moto.endpoint, "s3_region": "us-east-1"}
        (install.data_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")

    def held(self) -> dict[str, bytes]:
        """Key -> bytes of every object in the bucket (the S3 server must be up); one deleted between the listing
        and its read (an older generation a running server drops) is left out."""
        found = {}
        with self.moto.client() as client:
            for key in objects(client, self.bucket):
                try:
                    found[key] = read(client, self.bucket, key)
                except client.exceptions.NoSuchKey:
                    continue
        return found

    def copies_elsewhere(self, victim: Install) -> list[bytes]:
        return super().copies_elsewhere(victim) + list(self.held().values())

    def faults(self) -> list[str]:
        wide = ["deleted-in-bucket"] if self.wide else []
        return [*super().faults(), "vm-clone", "lose", "lose-offline", *wide]

    def cut_off(self, victim: Install) -> list[Install]:
        self.moto.stop()
        self.say("the S3 server is down")
        return []

    def reconnect(self, away: list[Install]) -> None:
        self.heal_transport()

    def heal_transport(self) -> None:
        if self.moto.server is None:
            self.moto.start()
            self.say("the S3 server is up again")

    def fault(self, kind: str) -> None:
        if kind == "deleted-in-bucket":
            self.deleted_in_bucket()
            return
        assert kind == "partition", kind
        self.moto.stop()
        self.say("partition: the S3 server is down")
        self.writes(4)
        if self.rng.random() < 0.5:
            self.kill()
        self.heal_transport()

    def deleted_in_bucket(self) -> None:
        """Every object of one install's node deleted from the bucket (a person, a lifecycle rule), its owner running
        or stopped: a machine holding a copy puts it back, the owner goes on as itself. Nothing is excused."""
        victim = self.rng.choice(self.installs)
        if victim.running and self.rng.random() < 0.5:
            self.stop(victim)
        node = read_node(victim.data_dir)
        with self.moto.client() as client:
            keys = sorted(objects(client, self.bucket, f"hivenote/{node}/"))
            if keys:
                client.delete_objects(Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in keys]})
        self.writes(3)
        self.say(f"{len(keys)} objects of {victim.name}'s node {node} deleted from the bucket")
