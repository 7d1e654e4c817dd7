"""The dashboard as the tray app's window, in a real Chromium against the tray's own server (a DesktopApp whose
supervisor serves /desktop/app): the server stopped and started under an open page, and the tray menu's controls
in the page when no panel shows the icon."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hivenote.desktop.app import DesktopApp
from hivenote.desktop.autostart import autostart
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from tests.support.wait import wait_until

WAIT_MS = 30_000
STOPPED = "Hivenote's server is stopped"


@pytest.fixture
def desktop_app(tmp_path: Path) -> Iterator[tuple[DesktopApp, str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    login = autostart(["/opt/hivenote/bin/hivenote"], platform="linux", home=tmp_path / "home")
    app = DesktopApp(tmp_path / "data", {"port": port}, login=login)  # no tray: nothing shows its icon
    assert app.supervisor.start().wait(60) and app.supervisor.status().running
    yield app, f"http://127.0.0.1:{port}"
    app.supervisor.shutdown()


def remember(url: str, data_dir: Path, title: str) -> None:
    body = json.dumps({"kind": "fact", "title": title}).encode()
    token = Tokens(data_dir / "tokens.json").default()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    urllib.request.urlopen(urllib.request.Request(f"{url}/api/notes", body, headers), timeout=10).close()


def only_unreachable(errors: list[str]) -> bool:
    """The page's requests while the server is down fail; nothing else may."""
    return all("Failed to fetch" in e or "ERR_CONNECTION_REFUSED" in e for e in errors)


def test_stop_then_start_updates_an_open_page_without_a_reload(
    desktop_app: tuple[DesktopApp, str], page: Page, errors: list[str]
) -> None:
    app, url = desktop_app
    remember(url, app.data_dir, "Written before the stop")
    page.goto(app.signed_in_url(url + "/"))  # as the tray opens its window: with a one-time code
    expect(page.locator(".cards .card")).to_have_count(1, timeout=WAIT_MS)
    node = next((app.data_dir / "log").glob("*.jsonl")).stem  # this machine's node id, e.g. "laptop-7f3a"
    expect(page.locator(".sidebar-foot")).to_contain_text(f"· {node.rsplit('-', 1)[0]}", timeout=WAIT_MS)
    expect(page.locator(".sidebar-foot")).not_to_contain_text(node)  # the notes name the machine so, too
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))

    assert app.supervisor.stop().wait(60)
    stopped = page.get_by_role("heading", name=STOPPED)
    expect(stopped).to_be_visible(timeout=WAIT_MS)
    expect(page).to_have_title("Hivenote — server stopped")
    expect(page.locator(".sidebar-foot")).to_contain_text("Server stopped")  # not the agents seen before
    expect(page.get_by_text("Loading…")).to_have_count(0)
    # In a browser there is no window to relay a click to the tray: the page names the tray's menu item.
    expect(page.locator(".server-down")).to_contain_text("Start server")

    # Written while the server was down (the CLI takes the data dir when no server holds it).
    with Store(app.data_dir) as store:
        Notebook(store).remember(kind="fact", title="Written while stopped", by=Author(agent="cli"))

    assert app.supervisor.start().wait(60) and app.supervisor.status().running
    expect(stopped).to_have_count(0, timeout=WAIT_MS)
    expect(page).to_have_title("Hivenote")
    expect(page.locator(".cards .card")).to_have_count(2, timeout=WAIT_MS)
    expect(page.locator(".cards")).to_contain_text("Written while stopped")
    assert navigations == [], "the page reloaded"
    assert only_unreachable(errors), errors


def test_without_a_tray_icon_the_page_explains_and_offers_the_menu(
    desktop_app: tuple[DesktopApp, str], page: Page, errors: list[str]
) -> None:
    app, url = desktop_app
    page.goto(app.signed_in_url(url + "/"))  # as the tray opens its window: with a one-time code
    bar = page.get_by_role("region", name="Hivenote app")
    expect(bar).to_be_visible(timeout=WAIT_MS)
    expect(bar).to_contain_text("This desktop shows no tray icons")
    expect(bar).to_contain_text("AppIndicator and KStatusNotifierItem Support")  # how to get one

    bar.get_by_label("Start at login").check()
    expect(bar.get_by_label("Start at login")).to_be_checked(timeout=WAIT_MS)
    wait_until(app.login.is_enabled, WAIT_MS / 1000)  # the page shows it at once; the tray writes it a moment later
    expect(bar.get_by_label("Start at login")).to_be_enabled(timeout=WAIT_MS)

    bar.get_by_role("button", name="Stop server").click()
    expect(page.get_by_role("heading", name=STOPPED)).to_be_visible(timeout=WAIT_MS)
    assert app.supervisor.status().server == "stopped"
    assert app.supervisor.start().wait(60)
    expect(bar.get_by_role("button", name="Stop server")).to_be_visible(timeout=WAIT_MS)

    bar.get_by_role("button", name="Quit Hivenote").click()
    expect(page.get_by_text("Hivenote is quitting")).to_be_visible(timeout=WAIT_MS)
    assert app.quitting.is_set()
    assert only_unreachable(errors), errors
