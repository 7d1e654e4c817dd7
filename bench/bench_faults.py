"""The seeded randomized fault run over a folder synced by real Syncthing (issue 32, a first version): N rounds, each
a fresh cluster of `hivenote serve` processes taking writes through a seeded schedule of faults (kill -9, restarts,
partitions, compaction while another is away, a copied data dir, an older copy and a conflict copy of a shard),
healed and checked (tests/support/fault_run.py). Prints a line per round and the totals: rounds, acknowledged
writes, violations; exits 1 when any round found one.

    python bench/bench_faults.py --rounds 30 --seed 1000 --steps 26
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support, from a checkout

from tests.support.fault_run import folder_round


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1000, help="the first round's seed; round i uses seed + i")
    parser.add_argument("--steps", type=int, default=26, help="steps per round, about half of them faults")
    args = parser.parse_args()
    acknowledged, violations, started = 0, 0, time.monotonic()
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="hivenote-faults-") as tmp:
            found = folder_round(Path(tmp), args.seed + i, args.steps)
        acknowledged += found.acknowledged
        violations += len(found.violations)
        print(f"round {i + 1}/{args.rounds} {found.line()}", flush=True)
        for violation in found.violations:
            print(f"  VIOLATION: {violation}", flush=True)
    print(
        f"folder: {args.rounds} rounds, {acknowledged} acknowledged writes, {violations} violations "
        f"({time.monotonic() - started:.0f} s)"
    )
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
