"""The dashboard served by the tray's supervisor (with the tray's /desktop routes), in a real Chromium: Settings
moves the log into a synced folder and back while the tray restarts its server underneath the page."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from hivenote.desktop.routes import desktop_routes
from hivenote.desktop.supervisor import Supervisor
from hivenote.server.settings import load_settings
from hivenote.server.tokens import Tokens
from tests.support.live import exchange, sign_in_code
from tests.support.wait import wait_until

WAIT_MS = 30_000


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[tuple[Supervisor, str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    copies: list[str] = []
    supervisor: Supervisor | None = None

    def routes() -> list[object]:
        return list(desktop_routes(copies.append, supervisor))

    supervisor = Supervisor(tmp_path / "data", {"port": port}, extra_routes=routes)  # type: ignore[arg-type]
    assert supervisor.start().wait(60) and supervisor.status().running
    yield supervisor, f"http://127.0.0.1:{port}"
    supervisor.shutdown()


def wait_running(supervisor: Supervisor) -> None:
    wait_until(lambda: supervisor.status().running, WAIT_MS / 1000, lambda: str(supervisor.status()))


def notes(url: str, data_dir: Path) -> list[str]:
    request = urllib.request.Request(
        f"{url}/api/notes", headers={"Authorization": f"Bearer {Tokens(data_dir / 'tokens.json').default()}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return [n["title"] for n in json.loads(response.read())["results"]]


def test_settings_move_the_log_into_a_synced_folder_and_back(
    supervised: tuple[Supervisor, str], page: Page, tmp_path: Path, errors: list[str]
) -> None:
    supervisor, url = supervised
    data_dir = supervisor.data_dir
    token = Tokens(data_dir / "tokens.json").default()
    body = json.dumps({"kind": "decision", "title": "Use Drizzle, not Prisma"}).encode()
    request = urllib.request.Request(
        f"{url}/api/notes", body, {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    )
    urllib.request.urlopen(request, timeout=10).close()
    synced = tmp_path / "Sync" / "hivenote"

    page.goto(f"{url}/?code={sign_in_code(url, token)}#settings")
    form = page.locator("form.synced-folder")
    expect(form).to_be_visible(timeout=WAIT_MS)
    expect(form.get_by_role("button", name="Move back")).to_have_count(0)  # the log is in the data dir
    form.get_by_label("Keep the log in a synced folder").fill(str(synced))
    form.get_by_role("button", name="Use this folder").click()
    expect(form.locator(".move.ok")).to_contain_text(str(synced), timeout=WAIT_MS)
    assert load_settings(data_dir=data_dir).log_path == synced.resolve()
    assert list(synced.glob("*.jsonl"))
    wait_running(supervisor)  # it answered the page a moment before it calls itself running
    assert notes(url, data_dir) == ["Use Drizzle, not Prisma"]  # the restarted server reads the moved log

    form.get_by_role("button", name="Move back").click()
    expect(form.get_by_role("button", name="Move back")).to_have_count(0, timeout=WAIT_MS)  # back in the data dir
    expect(form.locator(".move.ok")).to_contain_text(str(data_dir / "log"))
    assert load_settings(data_dir=data_dir).log_dir == ""
    assert notes(url, data_dir) == ["Use Drizzle, not Prisma"]

    # A refusal (the folder is inside the data dir) is shown, and nothing moves.
    form.get_by_label("Keep the log in a synced folder").fill(str(data_dir / "inside"))
    form.get_by_role("button", name="Use this folder").click()
    expect(form.locator(".move.warn")).to_be_visible(timeout=WAIT_MS)
    assert load_settings(data_dir=data_dir).log_dir == ""
    wait_running(supervisor)
    assert errors == [] or all("Failed to fetch" in e or "ERR_CONNECTION_REFUSED" in e for e in errors), errors


def test_the_folder_route_is_this_machine_s_and_checks_its_input(supervised: tuple[Supervisor, str]) -> None:
    supervisor, url = supervised
    token = Tokens(supervisor.data_dir / "tokens.json").default()

    def post(body: bytes, auth: bool = True) -> int:
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if auth else {})}
        return exchange(urllib.request.Request(f"{url}/desktop/sync/folder", body, headers, method="POST"))[0]

    assert post(b'{"path": "/tmp/x"}', auth=False) == 401
    assert post(b"nope") == 400
    assert post(b'{"path": 7}') == 400
    assert post(b'{"path": "  "}') == 400
    assert supervisor.last_move is None and load_settings(data_dir=supervisor.data_dir).log_dir == ""


def test_settings_show_the_lan_address_after_share_on_lan_without_a_reload(
    supervised: tuple[Supervisor, str], page: Page, errors: list[str]
) -> None:
    """Issue 35: after Share on LAN (the tray restarts its server on every interface) Settings kept showing
    127.0.0.1 (its running settings were read once)."""
    supervisor, url = supervised
    token = Tokens(supervisor.data_dir / "tokens.json").default()
    page.goto(f"{url}/?code={sign_in_code(url, token)}#settings")
    values = page.locator("dl.values")
    expect(values).to_contain_text('"127.0.0.1"', timeout=WAIT_MS)
    assert supervisor.share_on_lan(True).wait(60) and supervisor.status().sharing
    shared = supervisor.status().share_urls
    sharing = page.locator("section.panel", has_text="Share on your network")
    expect(sharing).to_contain_text("Shared on the network", timeout=WAIT_MS)
    for address in shared:
        expect(sharing).to_contain_text(address)
    expect(values).to_contain_text('"0.0.0.0"', timeout=WAIT_MS)
    expect(values).not_to_contain_text('"127.0.0.1"')
    if not shared:  # no network here: never the page's loopback address for a teammate
        expect(sharing).not_to_contain_text("127.0.0.1")
    assert errors == []
