"""The tray stays flat over rounds of ordinary use (tests/support/soak.py, which bench/bench_soak.py runs for hours):
agents connecting and leaving, the window opened and closed, a snippet copied, the server stopped and started,
another machine's ops arriving. Each server start used to freeze what was alive (the last server's cycles included)
for good: ~1 MB more per round, 164 -> 632 MB over 20 minutes."""

from __future__ import annotations

from pathlib import Path

from tests.support.soak import growth, soak

ROUNDS = 13
WARMUP = 4


def test_the_tray_stays_flat_over_rounds_of_ordinary_use(tmp_path: Path) -> None:
    samples = soak(tmp_path, ROUNDS, 0, agents=2, pause=0.5, meaning=False)
    result = growth(samples, WARMUP)
    assert result["growth"] is not None
    assert result["growth"] <= 3.0, [round(s["rss"], 1) for s in samples]
