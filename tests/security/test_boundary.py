"""Trust at the boundary (issue 14): who the peer is cannot be changed by a header, and another account on this
machine gets nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.server.live import fetch, serve

CLIENT = "hivenote-dashboard/0.1.0"
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
PROXY_HEADERS = {
    "X-Forwarded-For": "127.0.0.1",
    "X-Forwarded-Proto": "https",
    "X-Real-IP": "127.0.0.1",
    "Forwarded": "for=127.0.0.1;proto=https",
}


def _curl_as_nobody(url: str, headers: dict[str, str]) -> dict[str, object]:
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to act as another account"
    command = [*AS_NOBODY, "curl", "-s", "--max-time", "20"]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    answer = subprocess.run([*command, url], capture_output=True, encoding="utf-8", timeout=30, check=True).stdout
    parsed: dict[str, object] = json.loads(answer)
    return parsed


def test_another_account_gets_no_token_by_claiming_to_be_forwarded_from_loopback(tmp_path: Path) -> None:
    """Issue 14 item 1: uvicorn trusted X-Forwarded-For from loopback, so the session's same-account check looked
    for a connection from port 0, found none and handed the owner's token to `nobody`."""
    with serve(tmp_path / "data") as running:
        answer = _curl_as_nobody(running.url + "/api/session", {"X-Hivenote-Client": CLIENT, **PROXY_HEADERS})
        assert "token" not in answer, "another account got the owner's token"
        assert answer["error"]["code"] == "forbidden"  # type: ignore[index]
        # A proxy header does not change who this account is either: it still may, whatever the header claims.
        status, _, body = fetch(
            running.url + "/api/session", {"X-Hivenote-Client": CLIENT, "X-Forwarded-For": "203.0.113.9"}
        )
        assert status == 200 and body["token"] == running.token


def test_no_proxy_header_changes_the_peer_on_any_route(tmp_path: Path) -> None:
    """The peer address the routes see is the socket's: the session answers this machine only, so a header naming
    another host must not change what it sees (nor the URL scheme)."""
    with serve(tmp_path / "data") as running:
        headers = {"Authorization": f"Bearer {running.token}", "X-Hivenote-Client": CLIENT}
        for name, value in {**PROXY_HEADERS, "X-Forwarded-For": "192.0.2.77", "Forwarded": "for=192.0.2.77"}.items():
            status, _, body = fetch(running.url + "/api/session", {**headers, name: value})
            assert (status, body.get("token")) == (200, running.token), name


def test_every_uvicorn_server_ignores_proxy_headers() -> None:
    """serve, the tray's embedded server and every test server build uvicorn's config in one place."""
    from hivenote.server.serve import uvicorn_config

    config = uvicorn_config(object())
    assert config.proxy_headers is False
    assert config.forwarded_allow_ips in ([], "")
