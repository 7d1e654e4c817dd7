"""Load: many concurrent MCP clients (the real SDK client over streamable HTTP, each with its own session and
clientInfo name) against a real `hivenote serve` process, doing a mixed notebook workload; afterwards the server is
stopped and the log folded again to check every acknowledged write is there. Not a test: prints figures
(tests/reliability/test_load.py runs the same driver, tests/support/load.py, smaller, and asserts).

    python bench/bench_load.py [--clients 50] [--seconds 60] [--processes 5] [--notes 10000]

The clients run as a few processes with many async clients each, so the client side is not one interpreter's
bottleneck; the client and server CPU are printed so a reader can see which side was saturated.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # run as a script, the project root is put on sys.path
    from tests.support.load import TOOLS, Report, run_load
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.support.load import TOOLS, Report, run_load


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def print_report(report: Report, clients: int, notes: int) -> None:
    tally = report.tally
    wall = tally.wall_s
    print(f"{clients} MCP clients in {report.client_processes} processes, {wall:.1f} s, {notes:,} seeded notes")
    print(f"{'tool':<16}{'calls':>8}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    for name in TOOLS:
        v = [x * 1e3 for x in tally.times[name]]
        print(f"{name:<16}{len(v):>8}{pct(v, 0.5):>9.1f}{pct(v, 0.95):>9.1f}{pct(v, 0.99):>9.1f}{max(v or [0]):>9.1f}")
    every = [x * 1e3 for v in tally.times.values() for x in v]
    print(f"{'all':<16}{len(every):>8}{pct(every, 0.5):>9.1f}{pct(every, 0.95):>9.1f}{pct(every, 0.99):>9.1f}", end="")
    print(f"{max(every or [0]):>9.1f}")
    print(f"total calls {report.calls}, throughput {report.calls / wall:.0f} calls/s")
    print(f"errors {sum(tally.errors.values())}")
    for text, count in tally.errors.most_common():
        print(f"  {count} x {text[:300]}")
    writes = len(tally.titles)
    print(f"acknowledged notes {writes} ({len(tally.forgotten)} forgotten), lost writes {len(report.lost)}")
    for line in report.lost[:20]:
        print(f"  {line}")
    print(f"notes in the log afterwards {report.notes_after:,}; server RSS at the end {report.server_rss_mb:.0f} MB")
    cores = os.cpu_count() or 1
    busy = report.elapsed_s
    print(
        f"CPU over the run ({busy:.1f} s with the clients' start-up): server {report.server_cpu_s / busy:.2f} cores, "
        f"clients {tally.cpu_s / busy:.2f} cores (of {cores})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--notes", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hivenote-load-") as tmp:
        report = run_load(
            Path(tmp) / "data", clients=args.clients, seconds=args.seconds, processes=args.processes, notes=args.notes
        )
    print_report(report, args.clients, args.notes)
    if report.tally.errors or report.lost:
        sys.exit(1)


if __name__ == "__main__":
    main()
