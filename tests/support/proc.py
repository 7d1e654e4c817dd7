"""A process's footprint as Linux reports it in /proc (resident memory, CPU seconds), and waiting until its
start-up work is done: shared by the benchmarks that run `hivenote serve` or the tray as a separate process."""

from __future__ import annotations

import os
import time
from pathlib import Path

CLK = os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process and its threads so far."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def settle(pid: int, window: float = 5, busy: float = 0.05, limit: float = 180) -> None:
    """Wait until the process spends less than `busy` of a `window` on the CPU (start-up work is done)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_s(pid)
        time.sleep(window)
        if cpu_s(pid) - before < busy * window:
            return
    raise RuntimeError(f"still busy after {limit} s")
