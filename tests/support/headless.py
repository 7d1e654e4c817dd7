"""Hivenote without its desktop parts, driven through its launcher in child processes: `hivenote serve` answering
REST, the dashboard and MCP (through `hivenote stdio`), and the desktop commands refusing with exit code 6.

`launcher` is the command that starts `hivenote`: a fresh venv's `bin/hivenote` (tests/packaging) or this
interpreter with the desktop packages' imports failing as where they are not installed (tests/desktop)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, TextContent

from tests.support.live import exchange, free_port

DESKTOP_IMPORTS = ("pystray", "webview", "PIL", "pyperclip", "gi", "Xlib", "PyObjCTools")
TRIED = "hivenote test: tried to import"
# This interpreter as `hivenote`, with each desktop package's import failing (None in sys.modules), and every
# `import` of one told on stderr, so an attempt is seen even where the ImportError is caught.
_BLOCKING = f"""
import builtins, sys
for name in {DESKTOP_IMPORTS!r}:
    sys.modules[name] = None
_import = builtins.__import__
def _telling(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split(".")[0] in {DESKTOP_IMPORTS!r}:
        sys.stderr.write("{TRIED} " + name + chr(10))
    return _import(name, globals, locals, fromlist, level)
builtins.__import__ = _telling
from hivenote.desktop.main import main
raise SystemExit(main())
"""
BLOCKED_LAUNCHER = [sys.executable, "-c", _BLOCKING]
MISSING_ON_LINUX = "missing: pystray, pywebview, pillow, pyperclip, PyGObject, python-xlib"
WAIT_S = 60  # generous: a cold start takes about a second


def home_env(home: Path) -> dict[str, str]:
    """This environment with a home of its own, no Hivenote settings, no display and no session bus."""
    drop = {"DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVENOTE_") and k not in drop}
    env |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share")}
    return env | {"HIVENOTE_DATA_DIR": str(home / "data")}


def run(launcher: Sequence[str], env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*launcher, *args], input=stdin, capture_output=True, text=True, encoding="utf-8", env=env, timeout=WAIT_S
    )


def assert_refused_without_desktop_parts(done: subprocess.CompletedProcess[str], install: str) -> None:
    """Exit code 6, nothing on stdout, and on stderr what is missing, what works without it, and the command."""
    assert (done.returncode, done.stdout) == (6, ""), done.stderr
    assert done.stderr.startswith("hivenote: ") and "Traceback" not in done.stderr, done.stderr
    assert TRIED not in done.stderr, done.stderr
    assert "needs Hivenote's desktop parts, which are not installed here" in done.stderr
    assert MISSING_ON_LINUX in done.stderr and "`hivenote serve`" in done.stderr
    assert f"To install the desktop parts: {install}\n" in done.stderr


def serve_and_use(launcher: Sequence[str], env: dict[str, str], log: Path) -> None:
    """`hivenote serve` on 127.0.0.1: /api/status with the token, the dashboard page, an MCP agent storing and
    finding a note through `hivenote stdio`; SIGTERM ends it with exit code 0 and no traceback."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as errors:
        server = subprocess.Popen(
            [*launcher, "serve", "--port", str(port)], stdout=subprocess.PIPE, stderr=errors, env=env
        )
    try:
        assert server.stdout is not None
        first = _first_line(server, WAIT_S)
        assert first.startswith("Hivenote ") and f"on {url}" in first, first + log.read_text("utf-8")

        token = run(launcher, env, "token", "show").stdout.strip()
        status, _, body = exchange(_authorized(f"{url}/api/status", token))
        assert status == 200, body
        assert json.loads(body)["counts"]["notes"] == 0
        status, headers, page = exchange(f"{url}/")
        assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
        assert re.search(rb'<script type="module" src="/ui/@\w+/js/main.js"></script>', page)

        found = anyio.run(_remember_and_search, launcher, env, port)
        assert "Headless works" in found

        status, _, body = exchange(_authorized(f"{url}/api/status", token))
        assert json.loads(body)["counts"]["notes"] == 1
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=WAIT_S) == 0, log.read_text("utf-8")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()
    assert "Traceback" not in log.read_text("utf-8") and TRIED not in log.read_text("utf-8")


def _first_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    """The process's first line of output, which `serve` prints once it listens (select: no busy wait)."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"`hivenote serve` printed nothing in {timeout} s"
        chunk = os.read(process.stdout.fileno(), 1)
        assert chunk, f"`hivenote serve` exited ({process.wait()}) before it listened"
        line += chunk
    return line.decode("utf-8")


def _authorized(url: str, token: str) -> urllib.request.Request:
    return urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})


async def _remember_and_search(launcher: Sequence[str], env: dict[str, str], port: int) -> str:
    params = StdioServerParameters(command=launcher[0], args=[*launcher[1:], "stdio", "--port", str(port)], env=env)
    client = Client(params, client_info=Implementation(name="claude-ai", version="0.1.0"), mode="legacy")
    with anyio.fail_after(WAIT_S):
        async with client:
            assert "brain_remember" in {tool.name for tool in (await client.list_tools()).tools}
            stored = await client.call_tool("brain_remember", {"kind": "fact", "title": "Headless works"})
            assert not stored.is_error, stored
            result = await client.call_tool("brain_search", {"query": "headless"})
            assert isinstance(result.content[0], TextContent)
            return result.content[0].text
