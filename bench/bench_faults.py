"""The seeded randomized fault run over the three transports (issue 32): a folder synced by real Syncthing, peers
(real `hivenote serve` processes on 127.0.0.1), and a bucket of the real S3 server the bucket tests use. N rounds per
transport, each a fresh cluster of `hivenote serve` processes taking writes and concurrent edits through a seeded
schedule of faults (kill -9, with creates in flight too, restarts, partitions or the transport down, clocks a day
ahead and 20 minutes behind, an own shard deleted, a backup put back, a data dir copied, compaction while another is
away; with the folder an older copy and a conflict copy of a shard), healed, checked, then a purge and a compaction
by every install (tests/support/fault_run.py). Prints a line per round and, per transport: rounds, acknowledged
writes, violations and the convergence times after healing; exits 1 when any round found a violation.

    python bench/bench_faults.py --rounds 30 --seed 1000 --steps 26
    python bench/bench_faults.py --transport s3 --rounds 5
    python bench/bench_faults.py --keep /tmp/kept    # a round that finds a violation leaves its folder there
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support, from a checkout

from tests.support.fault_run import TRANSPORTS, fault_round


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30, help="rounds per transport")
    parser.add_argument("--seed", type=int, default=1000, help="the first round's seed; round i uses seed + i")
    parser.add_argument("--steps", type=int, default=26, help="steps per round, about half of them faults")
    parser.add_argument("--transport", choices=TRANSPORTS, action="append", help="one transport (repeatable); all")
    parser.add_argument(
        "--keep", type=Path, help="copy the folder of a round that found a violation here (servers' logs, data dirs)"
    )
    args = parser.parse_args()
    transports = args.transport or list(TRANSPORTS)
    acknowledged = dict.fromkeys(transports, 0)
    violations = dict.fromkeys(transports, 0)
    rounds = dict.fromkeys(transports, 0)
    took: dict[str, list[float]] = {t: [] for t in transports}
    started = time.monotonic()

    def totals(transport: str) -> str:
        times = took[transport]
        spread = (
            f"converged in {statistics.median(times):.1f} s median, {max(times):.1f} s at most"
            if times
            else "no round converged"
        )
        return (
            f"{transport}: {rounds[transport]} rounds, {acknowledged[transport]} acknowledged writes, "
            f"{violations[transport]} violations, {spread}"
        )

    for i in range(args.rounds):  # the transports take turns: a run cut short has as many rounds of each
        for transport in transports:
            with tempfile.TemporaryDirectory(prefix=f"hivenote-faults-{transport}-") as tmp:
                found = fault_round(transport, Path(tmp), args.seed + i, args.steps)
                if found.violations and args.keep is not None:
                    kept = args.keep / f"{transport}-{args.seed + i}"
                    try:
                        shutil.copytree(tmp, kept, symlinks=True, dirs_exist_ok=True)
                    except shutil.Error as exc:  # a socket or a file gone meanwhile: the rest is copied
                        print(f"  (not copied: {len(exc.args[0])} files)", flush=True)
                    print(f"  kept the round's folder: {kept}", flush=True)
            rounds[transport] += 1
            acknowledged[transport] += found.acknowledged
            violations[transport] += len(found.violations)
            if found.converged_s is not None:
                took[transport].append(found.converged_s)
            print(f"round {i + 1}/{args.rounds} {found.line()}", flush=True)
            for violation in found.violations:
                print(f"  VIOLATION: {violation}", flush=True)
            print(f"  so far {totals(transport)} ({time.monotonic() - started:.0f} s in all)", flush=True)
    print("")
    for transport in transports:
        print(totals(transport))
    return 1 if any(violations.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
