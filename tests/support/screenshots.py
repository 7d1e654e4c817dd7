"""Regenerate the desktop screenshots in docs/screenshots/ that no test takes as a by-product. Run by hand:

    .venv/bin/python -m tests.support.screenshots

- error-dialog.png: the dialog a menu launch shows for a data dir made by `sudo hivenote` that this account may not
  open (on a private X display, with a realistic path rather than a test's temporary one);
- tray-icons-22px.png: every tray state as a 22 px panel shows it (the 64 px icon scaled down), on a light and a
  dark panel, with a 4x close-up.

The window screenshots (window-server-stopped.png, window-no-tray.png) come from tests/desktop/test_tray_window.py,
which saves them under test-artifacts/desktop/.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from hivenote.desktop.icons import tray_icon
from tests.support.harness import start_desktop
from tests.support.wait import eventually

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
DIALOG = """
import errno, sys
from pathlib import Path
from hivenote.desktop.problems import show_dialog, unreadable
data = Path("/home/ana/.local/share/hivenote")
error = PermissionError(errno.EACCES, "Permission denied", str(data))
show_dialog("Hivenote cannot start", unreadable(data, error, user="ana", missing=False))
"""
STATES = [  # (label, state, agents, warning)
    ("running", "running", 0, False),
    ("1 agent", "running", 1, False),
    ("3 agents", "running", 3, False),
    ("10 agents", "running", 10, False),
    ("warning", "running", 0, True),
    ("starting", "starting", 0, False),
    ("stopped", "stopped", 0, False),
    ("error", "error", 0, False),
]
PANELS = [(0xF2, 0xF2, 0xF2), (0x24, 0x24, 0x24)]  # a light and a dark panel


def error_dialog(target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, start_desktop(Path(tmp), watcher=False) as desktop:
        child = subprocess.Popen([sys.executable, "-c", DIALOG], env=desktop.env)
        try:
            window = desktop.find_window("^Hivenote cannot start$", 30)
            assert window is not None, "no dialog"
            assert eventually(lambda: desktop.screenshot(window).getbbox() is not None, 10)
            desktop.screenshot(window).save(target)
            desktop.close_window(window)
            child.wait(30)
        finally:
            if child.poll() is None:
                child.kill()


def icons_22px(target: Path, size: int = 22, zoom: int = 4, gap: int = 10) -> None:
    """Each panel: a strip of icons at `size` px, then the same strip at `zoom`x (nearest neighbour)."""
    cell = size + gap
    strip_width = gap + cell * len(STATES)
    rows = []
    for panel in PANELS:
        strip = Image.new("RGBA", (strip_width, size + 2 * gap), (*panel, 255))
        for index, (_label, state, agents, warning) in enumerate(STATES):
            icon = tray_icon(state, agents, warning=warning).resize((size, size), Image.Resampling.LANCZOS)
            strip.alpha_composite(icon, (gap + index * cell, gap))
        rows.append(strip)
        rows.append(strip.resize((strip.width * zoom, strip.height * zoom), Image.Resampling.NEAREST))
    image = Image.new("RGBA", (max(r.width for r in rows), sum(r.height for r in rows)), (255, 255, 255, 255))
    y = 0
    for row in rows:
        image.alpha_composite(row, (0, y))
        y += row.height
    image.convert("RGB").save(target)


def main() -> int:
    DOCS.mkdir(parents=True, exist_ok=True)
    error_dialog(DOCS / "error-dialog.png")
    icons_22px(DOCS / "tray-icons-22px.png")
    print(f"written: {DOCS / 'error-dialog.png'}, {DOCS / 'tray-icons-22px.png'}")
    print("order of the icons: " + ", ".join(label for label, *_ in STATES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
