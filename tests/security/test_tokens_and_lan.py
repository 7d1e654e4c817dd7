"""Secrets and reach: token and key files private whatever the umask, tokens compared in constant time and kept as
digests, never written to a log; this machine only by default, never without a token beyond loopback, and the
tray's /desktop routes and the dashboard's session for this machine only."""

from __future__ import annotations

import hmac
import json
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from hivenote.desktop.instance import Instance
from hivenote.desktop.routes import desktop_routes
from hivenote.server.core.errors import InvalidInput
from hivenote.server.settings import DEFAULT_HOST, Settings, load_settings, save_setting
from hivenote.server.storage.store import Store
from hivenote.server.sync.peerbook import add_peer
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from tests.support.live import Running, fetch, mcp_client, serve

BEYOND_LOOPBACK = ["0.0.0.0", "::", "192.0.2.2", "laptop.local", "100.64.1.2"]


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("permissive_umask")
def test_every_secret_file_in_the_data_dir_is_private_whatever_the_umask(tmp_path: Path) -> None:
    tokens = Tokens(tmp_path / "tokens.json")
    tokens.default()
    tokens.add("ana")
    add_peer(tmp_path, "http://laptop.local:7788", "hn_peer_" + "x" * 32)
    instance = Instance(tmp_path)
    assert instance.acquire(lambda message: None)
    try:
        for name in ("tokens.json", "peers.json", "tray.json"):
            assert mode(tmp_path / name) == 0o600, name
    finally:
        instance.release()
    tokens.revoke("ana")  # rewritten: still private
    assert mode(tmp_path / "tokens.json") == 0o600


def test_people_s_tokens_are_kept_only_as_digests(tmp_path: Path) -> None:
    tokens = Tokens(tmp_path / "tokens.json")
    ana = tokens.add("ana")
    peer = "hn_peer_" + "y" * 32
    tokens.adopt("peer-1", peer)
    text = (tmp_path / "tokens.json").read_text(encoding="utf-8")
    assert ana not in text and peer not in text
    assert tokens.owner(ana) == "ana" and tokens.owner(peer) == "peer-1"


def test_tokens_are_compared_in_constant_time_against_every_holder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stored token is compared (no early exit that times which one matched), each with compare_digest."""
    tokens = Tokens(tmp_path / "tokens.json")
    owner = tokens.default()
    ana = tokens.add("ana")
    tokens.add("bo")
    tokens.add("cy")
    calls: list[tuple[Any, Any]] = []
    real = hmac.compare_digest

    def recording(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)  # auth.py calls hmac.compare_digest
    for presented, who in ((owner, ""), (ana, "ana"), ("hn_wrong", None), ("", None)):
        calls.clear()
        assert tokens.owner(presented) == who
        assert len(calls) == 4, presented  # the owner's and the three people's, always


def test_no_token_reaches_a_log_or_the_console(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    with serve(tmp_path / "data") as running:
        wrong = "hn_" + "w" * 43
        ana = running.tokens.add("ana")
        for token in (running.token, wrong, ana):
            fetch(f"{running.url}/api/notes", {"Authorization": f"Bearer {token}"})
            fetch(f"{running.url}/api/notes?token={token}&access_token={token}")
            fetch(f"{running.url}/nowhere/{token}", {"Authorization": f"Bearer {token}"})
            fetch(f"{running.url}/api/notes", {"Authorization": f"Bearer {token}"}, b"{not json")

        async def agent() -> None:
            async with mcp_client(running, token=ana) as client:
                await client.call_tool("brain_remember", {"kind": "fact", "title": "t"})

        anyio.run(agent)
        status, _, body = fetch(f"{running.url}/api/notes", {"Authorization": f"Bearer {wrong}"})
        assert status == 401 and wrong not in json.dumps(body)  # the refusal does not echo it either
    out, err = capfd.readouterr()
    for token in (running.token, wrong, ana):
        assert token not in caplog.text and token not in out and token not in err


def test_by_default_the_notebook_stays_on_this_machine_and_needs_a_token(tmp_path: Path) -> None:
    settings = load_settings(environ={}, data_dir=tmp_path)
    assert (settings.host, DEFAULT_HOST, settings.auth) == ("127.0.0.1", "127.0.0.1", True)
    assert settings.loopback and settings.share_urls == []


@pytest.mark.parametrize("host", BEYOND_LOOPBACK)
def test_auth_cannot_be_turned_off_while_shared_from_any_source(tmp_path: Path, host: str) -> None:
    says = "--no-auth is only allowed on a loopback address"
    with pytest.raises(InvalidInput, match=says):
        load_settings({"host": host, "auth": False}, environ={}, data_dir=tmp_path)
    with pytest.raises(InvalidInput, match=says):
        load_settings(environ={"HIVENOTE_HOST": host, "HIVENOTE_AUTH": "0"}, data_dir=tmp_path)
    with pytest.raises(InvalidInput, match=says):
        load_settings({"auth": False}, environ={"HIVENOTE_HOST": host}, data_dir=tmp_path)
    save_setting(tmp_path, "auth", False)  # fine on loopback ...
    with pytest.raises(InvalidInput, match=says):
        save_setting(tmp_path, "host", host)  # ... and then sharing is refused, the file left as it was
    assert json.loads((tmp_path / "settings.json").read_text(encoding="utf-8")) == {"auth": False}
    (tmp_path / "settings.json").write_text(json.dumps({"host": host, "auth": False}), encoding="utf-8")
    with pytest.raises(InvalidInput, match=says):
        load_settings(environ={}, data_dir=tmp_path)  # a hand-edited file does not start either


@pytest.fixture
def lan_app(tmp_path: Path) -> Iterator[tuple[Any, str, list[str]]]:
    """The tray's server app (with /desktop) as a request from another machine on the LAN reaches it."""
    copied: list[str] = []
    settings = replace(Settings(data_dir=tmp_path / "data"), host="0.0.0.0")
    tokens = Tokens(settings.data_dir / "tokens.json")
    with Store(settings.data_dir) as store:
        app = create_app(settings, store, tokens=tokens, extra_routes=desktop_routes(copied.append))
        yield app, tokens.default(), copied


def lan_request(app: Any, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> httpx2.Response:
    async def send() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app, client=("192.0.2.77", 50123))
        async with httpx2.AsyncClient(transport=transport, base_url="http://192.0.2.2:7788") as client:
            return await client.request(method, path, headers=headers, content=body)

    return anyio.run(send)


def test_the_desktop_routes_and_the_session_answer_this_machine_only(lan_app: tuple[Any, str, list[str]]) -> None:
    app, token, copied = lan_app
    owner = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    response = lan_request(app, "POST", "/desktop/clipboard", owner, b'{"text": "hi"}')
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")
    assert copied == []
    session = {"X-Hivenote-Client": "hivenote-dashboard/1", "Sec-Fetch-Site": "same-origin"}
    response = lan_request(
        app, "POST", "/api/session", {**session, "Content-Type": "application/json"}, b'{"code": "x"}'
    )
    assert response.status_code == 403 and token not in response.text and "set-cookie" not in response.headers
    assert lan_request(app, "GET", "/api/notes", {}).status_code == 401  # the rest of the API: a token, as ever


def test_a_shared_server_still_refuses_every_call_without_a_token(running_shared: Running) -> None:
    for path in ("/api/notes", "/api/status", "/api/export", "/api/tokens", "/sync/shards", "/mcp", "/mcp/graph"):
        assert fetch(running_shared.url + path)[0] == 401, path


@pytest.fixture
def running_shared(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "shared", host="0.0.0.0") as server:
        yield server
