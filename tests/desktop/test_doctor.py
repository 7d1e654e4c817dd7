"""`hivenote doctor`'s desktop section, run as a person runs it: over SSH (no display) it does not claim that system
packages are missing; beside a running tray app it names the port that tray listens on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.harness import start_desktop
from tests.support.live import free_port
from tests.support.tray import App, title

WAIT_S = 30


def doctor(data_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "doctor"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S)


def test_without_a_display_doctor_does_not_ask_to_install_anything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    env["HOME"] = str(tmp_path)
    done = doctor(tmp_path / "data", env)
    assert done.returncode == 0, done.stderr
    assert "missing system packages" not in done.stdout and "reinstall" not in done.stdout, done.stdout
    assert "no graphical session" in done.stdout  # says why there is no tray
    assert "hivenote serve" in done.stdout  # and what to run instead


def test_doctor_names_the_running_trays_port(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        done = doctor(app.data_dir, desktop.env)
        assert f"127.0.0.1:{app.port}" in done.stdout, done.stdout
        assert "7788" not in done.stdout, done.stdout  # the default port: nothing listens there
        assert "missing system packages" not in done.stdout, done.stdout
        item.click("Quit Hivenote")
        assert app.exit_code() == 0
