"""The tray stays flat over rounds of ordinary use (tests/support/soak.py, which bench/bench_soak.py runs for hours):
agents connecting and leaving, the window opened and closed, a snippet copied, the server stopped and started,
another machine's ops arriving. Each server start used to freeze what was alive (the last server's cycles included)
for good: ~1 MB more per round, 164 -> 632 MB over 20 minutes."""

from __future__ import annotations

from pathlib import Path

from tests.support.harness import Desktop
from tests.support.live import free_port
from tests.support.soak import growth, soak
from tests.support.tray import WAIT_S, App, title

ROUNDS = 13
WARMUP = 4


def test_the_tray_stays_flat_over_rounds_of_ordinary_use(tmp_path: Path) -> None:
    samples = soak(tmp_path, ROUNDS, 0, agents=2, pause=0.5, meaning=False)
    result = growth(samples, WARMUP)
    assert result["growth"] is not None
    assert result["growth"] <= 3.0, [round(s["rss"], 1) for s in samples]


def test_the_tray_loads_no_opengl_as_the_first_gtk_program_on_a_display(desktop: Desktop, tmp_path: Path) -> None:
    """The first GTK program on an X display tries OpenGL to choose its visuals; in the tray that kept Mesa and LLVM
    mapped for good (+53 MB RSS: 193 MB against 140 for every later tray on the same display)."""
    app = App(desktop, tmp_path / "data", free_port())
    item = desktop.tray_item(WAIT_S)
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), timeout=WAIT_S, what="running")
    maps = Path(f"/proc/{app.process.pid}/maps").read_text(encoding="utf-8")
    loaded = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in maps.splitlines() if "/libGL" in line})
    loaded += sorted({line.split()[-1].rsplit("/", 1)[-1] for line in maps.splitlines() if "libLLVM" in line})
    assert not loaded, loaded
    item.click("Quit Hivenote")
    assert app.exit_code() == 0
