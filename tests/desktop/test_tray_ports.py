"""The real tray app when its port or its data dir is taken, on a private desktop: it says so in words a menu user
can act on, tries again by itself, offers another port, and points at the `hivenote serve` that holds the data dir."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hivenote.server.storage.store import lock_holder
from tests.support.harness import start_desktop
from tests.support.live import free_port, health, taken_port
from tests.support.tray import WINDOW, App, entry, labels, title
from tests.support.wait import eventually

WAIT_S = 30


def test_a_taken_port_is_retried_by_itself_once_it_is_free(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        with taken_port() as (port, _):
            app = App(desktop, tmp_path / "data", port)
            item = desktop.tray_item()
            item.wait_for(lambda i: "already in use" in title(i), what="port in use")
            assert "--port" not in title(item), title(item)  # a menu user has no command line
            assert "Use another port" in labels(item)
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), timeout=WAIT_S, what="retried by itself")
        assert health(port) == 200
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_use_another_port_from_the_menu(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop, taken_port() as (port, _):
        app = App(desktop, tmp_path / "data", port)
        item = desktop.tray_item()
        item.wait_for(lambda i: "Use another port" in labels(i), what="the menu offers another port")
        item.click("Use another port")
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running on another port")
        saved = json.loads((app.data_dir / "settings.json").read_text(encoding="utf-8"))["port"]
        assert saved != port and health(saved) == 200
        assert labels(item)[0] == f"Running on 127.0.0.1:{saved}"
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_a_data_dir_held_by_hivenote_serve_points_the_menu_at_it(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        data_dir, serve_port = tmp_path / "data", free_port()
        argv = [
            sys.executable,
            "-m",
            "hivenote.desktop",
            "--data-dir",
            str(data_dir),
            "serve",
            "--port",
            str(serve_port),
        ]
        serve = desktop.spawn("serve", argv)
        assert eventually(lambda: health(serve_port) == 200, WAIT_S), desktop.output("serve")
        app = App(desktop, data_dir, free_port())
        item = desktop.tray_item()
        # (its address once serve has written it down: the first try may come a moment before)
        item.wait_for(lambda i: f"127.0.0.1:{serve_port} " in title(i), what="the data dir is held, and by whom")
        assert "holds this data dir" in title(item)
        item.wait_for(lambda i: entry(i, "Open dashboard") == (True, None), what="Open dashboard enabled")

        item.click("Copy connect snippet", "Cursor")
        assert eventually(lambda: bool(desktop.clipboard()), WAIT_S), desktop.output("app")
        url = json.loads(desktop.clipboard())["mcpServers"]["hivenote"]["url"]
        assert url == f"http://127.0.0.1:{serve_port}/mcp"  # where the notebook answers, not the tray's port
        item.click("Open dashboard")
        assert desktop.find_window(WINDOW, WAIT_S) is not None, desktop.output("app")

        serve.terminate()  # the serve stops: the tray takes the data dir over by itself
        assert serve.wait(WAIT_S) == 0
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="taken over")
        assert lock_holder(data_dir) == app.process.pid
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_one_port_with_hivenote_port_set_use_another_port_and_start_at_login(tmp_path: Path) -> None:
    """Issue 35: with HIVENOTE_PORT set, "Use another port" saved and announced a port the server did not use (the
    environment beat settings.json), and Start at login wrote HIVENOTE_PORT into its Exec line, so a login-started
    tray kept shadowing the saved port. settings.json is the one place the port is kept."""
    with start_desktop(tmp_path) as desktop, taken_port() as (port, _):
        data_dir = tmp_path / "data"
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
        app = desktop.spawn("app", argv, env={**desktop.env, "HIVENOTE_PORT": str(port)})
        item = desktop.tray_item()
        item.wait_for(lambda i: "Use another port" in labels(i), what="the menu offers another port")
        item.click("Use another port")
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running on another port")
        saved = json.loads((data_dir / "settings.json").read_text(encoding="utf-8"))["port"]
        assert saved != port and health(saved) == 200  # the port saved is the port served
        assert labels(item)[0] == f"Running on 127.0.0.1:{saved}"
        told = [n["body"] for n in desktop.notifications() if "now uses port" in n["body"]]
        assert told and f"port {saved}" in told[-1] and f"HIVENOTE_PORT={port}" in told[-1], told

        item.click("Start at login")
        item.wait_for(lambda i: entry(i, "Start at login") == (True, True), what="Start at login on")
        login = (desktop.home / ".config" / "autostart" / "hivenote.desktop").read_text(encoding="utf-8")
        exec_line = next(line for line in login.splitlines() if line.startswith("Exec="))
        assert "HIVENOTE_PORT" not in exec_line and "--port" not in exec_line, exec_line
        assert json.loads((data_dir / "settings.json").read_text(encoding="utf-8"))["port"] == saved
        item.click("Quit Hivenote")
        assert app.wait(WAIT_S) == 0, desktop.output("app")


def test_start_at_login_saves_the_port_this_tray_runs_on(tmp_path: Path) -> None:
    """Started with HIVENOTE_PORT (no "Use another port"): Start at login keeps that port for the login-started tray
    by saving it in settings.json, not in the entry."""
    with start_desktop(tmp_path) as desktop:
        port, data_dir = free_port(), tmp_path / "data"
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
        app = desktop.spawn("app", argv, env={**desktop.env, "HIVENOTE_PORT": str(port)})
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Start at login")
        item.wait_for(lambda i: entry(i, "Start at login") == (True, True), what="Start at login on")
        assert json.loads((data_dir / "settings.json").read_text(encoding="utf-8"))["port"] == port
        login = (desktop.home / ".config" / "autostart" / "hivenote.desktop").read_text(encoding="utf-8")
        assert str(port) not in login, login
        item.click("Quit Hivenote")
        assert app.wait(WAIT_S) == 0, desktop.output("app")
