"""A `hivenote serve` process whose wall clock is wrong, as a machine's is (libfaketime): for the clock-skew tests and
the skew faults of the live fault runs (live_faults.py)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.system import needs


@needs("libfaketime (Debian package faketime; scripts/install-test-deps installs it)")
def libfaketime() -> str:
    libraries = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))
    assert libraries, "libfaketime is missing: scripts/install-test-deps installs it (Debian package faketime)"
    return str(libraries[0])


def skewed(ahead: str) -> dict[str, str]:
    """The environment of a process whose wall clock is `ahead` (libfaketime: time(), gettimeofday,
    clock_gettime(CLOCK_REALTIME)). Only the wall clock: a machine whose clock is wrong still counts seconds right
    (CLOCK_MONOTONIC). With the monotonic clock faked too, a timed wait never ended (the kernel waited for a deadline a
    day ahead): the server's main thread, waiting 0.05 s at a time for its server thread to start, hung whenever it
    got there first, and SIGTERM could not stop it."""
    return {
        **os.environ,
        "LD_PRELOAD": libfaketime(),
        "FAKETIME": ahead,
        "FAKETIME_DONT_RESET": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
