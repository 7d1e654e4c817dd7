"""The frozen build (packaging/hivenote.spec, PyInstaller onedir) works without the Python environment that built it:
the launcher answers `--version`, `serve` answers /api/health, the dashboard and MCP and stops on SIGTERM, and the
modules and files the app loads by name are in the build."""

from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
import pkgutil
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

import hivenote.desktop
from hivenote.server import __version__
from hivenote.server.tokens import Tokens
from hivenote.server.web.dashboard import load_assets
from tests.support.live import free_port
from tests.support.system import needs
from tests.support.wait import wait_started

SPEC = Path(__file__).resolve().parents[2] / "packaging" / "hivenote.spec"
BUILD_TIMEOUT_S = 600  # 55-100 s on 2 cores; the limit only stops a hung build
WAIT_S = 30  # generous deadline for a start that takes about a second
# Imported from strings or chosen per OS at run time, so only the spec puts them in the build.
NAMED_MODULES = {
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "pystray._appindicator",
    "pystray._gtk",
    "pystray._xorg",
    "webview.platforms.gtk",
}
TYPELIBS = {"Gtk-3.0.typelib", "AyatanaAppIndicator3-0.1.typelib", "WebKit2-4.1.typelib", "JavaScriptCore-4.1.typelib"}


@dataclass(frozen=True)
class Build:
    folder: Path  # dist/hivenote: what a release would ship
    exe: Path


@pytest.fixture(scope="module")
@needs("PyInstaller and a minute or two of CPU to build the frozen app")
def build(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Build:
    assert importlib.util.find_spec("PyInstaller"), "PyInstaller is missing: pip install -e '.[test]'"
    root = tmp_path_factory.mktemp("pyinstaller")
    started = time.monotonic()
    where = ["--distpath", str(root / "dist"), "--workpath", str(root / "work")]
    done = subprocess.run(
        [sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm", "--log-level", "WARN", *where],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=BUILD_TIMEOUT_S,
        cwd=root,
        check=False,
    )
    assert done.returncode == 0, f"PyInstaller failed:\n{done.stderr[-6000:]}"
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # the figure the packaging README quotes, shown in CI's log
        print(f"\nPyInstaller build of packaging/hivenote.spec: {time.monotonic() - started:.0f} s")
    folder = root / "dist" / "hivenote"
    return Build(folder, folder / ("hivenote.exe" if sys.platform == "win32" else "hivenote"))


def child_env(home: Path) -> dict[str, str]:
    """This environment without Hivenote's settings or a session bus, and with a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVENOTE_") and k != "DBUS_SESSION_BUS_ADDRESS"}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"))
    return env


def run_frozen(build: Build, args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(build.exe), *args], capture_output=True, text=True, encoding="utf-8", cwd=cwd, env=env, timeout=60
    )


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    """Status, Content-Type and body of a GET, errors included."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


def wait_for_health(url: str, server: subprocess.Popen[bytes], log: Path) -> object:
    answers: list[bytes] = []

    def healthy() -> bool:
        status, _, body = get(f"{url}/api/health")
        answers.append(body)
        return status == 200

    wait_started(server, healthy, WAIT_S, log)
    return json.loads(answers[-1])


async def use_mcp(url: str, token: str) -> tuple[set[str], bool, set[str]]:
    """The notebook's tool names, whether brain_remember failed, and the memory-graph endpoint's tool names."""
    headers = {"Authorization": f"Bearer {token}"}
    info = Implementation(name="hivenote-frozen-test", version="1.0")
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:

        def client(path: str) -> Client:  # the initialize handshake, as today's agents connect
            return Client(streamable_http_client(url + path, http_client=http), client_info=info, mode="legacy")

        with anyio.fail_after(WAIT_S):
            async with client("/mcp") as notebook_client:
                notebook = {tool.name for tool in (await notebook_client.list_tools()).tools}
                stored = await notebook_client.call_tool("brain_remember", {"kind": "fact", "title": "Frozen"})
            async with client("/mcp/graph") as graph_client:
                graph = {tool.name for tool in (await graph_client.list_tools()).tools}
    return notebook, stored.is_error, graph


def test_the_frozen_launcher_prints_its_version(build: Build, tmp_path: Path) -> None:
    done = run_frozen(build, ["--version"], tmp_path, child_env(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"hivenote {__version__}\n", "")


def test_the_frozen_server_serves_the_dashboard_and_mcp_and_stops_on_sigterm(build: Build, tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "serve.log"
    url = f"http://127.0.0.1:{free_port()}"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(build.exe), "serve", "--port", url.rsplit(":", 1)[1], "--data-dir", str(data)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=child_env(tmp_path),
        )
    try:
        assert wait_for_health(url, server, log) == {"ok": True, "version": __version__}

        status, media_type, page = get(f"{url}/")
        assert (status, media_type) == (200, "text/html; charset=utf-8")
        assert re.search(rb'<script type="module" src="/ui/@\w+/js/main.js"></script>', page)
        assert f'<meta name="hivenote-version" content="{__version__}">'.encode() in page
        # Every dashboard file, byte for byte as this install ships it: dashboard/** is package data.
        shipped = load_assets()
        assert {"index.html", "app.css", "js/main.js", "js/boot.js"} <= shipped.keys()
        for name, asset in shipped.items():
            if name != "index.html":  # served with the version filled in, checked above
                assert get(f"{url}/ui/{name}")[::2] == (200, asset.body), name
        assert set(re.findall(rb'="/ui/@\w+/([^"]+)"', page)) <= {name.encode() for name in shipped}

        token = Tokens(data / "tokens.json").default()  # the server wrote it at start
        notebook, failed, graph = anyio.run(use_mcp, url, token)
        assert {"brain_remember", "brain_search"} <= notebook and not failed
        official = json.loads(
            (importlib.resources.files("hivenote.server.mcp") / "official_memory_tools.json").read_text(
                encoding="utf-8"
            )
        )
        assert graph == {tool["name"] for tool in official["tools"]}

        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=WAIT_S) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    output = log.read_text(encoding="utf-8")
    assert f"Hivenote {__version__} serving {data} on {url}" in output
    assert "Traceback" not in output, output


def test_the_frozen_doctor_finds_the_tray_and_window_toolkits(build: Build, tmp_path: Path) -> None:
    # A display that is never opened: the checks load GObject typelibs (from the build), they draw nothing.
    env = child_env(tmp_path) | {"DISPLAY": ":97"}
    done = run_frozen(build, ["doctor", "--json", "--data-dir", str(tmp_path / "data")], tmp_path, env)
    assert done.returncode == 0, done.stderr
    desktop = json.loads(done.stdout)["desktop"]
    assert (desktop["tray"]["backend"], desktop["window"]["backend"]) == ("appindicator", "gtk"), desktop


def test_the_frozen_build_holds_what_is_loaded_by_name(build: Build) -> None:
    listing = subprocess.run(
        [sys.executable, "-m", "PyInstaller.utils.cliutils.archive_viewer", "--recursive", "--brief", str(build.exe)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    modules = {line.strip() for line in listing.stdout.splitlines()}
    desktop = {info.name for info in pkgutil.iter_modules(hivenote.desktop.__path__, "hivenote.desktop.")}
    assert {"hivenote.desktop.main", "hivenote.desktop.window"} <= desktop  # whatever else the desktop has by now
    assert NAMED_MODULES | desktop <= modules, sorted((NAMED_MODULES | desktop) - modules)

    internal = build.folder / "_internal"
    icons = importlib.resources.files("hivenote.assets") / "icons"
    shipped = {item.name: item.read_bytes() for item in icons.iterdir() if item.name.endswith((".png", ".svg"))}
    assert "hivenote.png" in shipped
    assert {p.name: p.read_bytes() for p in (internal / "hivenote/assets/icons").iterdir()} == shipped
    server_data = {p.name for p in (internal / "hivenote/server").iterdir()}
    assert server_data == {"dashboard", "mcp", "py.typed"}  # and no source files
    assert {p.name for p in (internal / "hivenote/server/mcp").iterdir()} == {"official_memory_tools.json"}
    assert {p.name for p in (internal / "gi_typelibs").iterdir()} >= TYPELIBS
