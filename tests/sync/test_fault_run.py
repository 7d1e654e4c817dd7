"""A short seed of the randomized fault run over a folder synced by real Syncthing (tests/support/fault_run.py; the
long run is `python bench/bench_faults.py`): kill -9, partitions and the rest, then every acknowledged write on every
install, identical exports, forks explained, no traceback in any server log."""

from __future__ import annotations

from pathlib import Path

from tests.support.fault_run import folder_round

SEED = 32
STEPS = 12


def test_a_short_seed_of_the_folder_fault_run_finds_no_violation(tmp_path: Path) -> None:
    found = folder_round(tmp_path, SEED, STEPS)
    print(found.line())
    assert found.acknowledged > 0
    assert not found.violations, "\n\n".join(found.violations)
