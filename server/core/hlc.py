"""Hybrid logical clock (Kulkarni et al. 2014) with clock-skew detection.

Pure: imports only the standard library; the wall clock is passed in.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def wall_ms() -> int:
    """The wall clock, in ms since the epoch: the one place the code reads it (tests and the HLC take it as a
    parameter; everything else calls this)."""
    return time.time_ns() // 1_000_000


DEFAULT_MAX_OFFSET_MS = 3_600_000  # a remote stamp further ahead than this is skew, not time
SKEW_REPORT_MS = 60_000  # this machine's clock off by more than this (measured against others) is reported


@dataclass
class SkewReport:
    """The largest lead (ms) seen per remote node whose stamps ran ahead of our wall clock beyond the limit."""

    ahead_ms: dict[str, int] = field(default_factory=dict)

    def note(self, node: str, ahead: int) -> None:
        if ahead > self.ahead_ms.get(node, 0):
            self.ahead_ms[node] = ahead


class Clock:
    """Issues strictly increasing `(wall_ms, counter)` stamps and follows stamps seen from other nodes.

    A stamp of another node further ahead than `max_offset_ms` is reported and not followed at all: one machine's
    wrong clock never drags the others'. This install's own stamps (`own_nodes`) are always followed, so its later
    edits sort after its earlier ones even when its clock was ahead then and is right now."""

    def __init__(self, now_ms: Callable[[], int], max_offset_ms: int = DEFAULT_MAX_OFFSET_MS) -> None:
        self._now = now_ms
        self.max_offset_ms = max_offset_ms
        self.wall = 0
        self.counter = 0
        self.skew = SkewReport()
        self.own_nodes: set[str] = set()
        self.own_ahead_ms = 0  # how far this install's own logged stamps ran ahead of its clock (0: never)
        self.offsets: dict[str, int] = {}  # a clock elsewhere (a peer, the bucket) minus ours, measured, in ms

    def now(self) -> int:
        return self._now()

    def tick(self) -> tuple[int, int]:
        """A stamp for a new local op, later than every stamp issued or observed so far."""
        now = self._now()
        if now > self.wall:
            self.wall, self.counter = now, 0
        else:
            self.counter += 1
        return self.wall, self.counter

    def observe(self, wall: int, counter: int, node: str) -> None:
        """Advance past a stamp read from a log, unless another node's is implausibly far ahead (then only report
        it)."""
        now = self._now()
        if wall > now + self.max_offset_ms:
            if node not in self.own_nodes:
                self.skew.note(node, wall - now)
                return
            self.own_ahead_ms = max(self.own_ahead_ms, wall - now)
        if (wall, counter) > (self.wall, self.counter):
            self.wall, self.counter = wall, counter

    def note_offset(self, source: str, offset_ms: int) -> None:
        """What a clock elsewhere said (an HTTP `Date` from a peer or the bucket, minus our clock at that moment)."""
        self.offsets[source] = offset_ms

    def forget_offset(self, source: str) -> None:
        """A clock no longer measured elsewhere (a peer removed, or found to be this very machine)."""
        self.offsets.pop(source, None)

    def own_skew_ms(self) -> int:
        """How far this machine's clock is off (positive: ahead), by the median of the clocks measured elsewhere; 0
        when nothing was measured or it is within SKEW_REPORT_MS."""
        if not self.offsets:
            return 0
        ordered = sorted(self.offsets.values())
        median = ordered[len(ordered) // 2]
        return -median if abs(median) > SKEW_REPORT_MS else 0


def date_offset(date: str | None, sent_ms: int, received_ms: int) -> int | None:
    """A server's clock minus ours, from its HTTP `Date` (whole seconds: the middle of that second is taken) and the
    middle of the exchange; None without a usable Date."""
    if not date:
        return None
    try:
        theirs = email.utils.parsedate_to_datetime(date).timestamp() * 1000 + 500
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return int(theirs - (sent_ms + received_ms) / 2)
