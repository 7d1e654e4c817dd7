"""Waiting for something to become true, the one way every test does it: poll a condition until it holds or a
deadline passes (no fixed sleeps standing in for "long enough"); for a process started to serve, until it answers or
exits (`wait_started`). A loop that paces work rather than waits for a condition (a soak's rounds, a flood's rate)
sleeps by itself."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT_S = 20.0  # the default deadline: generous, because the suite shares two cores with whatever else runs
INTERVAL_S = 0.02


def eventually(condition: Callable[[], object], timeout: float = WAIT_S, *, interval: float = INTERVAL_S) -> bool:
    """True as soon as condition() is truthy; False once `timeout` seconds have passed without it (for a caller
    that retries or says itself what went wrong)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def wait_until(
    condition: Callable[[], object],
    timeout: float = WAIT_S,
    what: str | Callable[[], str] = "the condition",
    *,
    interval: float = INTERVAL_S,
) -> float:
    """Wait until condition() is truthy and return the seconds it took; at the deadline fail with
    "not reached within {timeout} s: {what}" (`what` may be a function, called only then, to show the state)."""
    started = time.monotonic()
    if not eventually(condition, timeout, interval=interval):
        raise AssertionError(f"not reached within {timeout} s: {what() if callable(what) else what}")
    return time.monotonic() - started


def wait_started(
    process: subprocess.Popen[Any], ready: Callable[[], object], timeout: float = WAIT_S, log: Path | None = None
) -> float:
    """Wait until ready() is truthy (an OSError from it, as from a port not listening yet, counts as not yet) while
    `process` runs; fail at once when it exits first, and at the deadline, with the end of its `log` either way."""

    def said() -> str:
        return log.read_text(encoding="utf-8", errors="replace")[-4000:] if log is not None and log.exists() else ""

    def check() -> object:
        if process.poll() is not None:
            raise AssertionError(f"{process.args!r} exited with {process.returncode} before it was ready:\n{said()}")
        try:
            return ready()
        except OSError:
            return False

    return wait_until(check, timeout, lambda: f"{process.args!r} not ready:\n{said()}")
