"""Hybrid logical clock (Kulkarni et al. 2014) with clock-skew detection.

Pure: imports only the standard library; the wall clock is passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_MAX_OFFSET_MS = 3_600_000  # a remote stamp further ahead than this is skew, not time


@dataclass
class SkewReport:
    """The largest lead (ms) seen per remote node whose stamps ran ahead of our wall clock beyond the limit."""

    ahead_ms: dict[str, int] = field(default_factory=dict)

    def note(self, node: str, ahead: int) -> None:
        if ahead > self.ahead_ms.get(node, 0):
            self.ahead_ms[node] = ahead


class Clock:
    """Issues strictly increasing `(wall_ms, counter)` stamps and follows stamps seen from other nodes."""

    def __init__(self, now_ms: Callable[[], int], max_offset_ms: int = DEFAULT_MAX_OFFSET_MS) -> None:
        self._now = now_ms
        self.max_offset_ms = max_offset_ms
        self.wall = 0
        self.counter = 0
        self.skew = SkewReport()

    def tick(self) -> tuple[int, int]:
        """A stamp for a new local op, later than every stamp issued or observed so far."""
        now = self._now()
        if now > self.wall:
            self.wall, self.counter = now, 0
        else:
            self.counter += 1
        return self.wall, self.counter

    def observe(self, wall: int, counter: int, node: str) -> None:
        """Advance past a stamp read from a log, unless it is implausibly far ahead (then only report it)."""
        now = self._now()
        limit = now + self.max_offset_ms
        if wall > limit:
            self.skew.note(node, wall - now)
            wall, counter = limit, 0
        if (wall, counter) > (self.wall, self.counter):
            self.wall, self.counter = wall, counter
