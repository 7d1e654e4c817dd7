"""A short seed per transport of the randomized fault run (tests/support/fault_run.py; the long run is
`python bench/bench_faults.py`): a folder synced by real Syncthing, peers, and a bucket of the real S3 server. kill -9
(with creates in flight too), partitions, clocks set wrong both ways, a lost own shard, a backup put back, concurrent
edits and the rest; then every acknowledged write on every install, identical exports, no duplicate, forks and
branches explained, converged within 15 s of healing, no traceback in any server log, and the purged text in no file
or object anywhere once every install compacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fault_run import TRANSPORTS, fault_round

SEEDS = {"folder": 32, "peers": 33, "s3": 34}
STEPS = 12  # about half of them faults: every kind at least once in each transport's plan


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_short_seed_of_the_fault_run_finds_no_violation(tmp_path: Path, transport: str) -> None:
    found = fault_round(transport, tmp_path, SEEDS[transport], STEPS)
    print(found.line())
    assert found.acknowledged > 0
    assert not found.violations, "\n\n".join(found.violations)
