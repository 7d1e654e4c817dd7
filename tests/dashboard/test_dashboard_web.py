"""The dashboard's HTTP side: its headers, the loopback-only session, and checks on its own source files."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.sync_api import Page, expect

from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.web.app import create_app
from hivenote.server.web.dashboard import CSP, GENERATED, Asset, built, load_assets
from tests.support.dashboard import CLIENT, api, seed
from tests.support.live import Running, dashboard_url, exchange, fetch, serve, sign_in_code, signed_in
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
    assert re.sub(r"/ui/@\w+/", "/ui/", " ".join(re.findall(r"<script\b[^>]*>", page))) == (
        '<script type="module" async src="/ui/js/boot.js"> <script type="module" src="/ui/js/main.js">'
    )
    assert "<style" not in page and " style=" not in page and not re.search(r"\son\w+=", page)


def test_the_page_names_its_files_by_build_and_they_are_cached_for_good(running: Running) -> None:
    """A return visit costs the page and its data, not a revalidation of every module (twelve round trips before the
    first cards): the page's files are addressed by a digest of every file, so a new version is a new address."""
    _, page_headers, body = _get(running.url + "/")
    assert page_headers["cache-control"] == "no-cache"
    named = re.findall(r'"(/ui/[^"]+)"', body.decode())
    build = {re.sub(r"^/ui/(@\w+)/.*", r"\1", path) for path in named}
    assert len(named) >= 10 and len(build) == 1 and next(iter(build)).startswith("@"), named
    for path in named:
        status, headers, data = _get(running.url + path)
        assert status == 200 and headers["cache-control"] == "max-age=31536000, immutable", path
        assert {k: headers[k] for k in STRICT} == STRICT
        plain = _get(running.url + path.replace(f"/ui/{next(iter(build))}/", "/ui/"))
        assert plain[0] == 200 and plain[1]["cache-control"] == "no-cache" and plain[2] == data, path
    status, headers, answer = _get(running.url + "/ui/@0123456789abcdef/js/main.js")
    assert status == 404 and json.loads(answer)["error"]["message"] == (
        "This dashboard file is from another version of Hivenote: reload the page."
    )
    assert headers["content-security-policy"] == CSP


def test_a_changed_file_is_a_new_build_and_a_new_page() -> None:
    """One changed byte anywhere changes every address the page names, and the page's own ETag (of the bytes sent,
    so a browser holding the page of an older version is never told it is current)."""
    first, build = built(load_assets())
    assert built(load_assets())[0]["index.html"] == first["index.html"]
    changed = load_assets()
    changed["js/notes.js"] = Asset(changed["js/notes.js"].body + b"\n", "text/javascript", '"changed"')
    second, other = built(changed)
    assert other != build
    assert second["index.html"].etag != first["index.html"].etag
    page, again = first["index.html"].body.decode(), second["index.html"].body.decode()
    assert page.count(f"/ui/@{build}/") == again.count(f"/ui/@{other}/") >= 10
    assert again == page.replace(build, other)


def _trade(running: Running, code: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    dashboard = {"X-Hivenote-Client": CLIENT, "Content-Type": "application/json"}
    return fetch(running.url + "/api/session", {**dashboard, **(headers or {})}, json.dumps({"code": code}).encode())


def test_a_one_time_code_signs_the_dashboard_in_with_a_private_cookie_once(running: Running) -> None:
    """Issue 33 item 1: the session no longer guesses who calls from the network. The tray (or `hivenote open`)
    asks for a code with the owner's token; the page trades it once for an HttpOnly, SameSite=Strict cookie."""
    code = sign_in_code(running.url, running.token)
    status, headers, body = _trade(running, code)
    assert (status, body) == (200, {"person": ""})  # no token in the answer: the page never holds one
    port = running.url.rsplit(":", 1)[1]
    name, _, attributes = headers["set-cookie"].partition(";")
    assert name.startswith(f"hivenote-{port}=")
    assert {a.strip() for a in attributes.split(";")} >= {"HttpOnly", "SameSite=Strict", "Path=/"}
    assert _trade(running, code)[0] == 403  # once only
    for refused in (
        {"X-Hivenote-Client": "cursor/1.0"},  # not the dashboard
        {"Sec-Fetch-Site": "cross-site"},  # the browser says another site asked
        {"Sec-Fetch-Site": "same-site"},  # another port of this host
    ):
        fresh = sign_in_code(running.url, running.token)
        status, headers, body = _trade(running, fresh, refused)
        assert status == 403 and "set-cookie" not in headers and "hivenote open" in body["error"]["message"], refused
    status, _, body = _trade(running, sign_in_code(running.url, running.token), {"Origin": "http://evil.test"})
    assert (status, body["error"]["code"]) == (403, "bad_origin")
    assert _trade(running, "guessed")[0] == 403
    listed = [a["client"] for a in api(running, "/api/agents")["agents"]]
    assert not [c for c in listed if c.startswith("hivenote-dashboard")]  # a person at the dashboard is not an agent


def test_the_cookie_counts_only_on_the_dashboards_own_requests_to_api_and_desktop(running: Running) -> None:
    """A cookie is ambient: the browser sends it with whatever any page on any port of this host asks. It counts
    only with the dashboard's client header (which a page elsewhere cannot send without a preflight, never
    granted), a same-origin request, and only on /api and /desktop; it cannot make codes that would outlive it."""
    cookie = signed_in(running, CLIENT)
    assert fetch(running.url + "/api/notes", cookie)[0] == 200
    just_the_cookie = {"Cookie": cookie["Cookie"]}
    for headers in (
        just_the_cookie,  # an <img>, a form, a no-cors fetch from another page
        {**cookie, "Sec-Fetch-Site": "same-site"},  # a page on another port of 127.0.0.1
        {**cookie, "Sec-Fetch-Site": "cross-site"},
    ):
        status, _, body = fetch(running.url + "/api/notes", headers)
        assert (status, body["error"]["code"]) == (403, "forbidden"), headers
    other_port = running.url.rsplit(":", 1)[0] + ":1"
    assert fetch(running.url + "/api/notes", {**cookie, "Origin": other_port})[0] == 403
    for path in ("/mcp", "/sync/shards"):
        assert fetch(running.url + path, cookie)[0] == 401, path
    status, _, answer = exchange(urllib.request.Request(running.url + "/api/session/code", b"", cookie, method="POST"))
    assert status == 403 and b"Bearer" in answer
    name, value = cookie["Cookie"].split("=", 1)
    other = "1" if value.endswith("0") else "0"  # the signature's last digit changed (it was "0" one time in 16)
    expired = f"{int(value.split('.')[0]) - 8 * 24 * 3600}.{value.split('.')[1]}"
    for forged in (f"{value[:-1]}{other}", "1.abc", expired):
        assert fetch(running.url + "/api/notes", {**cookie, "Cookie": f"{name}={forged}"})[0] == 401, forged


def test_a_cookie_outlives_a_restart_and_dies_with_the_owners_token(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        cookie = signed_in(running, CLIENT)
    with serve(tmp_path / "data") as again:  # another port: the same cookie value under that port's name
        name = f"hivenote-{again.url.rsplit(':', 1)[1]}"
        moved = {**cookie, "Cookie": f"{name}={cookie['Cookie'].split('=', 1)[1]}"}
        assert fetch(again.url + "/api/notes", moved)[0] == 200
    (tmp_path / "other").mkdir()
    with serve(tmp_path / "other") as stranger:  # another data dir: another owner's token
        name = f"hivenote-{stranger.url.rsplit(':', 1)[1]}"
        moved = {**cookie, "Cookie": f"{name}={cookie['Cookie'].split('=', 1)[1]}"}
        assert fetch(stranger.url + "/api/notes", moved)[0] == 401


def _asgi(
    app: Any, method: str, path: str, client: tuple[str, int], headers: dict[str, str], body: bytes = b""
) -> tuple[int, bytes]:
    """One request straight into the app, from any client address (a real socket only has loopback here)."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raw = [(b"host", b"hivenote.local:7788")] + [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
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


def test_a_browser_on_another_machine_gets_nothing_without_a_code_and_is_told_to_paste_a_token(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "data", host="0.0.0.0", port=7788, allowed_hosts=("hivenote.local",))
    with Store(tmp_path / "data") as store:
        app = create_app(settings, store)
        dashboard = {"X-Hivenote-Client": CLIENT, "Content-Type": "application/json"}
        status, body = _asgi(app, "POST", "/api/session", ("192.168.1.20", 50123), dashboard, b'{"code": "x"}')
        assert status == 403 and b"hivenote token add" in body
        assert _asgi(app, "GET", "/api/settings", ("192.168.1.20", 50124), dashboard)[0] == 401
        assert _asgi(app, "GET", "/", ("192.168.1.20", 50126), {})[0] == 200  # the page itself is for everyone


def test_with_auth_off_the_dashboard_needs_no_sign_in(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as store:
        settings = Settings(data_dir=tmp_path / "data", auth=False, port=7788, allowed_hosts=("hivenote.local",))
        app = create_app(settings, store)
        assert _asgi(app, "GET", "/api/settings", ("127.0.0.1", 5000), {"X-Hivenote-Client": CLIENT})[0] == 200


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
    (here `nobody`, via setpriv) gets nothing from the session, with the dashboard's header or without."""
    for data in ([], ["--data-binary", '{"code": "guessed"}', "-H", "Content-Type: application/json"]):
        command = [
            *as_nobody(),
            "curl",
            "-s",
            "-H",
            f"X-Hivenote-Client: {CLIENT}",
            *data,
            running.url + "/api/session",
        ]
        answer = subprocess.run(command, capture_output=True, encoding="utf-8", timeout=30, check=True).stdout
        assert running.token not in answer and "error" in json.loads(answer), answer


ATTACK_PAGE = """<!doctype html><title>attack</title>
<form method="post" action="TARGET/api/notes" enctype="text/plain" target="sink">
  <input name='{"kind": "fact", "title": "planted by a form", "x": "' value='"}'></form>
<iframe name="sink"></iframe>
<script>
const target = "TARGET";
const body = JSON.stringify({ kind: "fact", title: "planted by fetch" });
const loaded = new Promise((done) => { document.querySelector("iframe").onload = done; });
document.querySelector("form").submit();
Promise.allSettled([
  fetch(target + "/api/notes", { method: "POST", mode: "no-cors", credentials: "include", body }),
  fetch(target + "/api/notes", {
    method: "POST", credentials: "include", body,
    headers: { "Content-Type": "application/json", "X-Hivenote-Client": "hivenote-dashboard/0" },
  }),
  fetch(target + "/api/notes?limit=5", { credentials: "include" })
    .then((r) => r.text())
    .then((t) => { window.leaked = t; }),
  fetch(target + "/api/session/code", { method: "POST", mode: "no-cors", credentials: "include" }),
  loaded,
]).then(() => { document.title = "done"; });
</script>"""


def test_a_page_on_another_port_of_this_host_cannot_ride_the_dashboards_cookie(running: Running, page: Page) -> None:
    """SameSite=Strict keeps other sites' pages from sending the cookie, but every port of 127.0.0.1 is the same
    site, and another account may serve a page there: in real Chromium, that page's form, fetches with credentials
    and a forged client header (which needs a preflight) write nothing, read nothing and make no code."""
    seed(running)
    page.goto(dashboard_url(running, "/"))
    expect(page.locator(".cards .card")).to_have_count(8, timeout=30_000)
    assert next(c for c in page.context.cookies() if c["name"].startswith("hivenote-"))["httpOnly"]

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = ATTACK_PAGE.replace("TARGET", running.url).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    carried: list[str] = []
    page.on("request", lambda r: carried.append(r.all_headers().get("cookie", "")) if running.url in r.url else None)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker) as attacker:
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
            expect(page).to_have_title("done", timeout=30_000)
        finally:
            attacker.shutdown()
    assert any("hivenote-" in c for c in carried), "the browser did not even send the cookie: nothing was tried"
    assert page.evaluate("window.leaked") is None
    titles = [n["title"] for n in api(running, "/api/notes?limit=50")["results"]]
    assert len(titles) == 8 and not [t for t in titles if "planted" in t], titles
