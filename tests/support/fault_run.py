"""The seeded randomized fault run, a round at a time (issue 32, "What to build"; a first version: the synced-folder
transport with real Syncthing). A round is a fresh cluster (live_faults.py, live_folder.py) that takes writes from
every install through a seeded schedule of faults (kill -9, restarts, partitions: a Syncthing instance stopped,
compaction while another is away, a data dir copied, an older copy and a conflict copy of a shard), heals, and is
checked: every acknowledged write on every install, identical exports, every fork reported and explained (run_checks),
and no traceback in any server's log. bench/bench_faults.py runs many rounds; tests/sync/test_fault_run.py one short.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.live_faults import Cluster, run_checks
from tests.support.live_folder import Folder

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
    except AssertionError as exc:
        result.violations.append(f"{exc}\n{cluster.explain()}")
    finally:
        cluster.close()
        result.acknowledged = sum(len(titles) for i in cluster.installs for titles in i.notes.values())
        result.faults = dict(cluster.events)
    result.violations += tracebacks(cluster)
    return result
