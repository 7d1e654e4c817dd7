"""Waiting for something to become true, the one way every test does it: poll a condition until it holds or a
deadline passes (no fixed sleeps standing in for "long enough")."""

from __future__ import annotations

import time
from collections.abc import Callable

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
