"""The dashboard's HTTP side: its headers, the loopback-only session, and checks on its own source files."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.web.app import create_app
from hivenote.server.web.dashboard import CSP, GENERATED
from tests.support.dashboard import CLIENT, api
from tests.support.live import Running, exchange, fetch
from tests.support.privileges import as_nobody

DASHBOARD = Path(__file__).resolve().parents[2] / "server" / "dashboard"
STRICT = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return exchange(urllib.request.Request(url, headers=headers or {}))


@pytest.mark.parametrize(
    ("path", "media"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/js/main.js", "text/javascript; charset=utf-8"),
        ("/ui/vendor/purify-3.5.0.es.mjs", "text/javascript; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
    ],
)
def test_every_dashboard_file_is_served_with_a_strict_policy_and_revalidated(
    running: Running, path: str, media: str
) -> None:
    status, headers, body = _get(running.url + path)
    assert status == 200 and headers["content-type"] == media and body
    assert {k: headers[k] for k in STRICT} == STRICT
    assert headers["cache-control"] == "no-cache"
    again, headers_again, empty = _get(running.url + path, {"If-None-Match": headers["etag"]})
    assert (again, empty) == (304, b"") and headers_again["content-security-policy"] == CSP


def test_the_policy_allows_nothing_inline_and_nothing_from_elsewhere() -> None:
    rules = dict(rule.strip().split(" ", 1) for rule in CSP.split(";"))
    assert rules["default-src"] == rules["script-src"] == rules["style-src"] == rules["connect-src"] == "'self'"
    assert rules["object-src"] == rules["base-uri"] == rules["frame-ancestors"] == "'none'"
    assert "unsafe" not in CSP and "http" not in CSP


def test_an_unknown_dashboard_file_is_a_json_404_with_the_same_headers(running: Running) -> None:
    status, headers, body = _get(running.url + "/ui/js/nope.js")
    assert status == 404 and b"No such dashboard file" in body
    assert headers["content-security-policy"] == CSP


def test_the_page_names_its_version_and_has_no_inline_script_or_style(running: Running) -> None:
    _, _, body = _get(running.url + "/")
    page = body.decode()
    assert '<meta name="hivenote-version" content="0.' in page
    assert re.findall(r"<script\b[^>]*>", page) == [
        '<script type="module" async src="/ui/js/boot.js">',
        '<script type="module" src="/ui/js/main.js">',
    ]
    assert "<style" not in page and " style=" not in page and not re.search(r"\son\w+=", page)


def test_the_session_hands_the_owners_token_to_the_dashboard_on_this_machine(running: Running) -> None:
    status, _, body = fetch(running.url + "/api/session", {"X-Hivenote-Client": CLIENT})
    assert (status, body) == (200, {"token": running.token, "person": ""})
    for headers in (
        {},  # not the dashboard
        {"X-Hivenote-Client": "cursor/1.0"},
        {"X-Hivenote-Client": CLIENT, "Sec-Fetch-Site": "cross-site"},  # the browser says another site asked
        {"X-Hivenote-Client": CLIENT, "Sec-Fetch-Site": "same-site"},
    ):
        status, _, body = fetch(running.url + "/api/session", headers)
        assert status == 403 and body["error"]["code"] == "forbidden", headers
    status, _, body = fetch(running.url + "/api/session", {"X-Hivenote-Client": CLIENT, "Origin": "http://evil.test"})
    assert (status, body["error"]["code"]) == (403, "bad_origin")
    listed = [a["client"] for a in api(running, "/api/agents")["agents"]]
    assert not [c for c in listed if c.startswith("hivenote-dashboard")]  # a person at the dashboard is not an agent


def _asgi_get(app: Any, path: str, client: tuple[str, int], headers: dict[str, str]) -> tuple[int, bytes]:
    """One request straight into the app, from any client address (a real socket only has loopback here)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raw = [(b"host", b"hivenote.local:7788")] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "client": client,
        "server": ("192.168.1.10", 7788),
    }
    anyio.run(app, scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_the_session_refuses_a_browser_on_another_machine_with_a_clear_message(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", host="0.0.0.0", port=7788, allowed_hosts=("hivenote.local",))
    with Store(tmp_path / "data") as store:
        app = create_app(settings, store)
        dashboard = {"X-Hivenote-Client": CLIENT}
        status, body = _asgi_get(app, "/api/session", ("192.168.1.20", 50123), dashboard)
        assert status == 403 and b"only to the dashboard on this machine itself" in body
        assert b"hivenote token add" in body
        assert _asgi_get(app, "/api/session", ("127.0.0.1", 50124), dashboard)[0] == 200
        assert _asgi_get(app, "/api/session", ("::1", 50125), dashboard)[0] == 200
        assert _asgi_get(app, "/", ("192.168.1.20", 50126), {})[0] == 200  # the page itself is for everyone


def test_the_session_hands_out_no_token_when_auth_is_off(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as store:
        settings = Settings(data_dir=tmp_path / "data", auth=False, port=7788, allowed_hosts=("hivenote.local",))
        app = create_app(settings, store)
        status, body = _asgi_get(app, "/api/session", ("127.0.0.1", 5000), {"X-Hivenote-Client": CLIENT})
        assert (status, body) == (200, b'{"token":"","person":""}')


# -- the dashboard's own source --------------------------------------------------------------------------------------

OWN_JS = sorted((DASHBOARD / "js").glob("*.js"))
VENDOR = DASHBOARD / "vendor"


def test_every_import_in_the_dashboard_names_a_file_that_ships() -> None:
    for source in [*OWN_JS, *VENDOR.rglob("*.js")]:
        text = source.read_text(encoding="utf-8")
        for target in re.findall(r"""(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""", text):
            path = (source.parent / target).resolve()
            made = path.relative_to(DASHBOARD).as_posix() in GENERATED  # made by the server from agents.py
            assert made or path.is_file(), f"{source.name} imports {target}"


def test_note_text_reaches_the_page_as_html_only_through_the_sanitizer() -> None:
    for source in OWN_JS:
        text = source.read_text(encoding="utf-8")
        risky = re.findall(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", text)
        if source.name == "markdown.js":
            assert risky == ["innerHTML"] and "DOMPurify.sanitize(" in text
        else:
            assert risky == [], f"{source.name} uses {risky}"


def test_every_vendored_file_is_listed_with_its_licence() -> None:
    table = (VENDOR / "LICENSES.md").read_text(encoding="utf-8")
    shipped = [p.relative_to(VENDOR).as_posix() for p in VENDOR.rglob("*.*js") if p.is_file()]
    assert len(shipped) == 6
    for name in shipped:
        assert f"`{name}`" in table, f"{name} is not in vendor/LICENSES.md"
    assert sorted(p.name for p in (VENDOR / "licenses").iterdir()) == [
        "diff-LICENSE.txt",
        "dompurify-LICENSE.txt",
        "htm-LICENSE.txt",
        "marked-LICENSE.txt",
    ]


def test_another_account_on_this_machine_gets_no_token_from_the_session(running: Running) -> None:
    """Loopback is shared by every account of a machine; tokens.json is not (0600). A process of another user
    (here `nobody`, via setpriv) must be refused even with the dashboard's header."""
    command = [*as_nobody(), "curl", "-s", "-H", f"X-Hivenote-Client: {CLIENT}", running.url + "/api/session"]
    answer = subprocess.run(command, capture_output=True, encoding="utf-8", timeout=30, check=True).stdout
    assert json.loads(answer)["error"]["code"] == "forbidden"
    assert fetch(running.url + "/api/session", {"X-Hivenote-Client": CLIENT})[0] == 200  # this account still may
