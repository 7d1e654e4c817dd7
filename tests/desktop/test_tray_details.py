"""The real tray app's smaller promises, on a private desktop: *Start at login* starts the same Hivenote (its data
dir, port and HIVENOTE_* settings), *Open data folder* says so when nothing opens it and leaves no zombie, a second
launch while the server is stopped starts it and shows the dashboard, and `hivenote autostart` does not read as on
when it is off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.desktop_entry import desktop_keys, parse_exec
from tests.support.harness import start_desktop
from tests.support.live import free_port, health
from tests.support.tray import WINDOW, App, entry, title
from tests.support.wait import eventually

WAIT_S = 30


def test_start_at_login_starts_the_same_hivenote(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        desktop.env["HIVENOTE_GRAPH_EXTRAS"] = "true"  # a setting from the shell's environment
        app = App(desktop, tmp_path / "my notes", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Start at login")
        item.wait_for(lambda i: entry(i, "Start at login") == (True, True), what="Start at login checked")
        login = parse_exec(
            desktop_keys(Path(desktop.env["XDG_CONFIG_HOME"]) / "autostart" / "hivenote.desktop")["Exec"]
        )
        item.click("Quit Hivenote")
        assert app.exit_code() == 0

        # Log in: the desktop runs Exec= with the session's environment, which has no HIVENOTE_* of the shell's.
        session = {k: v for k, v in desktop.env.items() if not k.startswith("HIVENOTE_")}
        again = desktop.spawn("login", login, env=session)
        assert eventually(lambda: health(app.port) == 200, WAIT_S), f"{login}\n{desktop.output('login')}"
        done = subprocess.run(
            [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(app.data_dir), "quit"],
            env=desktop.env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=WAIT_S,
        )
        assert "Asked the running Hivenote to quit" in done.stdout, (login, done.stdout, done.stderr)
        assert again.wait(WAIT_S) == 0
        assert "HIVENOTE_GRAPH_EXTRAS=true" in login, login


def test_open_data_folder_with_no_app_for_folders_says_so_and_leaves_no_zombie(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Open data folder")  # xdg-open finds no desktop here and no application for folders
        assert eventually(lambda: any("data folder" in n["body"] for n in desktop.notifications()), WAIT_S), (
            desktop.notifications(),
            desktop.output("app"),
        )
        told = next(n["body"] for n in desktop.notifications() if "data folder" in n["body"])
        assert told.startswith("No app opened the data folder") and str(app.data_dir) in told, told
        assert eventually(lambda: zombies(app.process.pid) == [], WAIT_S), "xdg-open was never waited for"
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def zombies(parent: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text(encoding="utf-8").splitlines() if ":\t" in line
            )
        except OSError:
            continue
        if fields.get("PPid", "").strip() == str(parent) and fields.get("State", "").startswith("Z"):
            found.append(int(status.parent.name))
    return found


def test_a_second_launch_while_stopped_starts_the_server_and_shows_the_dashboard(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Stop server")
        item.wait_for(lambda i: title(i) == "Hivenote — stopped", what="stopped")
        second = app.launch_again()
        assert second.returncode == 0, second.stderr
        assert "its dashboard is open" not in second.stderr  # it was not: it had no server to show
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="started by the second launch")
        assert desktop.find_window(WINDOW, WAIT_S) is not None, desktop.output("app")
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_autostart_status_when_off_does_not_read_as_on(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(tmp_path / "data"), "autostart"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, encoding="utf-8", timeout=WAIT_S)
    assert done.stdout.startswith("Start at login: off"), done.stdout
    assert "starts Hivenote" not in done.stdout and "autostart on" in done.stdout, done.stdout


def test_the_codex_copy_says_where_its_token_comes_from(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Copy connect snippet", "OpenAI Codex")
        assert eventually(lambda: any("Codex" in n["body"] for n in desktop.notifications()), WAIT_S), desktop.output(
            "app"
        )
        told = next(n["body"] for n in desktop.notifications() if "Codex" in n["body"])
        assert "HIVENOTE_TOKEN" in told and "hivenote token show" in told, told
        item.click("Quit Hivenote")
        assert app.exit_code() == 0
