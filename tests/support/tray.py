"""The real tray app (`hivenote tray`) as the desktop tests drive it on a private X display (tests/support/harness.py):
the process, and what its StatusNotifierItem and window show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PIL import Image

from tests.support.harness import Desktop, TrayItem

WAIT_S = 30
WINDOW = "^Hivenote$"


class App:
    def __init__(self, desktop: Desktop, data_dir: Path, port: int) -> None:
        self.desktop, self.data_dir, self.port = desktop, data_dir, port
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "tray", "--port", str(port)]
        self.process = desktop.spawn("app", argv)

    def exit_code(self) -> int:
        try:
            return self.process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the app did not exit\n{self.desktop.output('app')}") from None

    def launch_again(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(self.data_dir), *args]
        return subprocess.run(
            argv, env=self.desktop.env, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S, check=False
        )


def title(item: TrayItem) -> str:
    return str(item.prop("Title"))


def labels(item: TrayItem) -> list[str]:
    return [entry.label for entry in item.menu()]


def entry(item: TrayItem, label: str) -> tuple[bool, bool | None]:
    found = next(e for e in item.menu() if e.label == label)
    return found.enabled, found.checked


def has_brand_colour(image: Image.Image) -> bool:
    """The dashboard's amber (#f5a524 and near) covers a button and the logo: more than a few hundred pixels."""
    colours = image.convert("RGB").getcolors(1 << 24) or []
    amber = 0
    for count, colour in colours:
        assert isinstance(colour, tuple)
        r, g, b = colour[:3]
        amber += count if r > 220 and 140 < g < 190 and b < 80 else 0
    return amber > 500
