"""How long the dashboard window takes from a click on *Open dashboard* to a painted dashboard, on a private X
display with the real tray app (the figure quoted in README.md). Not a test: run it by hand.

    .venv/bin/python -m tests.support.window_timing [--runs 10] [--dark]

Each run clicks the menu item through dbusmenu as a panel does, then screenshots the window until the dashboard's
amber shows (painted), and notes the first frame the window showed and whether it was white (the flash). The
window is closed (WM_DELETE_WINDOW) before the next run. Prints each run and the median.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from PIL import Image

from tests.support.harness import Desktop, start_desktop
from tests.support.live import free_port
from tests.support.tray import App, has_brand_colour, title
from tests.support.wait import eventually

WINDOW = "^Hivenote"


def white_share(image: Image.Image) -> float:
    colours = image.convert("RGB").getcolors(1 << 24) or []
    white = sum(count for count, colour in colours if colour == (255, 255, 255))
    return white / (image.width * image.height)


def painted_now(desktop: Desktop, window: str) -> bool:
    return has_brand_colour(desktop.screenshot(window))


def closed(desktop: Desktop, window: str) -> bool:
    """Close the window as its close button does (again, if the last request was not seen yet)."""
    if desktop.window_visible(WINDOW):
        desktop.close_window(window)
    return eventually(lambda: not desktop.window_visible(WINDOW), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dark", action="store_true", help="a dark GTK theme (Adwaita-dark)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, start_desktop(Path(tmp)) as desktop:
        if args.dark:
            desktop.env["GTK_THEME"] = "Adwaita:dark"
        app = App(desktop, Path(tmp) / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        painted: list[float] = []
        for run in range(1, args.runs + 1):
            start = time.monotonic()
            item.click("Open dashboard")
            window = desktop.find_window(WINDOW, 60)
            assert window is not None, desktop.output("app")
            shown = time.monotonic() - start
            first = desktop.screenshot(window)
            flash = white_share(first)
            assert eventually(partial(painted_now, desktop, window), 60, interval=0.02)
            painted.append(time.monotonic() - start)
            print(
                f"run {run}: window mapped {shown:.2f} s, first frame {flash:.0%} white, painted {painted[-1]:.2f} s",
                flush=True,
            )
            assert eventually(partial(closed, desktop, window), 30, interval=0), "the window did not close"
        item.click("Quit Hivenote")
        app.exit_code()
    print(f"median click-to-painted over {len(painted)} runs: {statistics.median(painted):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
