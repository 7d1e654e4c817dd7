"""Load: 50 MCP clients (real SDK, own sessions and names) against a real `hivenote serve` for ~8 s of mixed
notebook calls; no call fails and every acknowledged write is in the log afterwards. The driver is
tests/support/load.py (bench/bench_load.py runs it for 60 s and prints the latency figures)."""

from __future__ import annotations

from pathlib import Path

from tests.support.load import TOOLS, run_load

CLIENTS = 50
SECONDS = 8


def test_fifty_concurrent_clients_see_no_error_and_lose_no_write(tmp_path: Path) -> None:
    report = run_load(tmp_path / "data", clients=CLIENTS, seconds=SECONDS, processes=2, notes=1000)

    assert dict(report.tally.errors) == {}
    assert report.lost == []
    # Each client opens with every tool (load.OPENING), however slow the machine is.
    assert all(len(report.tally.times[tool]) >= CLIENTS for tool in TOOLS), {
        t: len(v) for t, v in report.tally.times.items()
    }
    assert len(report.tally.titles) >= CLIENTS  # every client got writes through
    assert report.notes_after == 1000 + len(report.tally.titles)
