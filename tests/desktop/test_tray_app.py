"""The real tray app (`hivenote tray`) on a private X display and session bus, as a GNOME/KDE panel sees it: its
StatusNotifierItem's title and icon follow the server and the agents online (a real MCP client connects), and its
menu items are clicked through dbusmenu: copy a snippet (read back with xclip), start at login, open the dashboard
window (its pixels), stop/start the server, quit. Also: a plain XEmbed tray (trayer), no tray at all, a second
launch, and a port already in use."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
from pathlib import Path

import anyio
import pytest
from PIL import Image, ImageChops

from hivenote.desktop.icons import tray_icon
from hivenote.server.storage.store import lock_holder
from hivenote.server.tokens import Tokens
from tests.support.disks import fill, tmpfs
from tests.support.harness import Desktop, start_desktop
from tests.support.live import call, free_port, health, mcp_session, taken_port
from tests.support.tray import WINDOW, App, entry, has_brand_colour, labels, title
from tests.support.wait import eventually

WAIT_S = 30
TOP_MENU = [
    "Running on 127.0.0.1:{port}",
    "No agents online",
    "",
    "Stop server",
    "Open dashboard",
    "Connect an agent",
    "Copy connect snippet",
    "",
    "Share on LAN",
    "Start at login",
    "Open data folder",
    "",
    "Quit Hivenote",
]


@pytest.fixture
def app(desktop: Desktop, tmp_path: Path) -> App:
    return App(desktop, tmp_path / "data", free_port())


def centre_alpha(image: Image.Image) -> int:
    pixel = image.convert("RGBA").getpixel((image.width // 2, image.height // 2))
    assert isinstance(pixel, tuple)
    return int(pixel[3])


async def agent_calls(port: int, token: str, name: str) -> None:
    """A real MCP client (as Cursor identifies itself) lists the tools and searches once."""
    async with mcp_session(f"http://127.0.0.1:{port}/mcp", token, name) as client:
        await client.call_tool("brain_search", {"query": "deploy"})


def test_tray_follows_the_server_and_its_menu_works(app: App, desktop: Desktop) -> None:
    item = desktop.tray_item()
    assert item.prop("Id") == "hivenote"
    item.wait_for(lambda i: title(i) == "Hivenote — running · no agents online", what="running title")
    assert labels(item) == [label.format(port=app.port) for label in TOP_MENU]
    assert entry(item, "Start at login") == (True, False)
    assert entry(item, "Share on LAN") == (True, False)
    quiet = item.icon()
    assert quiet.width >= 64 and centre_alpha(quiet) == 255
    assert same(quiet, tray_icon("running"))

    # A real agent connects: the title names it and the icon gets a badge (bottom-right only).
    token = Tokens(app.data_dir / "tokens.json").default()
    anyio.run(agent_calls, app.port, token, "cursor-vscode")
    item.wait_for(lambda i: title(i) == "Hivenote — running · 1 agent online: Cursor", what="agent in title")
    agents = next(e for e in item.menu() if e.label.startswith("Agents online"))
    assert agents.label == "Agents online (1)"
    assert [c.label for c in agents.children] == ["Cursor — just now"]
    assert same(item.icon(), tray_icon("running", agents=1))

    # Copy connect snippet → the system clipboard holds Cursor's config, with this port and the token.
    item.click("Copy connect snippet", "Cursor")
    assert eventually(lambda: bool(desktop.clipboard()), WAIT_S), desktop.output("app")
    snippet = json.loads(desktop.clipboard())
    server = snippet["mcpServers"]["hivenote"]
    assert server["url"] == f"http://127.0.0.1:{app.port}/mcp"
    assert server["headers"]["Authorization"] == f"Bearer {token}"
    copied = lambda: any("Cursor" in n["body"] for n in desktop.notifications())  # noqa: E731
    assert eventually(copied, WAIT_S), "no notification confirmed the copy"
    assert desktop.notifications()[-1] == {
        "title": "Hivenote",
        "body": "Copied the Cursor snippet. Paste it into ~/.cursor/mcp.json.",
        "app": "Hivenote",
    }

    # Start at login → a valid XDG autostart entry that runs this launcher; the item is checked.
    item.click("Start at login")
    entry_file = Path(desktop.env["XDG_CONFIG_HOME"]) / "autostart" / "hivenote.desktop"
    item.wait_for(lambda i: entry(i, "Start at login") == (True, True), what="Start at login checked")
    validate = subprocess.run(
        ["desktop-file-validate", str(entry_file)], capture_output=True, text=True, encoding="utf-8", check=False
    )
    assert validate.returncode == 0 and not validate.stdout.strip(), validate.stdout
    assert "Exec=" in entry_file.read_text(encoding="utf-8")
    item.click("Start at login")
    item.wait_for(lambda i: entry(i, "Start at login") == (True, False), what="Start at login unchecked")
    assert not entry_file.exists()

    # Open dashboard → one pywebview window showing the dashboard (its amber brand pixels are there).
    item.click("Open dashboard")
    window = desktop.find_window(WINDOW, WAIT_S)
    assert window is not None, desktop.output("app")
    assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S), "the dashboard did not render"
    item.click("Open dashboard")  # again: still one window
    assert len(desktop.xdotool("search", "--onlyvisible", "--name", WINDOW).split()) == 1

    # In the window: Connect an agent → Claude Code → Copy puts its command on the system clipboard, through the
    # tray (pywebview's own bridge needs eval, which the page's CSP forbids), so it outlives the window.
    assert eventually(lambda: copy_in_window(desktop, window), WAIT_S), desktop.clipboard()
    assert f"http://127.0.0.1:{app.port}/mcp" in desktop.clipboard() and token in desktop.clipboard()
    desktop.xdotool("windowclose", window)  # the window process ends; the tray keeps serving the copy
    assert eventually(lambda: not desktop.window_visible(WINDOW), WAIT_S)
    assert desktop.clipboard().startswith("claude mcp add")
    item.click("Open dashboard")  # and a closed window opens again
    assert desktop.find_window(WINDOW, WAIT_S) is not None

    # Stop server → title, icon (hollow), menu, HTTP all say stopped; Start brings it back on the same port.
    item.click("Stop server")
    item.wait_for(lambda i: title(i) == "Hivenote — stopped", what="stopped title")
    assert health(app.port) is None
    # The menu's new layout reaches the panel in a D-Bus signal of its own, after the title's. (Open dashboard stays
    # on: it starts the server first, tests/desktop/test_tray_conventions.py.)
    item.wait_for(lambda i: labels(i)[0] == "Server stopped" and "Start server" in labels(i), what="stopped menu")
    assert centre_alpha(item.icon()) == 0
    assert same(item.icon(), tray_icon("stopped"))
    assert lock_holder(app.data_dir) is None
    item.click("Start server")
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running again")
    assert health(app.port) == 200

    # Quit → exit 0, no window left, the port and the data dir are free.
    item.click("Quit Hivenote")
    assert app.exit_code() == 0, desktop.output("app")
    assert not desktop.window_visible(WINDOW)
    assert health(app.port) is None
    assert lock_holder(app.data_dir) is None


def click(desktop: Desktop, window: str, x: int, y: int) -> None:
    desktop.xdotool("mousemove", "--window", window, str(x), str(y), "click", "1")


def copy_in_window(desktop: Desktop, window: str) -> bool:
    """Drive the dashboard like a person: the sidebar's Connect button, then the keyboard (the dialog focuses its
    close button; four tabs reach the Claude Code tile, thirteen more the Copy button, past its Connect button). True
    once the clipboard holds Claude Code's command; a try that raced the dialog's opening starts over from Escape."""
    _, _, _, height = desktop.window_geometry(window)
    desktop.xdotool("key", "--window", window, "Escape")
    click(desktop, window, 115, height - 65)  # "Connect an agent", pinned to the sidebar's foot
    desktop.xdotool("key", "--delay", "40", *["Tab"] * 4, "space", *["Tab"] * 13, "Return")
    return eventually(lambda: desktop.clipboard().startswith("claude mcp add"), 3)


def same(shown: Image.Image, drawn: Image.Image) -> bool:
    """The panel gets exactly the icon drawn for the state (PNG files are lossless)."""
    return ImageChops.difference(shown.convert("RGBA"), drawn).getbbox(alpha_only=False) is None


def test_port_in_use_is_shown_and_start_retries(app: App, desktop: Desktop) -> None:
    with taken_port(app.port):
        item = desktop.tray_item()
        item.wait_for(lambda i: "already in use" in title(i), what="port-in-use error in the title")
        assert title(item).startswith(f"Hivenote — error: port {app.port} on 127.0.0.1 is already in use")
        menu = labels(item)
        assert menu[0].startswith(f"Error: port {app.port}") and "Start server" in menu
        assert same(item.icon(), tray_icon("error"))
    item.click("Start server")
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running after the port was freed")
    item.click("Quit Hivenote")
    assert app.exit_code() == 0


def test_a_full_disk_turns_the_icon_to_a_warning_and_says_so_until_space_is_freed(
    desktop: Desktop, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        app = App(desktop, disk / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i) == "Hivenote — running · no agents online", what="running")
        token = Tokens(app.data_dir / "tokens.json").default()
        filler = fill(disk)
        with pytest.raises(urllib.error.HTTPError) as refused:
            call(app.port, token, "POST", "/api/notes", {"kind": "fact", "title": "refused", "body": "x" * 30_000})
        with refused.value:  # it holds the connection
            assert refused.value.code == 503

        item.wait_for(lambda i: "cannot save notes" in title(i), what="the storage problem in the title")
        # The refused REST call (plain urllib) is not an agent online: no badge.
        assert " · cannot save notes: The disk holding " in title(item)
        assert labels(item)[1].startswith("Cannot save notes: The disk holding")
        assert same(item.icon(), tray_icon("running", agents=0, warning=True)), title(item)
        assert eventually(lambda: any("cannot save" in n["body"] for n in desktop.notifications()), WAIT_S)
        told = next(n["body"] for n in desktop.notifications() if "cannot save" in n["body"])
        assert told.startswith("Hivenote cannot save notes. The disk holding") and "Free some space" in told

        filler.unlink()
        item.wait_for(lambda i: "cannot save" not in title(i), what="the problem cleared")
        assert title(item).startswith("Hivenote — running · no agents online")
        assert same(item.icon(), tray_icon("running"))
        assert eventually(lambda: desktop.notifications()[-1]["body"] == "Hivenote saves notes again.", WAIT_S)
        call(app.port, token, "POST", "/api/notes", {"kind": "fact", "title": "saved"})
        item.click("Quit Hivenote")
        assert app.exit_code() == 0


def test_second_launch_opens_the_running_ones_dashboard(app: App, desktop: Desktop) -> None:
    item = desktop.tray_item()
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
    second = app.launch_again()
    assert second.returncode == 0, second.stderr
    assert "already running" in second.stderr
    assert desktop.find_window(WINDOW, WAIT_S) is not None
    assert desktop.tray_items() == [desktop.tray_items()[0]]  # still one icon
    quit_ = app.launch_again("quit")
    assert quit_.returncode == 0 and "Asked the running Hivenote to quit" in quit_.stdout
    assert app.exit_code() == 0
    assert eventually(lambda: not desktop.window_visible(WINDOW), WAIT_S)


def test_xembed_tray_host(tmp_path: Path) -> None:
    """No StatusNotifier host, a plain XEmbed tray (trayer): the icon docks there and its menu quits the app; the
    first-launch notification promises no middle click (libayatana's XEmbed fallback loses it about one time in
    two, issue 35). (The Gdk-CRITICAL at this start comes from libayatana's XEmbed fallback itself: a bare pystray
    icon there logs it too.)"""
    with start_desktop(tmp_path, watcher=False, trayer=True, notifications=True) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        icon = desktop.xembed_icon(WAIT_S, classname="^hivenote$")
        assert eventually(lambda: health(app.port) == 200, WAIT_S), desktop.output("app")

        def hint() -> list[str]:
            return [n["body"] for n in desktop.notifications() if "panel" in n["body"]]

        assert eventually(hint, WAIT_S), desktop.output("app")
        assert "middle" not in hint()[0] and "open the dashboard" in hint()[0], hint()  # the menu's item instead

        def quit_from_menu() -> bool:
            """The menu is rebuilt as the server comes up and as its status changes: a click landing mid-rebuild
            opens nothing, and a rebuild between the click and the keys closes the menu, so try again until the
            app has quit."""
            if app.process.poll() is not None:
                return True
            if desktop.click_xembed(icon, popup_timeout=3) is None:
                return False
            desktop.key("Up", "Return")  # the last item: Quit Hivenote
            return eventually(lambda: app.process.poll() is not None, 5)

        assert eventually(quit_from_menu, WAIT_S), f"the menu never quit the app\n{desktop.output('app')}"
        assert app.exit_code() == 0, desktop.output("app")


def test_no_tray_at_all_says_so_and_keeps_serving_with_the_window(tmp_path: Path) -> None:
    with start_desktop(tmp_path, watcher=False) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        assert desktop.find_window(WINDOW, WAIT_S) is not None, desktop.output("app")
        assert health(app.port) == 200
        assert "This desktop shows no tray icons" in desktop.output("app")
        assert app.launch_again("quit").returncode == 0
        assert app.exit_code() == 0
        assert health(app.port) is None


@pytest.mark.system  # the tray app as a process (it serves headless)
def test_no_display_serves_headless_and_says_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")}
    env["HOME"] = str(tmp_path)
    port = free_port()
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(tmp_path / "data"), "tray", "--port", str(port)]
    process = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8"
    )
    try:
        assert eventually(lambda: health(port) == 200 or process.poll() is not None, WAIT_S)
        assert health(port) == 200
        process.terminate()
        _, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "no tray icon: no graphical session" in err and "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_quits_cleanly(app: App, desktop: Desktop, signum: int) -> None:
    """Logging out sends SIGTERM, Ctrl-C in a terminal SIGINT: the server stops and the data dir is released."""
    item = desktop.tray_item()
    item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
    app.process.send_signal(signum)
    assert app.exit_code() == 0, desktop.output("app")
    assert health(app.port) is None and lock_holder(app.data_dir) is None
    assert "Traceback" not in desktop.output("app")
