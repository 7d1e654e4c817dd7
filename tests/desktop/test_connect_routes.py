"""/desktop/connect (issue 35): the tray's server says which agents are installed and connected and connects one, for
the owner's own dashboard on this machine only, and only the change the page was shown."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from hivenote.desktop.routes import desktop_routes
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app

URL = "http://127.0.0.1:7788/mcp"


class Tray:
    """What the window may ask of the tray (routes.TrayControls), for a server without a tray icon."""

    def __init__(self, token: str) -> None:
        self.token = token

    def desktop_state(self) -> dict[str, Any]:
        return {}

    def on_action(self, action: str) -> None:
        raise AssertionError(f"no tray action expected here, got {action}")

    def connect_target(self) -> tuple[str, str | None, list[str]]:
        return URL, self.token, ["/opt/hivenote/bin/hivenote", "stdio"]


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Tokens]]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", "/nonexistent")
    (tmp_path / "home" / ".cursor").mkdir(parents=True)
    settings = replace(Settings(data_dir=tmp_path / "data"), host="0.0.0.0")
    tokens = Tokens(settings.data_dir / "tokens.json")
    with Store(settings.data_dir) as store:
        routes = desktop_routes(lambda _: None, None, Tray(tokens.default()))
        yield create_app(settings, store, tokens=tokens, extra_routes=routes), tokens


def request(app: Any, method: str, path: str, token: str, body: object = None, client: str = "127.0.0.1") -> Any:
    async def send() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app, client=(client, 50123))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:7788") as http:
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            content = b"" if body is None else json.dumps(body).encode()
            return await http.request(method, path, headers=headers, content=content)

    return anyio.run(send)


def test_the_owner_here_sees_the_agents_and_connects_the_change_shown(
    served: tuple[Any, Tokens], tmp_path: Path
) -> None:
    app, tokens = served
    owner = tokens.default()
    listed = request(app, "GET", "/desktop/connect", owner).json()["agents"]
    cursor = next(a for a in listed if a["id"] == "cursor")
    assert cursor == {"id": "cursor", "title": "Cursor", "installed": True, "connected": False, "way": "file"}
    shown = request(app, "GET", "/desktop/connect/cursor", owner).json()
    assert shown["way"] == "file" and "+++ ~/.cursor/mcp.json" in shown["diff"]
    config = tmp_path / "home" / ".cursor" / "mcp.json"

    stale = request(app, "POST", "/desktop/connect/cursor", owner, {"diff": "something else", "commands": []})
    assert (stale.status_code, stale.json()["error"]["code"]) == (409, "changed")
    assert not config.exists()  # only the change that was shown is made

    done = request(app, "POST", "/desktop/connect/cursor", owner, {"diff": shown["diff"], "commands": []}).json()
    assert done["ok"] and "Cursor is connected" in done["message"], done
    assert json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["hivenote"]["url"] == URL
    listed = request(app, "GET", "/desktop/connect", owner).json()["agents"]
    assert next(a for a in listed if a["id"] == "cursor")["connected"]
    missing = request(app, "GET", "/desktop/connect/notepad", owner)
    assert missing.status_code == 404 and "known clients" in missing.json()["error"]["message"]


def test_another_machine_or_a_teammate_may_not_change_this_machine_s_configs(
    served: tuple[Any, Tokens], tmp_path: Path
) -> None:
    app, tokens = served
    owner, ana = tokens.default(), tokens.add("ana")
    from_lan = request(app, "POST", "/desktop/connect/cursor", owner, {"diff": "", "commands": []}, "192.0.2.77")
    assert (from_lan.status_code, from_lan.json()["error"]["code"]) == (403, "forbidden")
    assert request(app, "GET", "/desktop/connect", owner, client="192.0.2.77").status_code == 403
    teammate = request(app, "GET", "/desktop/connect", ana)
    assert teammate.status_code == 403 and teammate.json()["error"]["code"] in ("forbidden", "owner_only")
    assert not (tmp_path / "home" / ".cursor" / "mcp.json").exists()
