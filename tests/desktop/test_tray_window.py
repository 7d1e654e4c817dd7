"""The real tray app and its real dashboard window (pywebview on WebKitGTK) on a private X display and session bus,
when things go wrong: the server stopped and started under the open window, and a desktop with no tray host (the
window stands in for the menu; a panel that comes up later gets the icon)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from PIL import Image

from hivenote.server.tokens import Tokens
from tests.support.harness import Desktop, start_desktop
from tests.support.live import free_port, health
from tests.support.tray import App, has_brand_colour, title
from tests.support.wait import eventually

WAIT_S = 30
WINDOW = "^Hivenote$"
STOPPED_WINDOW = "^Hivenote — server stopped$"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "desktop"
STAND_IN = (253, 243, 215)  # --warn-soft: the bar that stands in for the tray menu (light theme)


def save(image: Image.Image, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    image.save(ARTIFACTS / f"{name}.png")


def has_colour(image: Image.Image, colour: tuple[int, int, int], least: int = 2000) -> bool:
    colours = image.convert("RGB").getcolors(1 << 24) or []
    return sum(count for count, found in colours if found == colour) >= least


def test_stop_then_start_updates_the_open_window_without_a_reload(tmp_path: Path) -> None:
    with start_desktop(tmp_path) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        item = desktop.tray_item()
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="running")
        item.click("Open dashboard")
        window = desktop.find_window(WINDOW, WAIT_S)
        assert window is not None, desktop.output("app")
        assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S), "the dashboard did not render"

        item.click("Stop server")
        item.wait_for(lambda i: title(i) == "Hivenote — stopped", what="stopped")
        stopped = desktop.find_window(STOPPED_WINDOW, WAIT_S)  # the page's title is the window's
        assert stopped == window, f"the window does not say the server is stopped\n{desktop.output('app')}"
        save(desktop.screenshot(window), "window-server-stopped")

        # Its Start server button has the focus: Enter asks the tray through the window (no server to ask).
        assert eventually(lambda: start_from_window(desktop, window), WAIT_S), desktop.output("app")
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="started from the window")
        assert desktop.find_window(WINDOW, WAIT_S) == window  # the page came back by itself
        assert eventually(lambda: has_brand_colour(desktop.screenshot(window)), WAIT_S)
        item.click("Quit Hivenote")
        assert app.exit_code() == 0, desktop.output("app")
        assert "Traceback" not in desktop.output("app") and "Fatal Python error" not in desktop.output("app")


def start_from_window(desktop: Desktop, window: str) -> bool:
    desktop.xdotool("windowfocus", window)
    desktop.key("Return")
    return eventually(lambda: health_of_title(desktop), 3)


def health_of_title(desktop: Desktop) -> bool:
    return not desktop.window_visible(STOPPED_WINDOW)


def test_no_tray_host_opens_a_window_that_explains_and_a_later_panel_gets_the_icon(tmp_path: Path) -> None:
    with start_desktop(tmp_path, watcher=False) as desktop:
        app = App(desktop, tmp_path / "data", free_port())
        window = desktop.find_window(WINDOW, WAIT_S)
        assert window is not None, desktop.output("app")
        assert eventually(lambda: has_colour(desktop.screenshot(window), STAND_IN), WAIT_S), "no stand-in for the menu"
        save(desktop.screenshot(window), "window-no-tray")
        assert "This desktop shows no tray icons" in desktop.output("app")
        assert state(app)["tray"]["shown"] is False

        desktop.start_watcher()  # the panel comes up late: the icon appears, the window's stand-in goes
        item = desktop.tray_item(WAIT_S)
        item.wait_for(lambda i: title(i).startswith("Hivenote — running"), what="the icon, late")
        assert eventually(lambda: not has_colour(desktop.screenshot(window), STAND_IN), WAIT_S), "the stand-in stayed"
        assert state(app)["tray"]["shown"] is True

        act(app, "quit")  # what the stand-in's Quit Hivenote button sends
        assert app.exit_code() == 0, desktop.output("app")
        assert health(app.port) is None
        assert eventually(lambda: not desktop.window_visible(WINDOW), WAIT_S)


def request(app: App, body: dict[str, str] | None = None) -> urllib.request.Request:
    token = Tokens(app.data_dir / "tokens.json").default()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    data = None if body is None else json.dumps(body).encode()
    return urllib.request.Request(f"http://127.0.0.1:{app.port}/desktop/app", data, headers)


def state(app: App) -> dict[str, dict[str, object]]:
    with urllib.request.urlopen(request(app), timeout=10) as response:
        found: dict[str, dict[str, object]] = json.loads(response.read())
    return found


def act(app: App, action: str) -> None:
    urllib.request.urlopen(request(app, {"action": action}), timeout=10).close()
