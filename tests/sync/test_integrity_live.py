"""Log identity and integrity with real processes (issue 13, "Proof"; OPLOG.md "Node identity" and "Forks"): on each
transport (peers, an S3 server on loopback, a folder synced by real Syncthing), real `hivenote serve` processes take
writes from every install through a seeded schedule of faults: kill -9 and restarts, an own shard deleted while stopped
(starting again with the other copies reachable, or cut off from them), data dirs copied and started as another
install on the same host (and, with peers, cloned faithfully down to the inode claims, as a cloned VM disk is),
`hivenote compact` while another install is away, partitions (servers stopped, the bucket down, a sync tool stopped)
and, in the synced folder, files replaced by an older copy or joined by a conflict copy.

After healing (every server running, every transport up; waited for by polling with a deadline): every acknowledged
write is served by every install (a write is excused only if it was in a deleted own shard and in no other copy
when it was deleted), `hivenote export` gives the same bytes on every install (but for the two lines naming the
exporter and the time), every position holding two contents in an install's log is reported as a fork in its sync
status, and every fork or move to a new node id reported is explained by something the schedule did.

The seed is printed with every step; a failure repeats the schedule. HIVENOTE_LIVE_SEEDS=1,2,3 runs other seeds.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live_bucket import Bucket
from tests.support.live_faults import reported, run_checks
from tests.support.live_folder import Folder
from tests.support.live_peers import Peers
from tests.support.s3env import Moto, moto_sandbox

STEPS = 26  # half of them faults: about a minute per transport on a 2-core machine


def seeds(default: int) -> list[int]:
    raw = os.environ.get("HIVENOTE_LIVE_SEEDS", "")
    return [int(s) for s in raw.split(",") if s.strip()] or [default]


# -- peers ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", seeds(11))
def test_peers_keep_every_acknowledged_write_through_faults(tmp_path: Path, seed: int) -> None:
    with reported(Peers(tmp_path, seed)) as cluster:
        cluster.run(STEPS)
        cluster.heal()
        print(run_checks(cluster))


# -- an S3 server on loopback ---------------------------------------------------------------------------------------


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    """The S3 server on loopback, in an AWS environment (inherited by the servers) that reaches nothing else."""
    with moto_sandbox(monkeypatch, tmp_path) as server:
        yield server


@pytest.mark.parametrize("seed", seeds(12))
def test_a_bucket_keeps_every_acknowledged_write_through_faults(tmp_path: Path, moto: Moto, seed: int) -> None:
    bucket = f"hive-{secrets.token_hex(4)}"
    with moto.client() as client:
        client.create_bucket(Bucket=bucket)
    with reported(Bucket(tmp_path, seed, moto, bucket)) as cluster:
        cluster.run(STEPS)
        cluster.heal()
        print(run_checks(cluster))


# -- a folder synced by real Syncthing ------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", seeds(13))
def test_a_synced_folder_keeps_every_acknowledged_write_through_faults(tmp_path: Path, seed: int) -> None:
    with reported(Folder(tmp_path, seed)) as cluster:
        cluster.run(STEPS)
        cluster.heal()
        print(run_checks(cluster))
