"""A process's footprint as Linux reports it in /proc (resident memory, CPU seconds), and waiting until its
start-up work is done: shared by the benchmarks that run `hivenote serve` or the tray as a separate process."""

from __future__ import annotations

import os
import time
from pathlib import Path

CLK = os.sysconf("SC_CLK_TCK")


def status_mb(pid: int, key: str) -> float:
    """A size the process's /proc status gives in kB (VmRSS, VmHWM, ...), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key}")


def rss_mb(pid: int) -> float:
    return status_mb(pid, "VmRSS")


def peak_mb(pid: int) -> float:
    """The most the process held resident (VmHWM) since it started or since `reset_peak`."""
    return status_mb(pid, "VmHWM")


def reset_peak(pid: int) -> None:
    """From now on VmHWM is the peak since this moment (Linux: 5 to clear_refs)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5", encoding="utf-8")


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
