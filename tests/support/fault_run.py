"""The seeded randomized fault run, a round at a time (issue 32, "What to build"; a first version: the synced-folder
transport with real Syncthing). A round is a fresh cluster (live_faults.py, live_folder.py) that takes writes from
every install through a seeded schedule of faults (kill -9, restarts, partitions: a Syncthing instance stopped,
compaction while another is away, a data dir copied, an older copy and a conflict copy of a shard), heals, and is
checked: every acknowledged write on every install, identical exports, every fork reported and explained (run_checks),
and no traceback in any server's log. Then a purge and a compaction by every install: the purged text is in no file
of any data dir or synced folder once the folders hold the same shards again. bench/bench_faults.py runs many rounds;
tests/sync/test_fault_run.py one short.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.live_faults import Cluster, hivenote, run_checks
from tests.support.live_folder import Folder

PURGE_S = 90  # a compacted shard carried to every folder, every copy held of it replaced: well within this
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):$", re.MULTILINE)


@dataclass
class Round:
    seed: int
    acknowledged: int = 0  # writes the servers acknowledged (creates and retitles)
    notes: int = 0
    converged_s: float | None = None
    faults: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    def line(self) -> str:
        took = "-" if self.converged_s is None else f"{self.converged_s:.1f} s"
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items()))
        return (
            f"seed {self.seed}: {self.acknowledged} acknowledged writes, {self.notes} notes, converged in {took}, "
            f"{len(self.violations)} violations ({faults})"
        )


def tracebacks(cluster: Cluster) -> list[str]:
    """Every server log of the round that holds a traceback: a bug said nowhere else."""
    found = []
    for install in cluster.installs:
        text = install.server.log_path.read_text(encoding="utf-8", errors="replace")
        count = len(TRACEBACK.findall(text))
        if count:
            first = text[TRACEBACK.search(text).start() :][:1500]  # type: ignore[union-attr]
            found.append(f"{install.name}: {count} traceback(s) in {install.server.log_path.name}:\n{first}")
    return found


def folder_round(root: Path, seed: int, steps: int) -> Round:
    """One round over a folder synced by real Syncthing; what it found, violations included (never raised)."""
    cluster = Folder(root, seed)
    result = Round(seed)
    try:
        cluster.run(steps)
        cluster.heal()
        checked: dict[str, Any] = run_checks(cluster)
        result.converged_s, result.notes = checked["converged_s"], checked["notes"]
        result.violations += purge_everywhere(cluster)
    except AssertionError as exc:
        result.violations.append(f"{exc}\n{cluster.explain()}")
    finally:
        cluster.close()
        result.acknowledged = sum(len(titles) for i in cluster.installs for titles in i.notes.values())
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


def purge_everywhere(cluster: Folder) -> list[str]:
    """After the checks (every server stopped): a note of one install takes a secret title, seen by every install,
    is purged on another, then every install compacts its own shard and runs again. The secret must be in no file
    once the synced folders hold the same shards (a copy held, an op cache, a search cache: none)."""
    installs = cluster.installs
    cluster.start(*installs)
    owner = cluster.pen.choice(installs)
    secret = f"SECRET-{cluster.seed}-{time.monotonic_ns()}"
    note = owner.server.call("POST", "/api/notes", {"kind": "fact", "title": secret, "body": "to purge"})["note"]
    deadline = time.monotonic() + PURGE_S
    while time.monotonic() < deadline and not all(secret in i.server.titles() for i in installs):
        time.sleep(0.25)
    if not all(secret in i.server.titles() for i in installs):
        return [f"{secret} (on {owner.name}) did not reach every install within {PURGE_S} s"]
    purger = cluster.pen.choice(installs)
    purger.server.call("POST", f"/api/notes/{note['id']}/trash")
    purger.server.call("DELETE", f"/api/notes/{note['id']}")
    cluster.say(f"purge: {owner.name}'s note {note['id']} purged on {purger.name}")
    deadline = time.monotonic() + PURGE_S
    while time.monotonic() < deadline and any(secret in i.server.titles() for i in installs):
        time.sleep(0.25)
    for install in installs:
        cluster.stop(install)
        done = hivenote("--data-dir", str(install.data_dir), "compact")
        if done.returncode != 0:
            return [f"compact on {install.name}: {done.stdout}{done.stderr}"]
    cluster.start(*installs)
    cluster.say("every install compacted its own shard")
    deadline = time.monotonic() + PURGE_S
    left = holding(cluster.root, secret.encode())
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = holding(cluster.root, secret.encode())
    for install in installs:
        cluster.stop(install)
    return [f"purged text {secret} still in {left} {PURGE_S} s after every install compacted"] if left else []
