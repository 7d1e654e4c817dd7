"""The seeded randomized fault run, a round at a time (issue 32, "What to build"), over each of the three transports:
a folder synced by real Syncthing (live_folder.py), peers (real `hivenote serve` processes pulling from each other on
127.0.0.1, live_peers.py) and a bucket of the real S3 server the bucket tests use (live_bucket.py). A round is a fresh
cluster (live_faults.py) that takes writes and concurrent edits from every install through a seeded schedule of
faults (kill -9, with creates in flight too, restarts, partitions or the transport down, clocks a day ahead and 20
minutes behind, an own shard deleted on a stopped install, a backup put back, a data dir copied, compaction while
another is away; with the folder an older copy and a conflict copy of a shard), heals, and is checked: every
acknowledged write on every install, identical exports, no note twice, every body one that was written, every fork
reported and explained, no branch file without two histories behind it (run_checks), converged within
`CONVERGE_S` of healing, and no traceback in any server's log. Then a purge and a compaction by every install: the
purged text is in no file of any data dir, synced folder or bucket. bench/bench_faults.py runs many rounds;
tests/sync/test_fault_run.py one short seed per transport.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.live_bucket import Bucket
from tests.support.live_faults import Cluster, hivenote, run_checks
from tests.support.live_folder import Folder
from tests.support.live_peers import Peers
from tests.support.peer_nodes import Node
from tests.support.s3env import moto_sandbox
from tests.support.wait import eventually

TRANSPORTS = ("folder", "peers", "s3")
PURGE_S = 90  # a compacted shard carried to every folder, every copy held of it replaced: well within this
CONVERGE_S = 15.0  # the target (issue 32): every round converged within this of its fault healing
TRACEBACK = re.compile(r"^(Traceback \(most recent call last\):|Fatal Python error: .*)$", re.MULTILINE)


@dataclass
class Round:
    seed: int
    transport: str = "folder"
    acknowledged: int = 0  # writes the servers acknowledged (creates, retitles, concurrent edits)
    notes: int = 0
    converged_s: float | None = None
    faults: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def line(self) -> str:
        took = "-" if self.converged_s is None else f"{self.converged_s:.1f} s"
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (
            f"{self.transport} seed {self.seed}: {self.acknowledged} acknowledged writes, {self.notes} notes, "
            f"converged in {took}, "
            f"{len(self.violations)} violations ({faults})"
        )


def log_end(server: Node) -> str:
    """The last lines of a server's log ("(no log)" for one that never started)."""
    try:
        return server.log_tail()[-1500:]
    except OSError:
        return "(no log)"


def tracebacks(cluster: Cluster) -> list[str]:
    """Every server log of the round that holds a traceback, or a crash's stacks: a bug said nowhere else."""
    found = []
    for install in cluster.installs:
        text = install.server.log_path.read_text(encoding="utf-8", errors="replace")
        count = len(TRACEBACK.findall(text))
        if count:
            first = text[TRACEBACK.search(text).start() :][:1500]  # type: ignore[union-attr]
            found.append(f"{install.name}: {count} traceback(s) in {install.server.log_path.name}:\n{first}")
    return found


class Environ:
    """os.environ changed for a round (the servers inherit it) and put back after: pytest's monkeypatch, for a run
    outside pytest."""

    def __init__(self) -> None:
        self.saved: dict[str, str | None] = {}

    def setenv(self, name: str, value: str) -> None:
        self.saved.setdefault(name, os.environ.get(name))
        os.environ[name] = value

    def delenv(self, name: str, raising: bool = True) -> None:
        self.saved.setdefault(name, os.environ.get(name))
        os.environ.pop(name, None)

    def undo(self) -> None:
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def cluster_of(transport: str, root: Path, seed: int) -> Iterator[Cluster]:
    """A fresh cluster of the transport (with a bucket: the S3 server, in an AWS environment reaching nothing else)."""
    if transport == "folder":
        yield Folder(root, seed)
    elif transport == "peers":
        yield Peers(root, seed)
    else:
        assert transport == "s3", transport
        environ = Environ()
        try:
            with moto_sandbox(environ, root) as moto:
                bucket = f"hive-{secrets.token_hex(4)}"
                with moto.client() as client:
                    client.create_bucket(Bucket=bucket)
                yield Bucket(root, seed, moto, bucket)
        finally:
            environ.undo()


def fault_round(transport: str, root: Path, seed: int, steps: int) -> Round:
    """One round over the transport; what it found, violations included (never raised)."""
    with cluster_of(transport, root, seed) as cluster:
        cluster.wide = True
        result = Round(seed, transport)
        try:
            cluster.run(steps)
            cluster.heal()
            checked: dict[str, Any] = run_checks(cluster)
            result.converged_s, result.notes = checked["converged_s"], checked["notes"]
            if checked["converged_s"] > CONVERGE_S:
                result.violations.append(
                    f"converged {checked['converged_s']:.1f} s after healing, over the {CONVERGE_S:.0f} s target\n"
                    f"{cluster.explain()}"
                )
            result.violations += purge_everywhere(cluster)
        except AssertionError as exc:
            result.violations.append(f"{exc}\n{cluster.explain()}")
        except Exception as exc:  # a server's 500, a refused call, the harness itself: the round says where it stopped
            logs = "\n".join(f"--- {i.name}'s log, its end:\n{log_end(i.server)}" for i in cluster.installs)
            result.violations.append(
                f"the round stopped: {exc!r}\n{traceback.format_exc()}\n{cluster.explain()}\n{logs}"
            )
        finally:
            cluster.close()
            titles = sum(len(titles) for i in cluster.installs for titles in i.notes.values())
            result.acknowledged = titles + cluster.edits_acked
            result.faults = dict(cluster.events)
        result.violations += tracebacks(cluster)
    return result


def holding(root: Path, secret: bytes) -> list[str]:
    """Every file under `root` (data dirs, synced folders; not Syncthing's own database) whose bytes hold `secret`."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and "syncthing" not in path.relative_to(root).parts[0]:
            try:
                if secret in path.read_bytes():
                    found.append(str(path.relative_to(root)))
            except OSError:
                continue
    return found


def everywhere_holding(cluster: Cluster, secret: bytes) -> list[str]:
    """Every file of the round (`holding`) and, with a bucket, every object whose bytes hold `secret`."""
    found = holding(cluster.root, secret)
    if isinstance(cluster, Bucket):
        found += [f"bucket:{key}" for key, data in sorted(cluster.held().items()) if secret in data]
    return found


def purge_everywhere(cluster: Cluster) -> list[str]:
    """After the checks (every server stopped): a note of one install takes a secret title, seen by every install,
    is purged on another, then every install compacts its own shard and runs again. The secret must be in no file
    once the synced folders hold the same shards (a copy held, an op cache, a search cache: none)."""
    installs = cluster.installs
    cluster.start(*installs)
    owner = cluster.pen.choice(installs)
    secret = f"SECRET-{cluster.seed}-{time.monotonic_ns()}"
    note = owner.server.call("POST", "/api/notes", {"kind": "fact", "title": secret, "body": "to purge"})["note"]
    if not eventually(lambda: all(secret in i.server.titles() for i in installs), PURGE_S, interval=0.25):
        return [f"{secret} (on {owner.name}) did not reach every install within {PURGE_S} s"]
    purger = cluster.pen.choice(installs)
    purger.server.call("POST", f"/api/notes/{note['id']}/trash")
    purger.server.call("DELETE", f"/api/notes/{note['id']}")
    cluster.say(f"purge: {owner.name}'s note {note['id']} purged on {purger.name}")
    eventually(lambda: not any(secret in i.server.titles() for i in installs), PURGE_S, interval=0.25)
    for install in installs:
        cluster.stop(install)
        done = hivenote("--data-dir", str(install.data_dir), "compact")
        if done.returncode != 0:
            return [f"compact on {install.name}: {done.stdout}{done.stderr}"]
    cluster.start(*installs)
    cluster.say("every install compacted its own shard")
    left = everywhere_holding(cluster, secret.encode())

    def gone() -> bool:
        nonlocal left
        left = everywhere_holding(cluster, secret.encode())
        return not left

    eventually(gone, PURGE_S, interval=0.5)
    for install in installs:
        cluster.stop(install)
    return [f"purged text {secret} still in {left} {PURGE_S} s after every install compacted"] if left else []
