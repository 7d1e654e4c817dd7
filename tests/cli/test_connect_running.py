"""What the clients are told (issue 14 items 15, 16, 17): snippets name the server actually running for the data dir
(its URL, the data dir when it is not the default, the launcher by its absolute path), `doctor` says where it
runs, and `hivenote stop` stops whichever server holds the data dir, even one `hivenote stdio` started."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.server.storage.identity import lock_holder
from hivenote.server.storage.serverfile import running_server
from tests.support.live import exchange, free_port, health, initialize
from tests.support.wait import wait_started, wait_until

pytestmark = pytest.mark.system  # `hivenote serve` and `hivenote stdio` as processes

WAIT_S = 60


def hivenote(data: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), *args]
    return subprocess.run(argv, input=stdin, capture_output=True, encoding="utf-8", timeout=120, check=False)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    data, port = tmp_path / "elsewhere", free_port()
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), "serve", "--port", str(port)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_started(process, lambda: health(port) == 200 and running_server(data) is not None, WAIT_S)
        yield data, port
    finally:
        process.terminate()
        process.wait(30)


def test_snippets_name_the_running_server_its_data_dir_and_the_launchers_full_path(served: tuple[Path, int]) -> None:
    data, port = served
    cursor = json.loads(hivenote(data, "--json", "connect", "cursor").stdout)
    assert json.loads(cursor["text"])["mcpServers"]["hivenote"]["url"] == f"http://127.0.0.1:{port}/mcp"
    desktop = json.loads(hivenote(data, "--json", "connect", "claude-desktop", "--graph").stdout)
    entry = json.loads(desktop["text"])["mcpServers"]["hivenote-graph"]
    command = Path(entry["command"])
    assert command.is_absolute() and command.is_file() and os.access(command, os.X_OK), command
    assert entry["args"][:2] == ["--data-dir", str(data)] and "stdio" in entry["args"]
    assert ["--port", str(port)] == entry["args"][entry["args"].index("--port") :][:2]
    # The very command the snippet gives reaches that server and answers a client.
    done = subprocess.run(
        [str(command), *entry["args"]],
        input=json.dumps(initialize("claude-ai")) + "\n",
        capture_output=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"], done.stderr
    doctor = hivenote(data, "doctor").stdout
    assert f"127.0.0.1:{port}" in doctor.split("listens on:")[1].splitlines()[0], doctor


def test_the_codex_snippet_says_how_its_token_is_provided(served: tuple[Path, int]) -> None:
    data, _ = served
    codex = json.loads(hivenote(data, "--json", "connect", "codex").stdout)
    assert "HIVENOTE_TOKEN" in codex["text"] and "environment" in codex["text"]


def test_stop_ends_the_server_that_stdio_started_in_the_background(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    hello = initialize("zed")
    try:
        done = hivenote(data, "stdio", "--port", str(port), stdin=json.dumps(hello) + "\n")
        assert done.returncode == 0, done.stderr
        assert lock_holder(data), "stdio should have left its server running"
        stopped = hivenote(data, "stop")
        assert stopped.returncode == 0 and "Stopped" in stopped.stdout, stopped.stderr
        assert lock_holder(data) is None and health(port) is None
        again = hivenote(data, "stop")
        assert again.returncode == 0 and "No Hivenote server is running" in again.stdout
    finally:
        pid = lock_holder(data)
        if pid:
            os.kill(pid, 15)
            wait_until(lambda: lock_holder(data) is None, timeout=30)


def test_open_signs_the_browser_in_without_the_code_on_any_command_line(
    served: tuple[Path, int], tmp_path: Path
) -> None:
    """`hivenote open`: the browser is started with a private file's address, the file sends it on to the dashboard
    with a one-time code (a command line is every account's to read in /proc: the code must not be on one)."""
    data, port = served
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    seen = tmp_path / "browser-argv.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n', encoding="utf-8")
    browser.chmod(0o755)
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data), "open"]
    env = {**os.environ, "BROWSER": str(browser), "XDG_RUNTIME_DIR": str(runtime)}
    done = subprocess.run(argv, env=env, capture_output=True, encoding="utf-8", timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    opened = seen.read_text(encoding="utf-8").strip()
    assert opened.startswith("file://") and "code" not in opened, opened
    page = Path(opened.removeprefix("file://"))
    assert page.parent == runtime and oct(page.stat().st_mode & 0o777) == "0o600"
    found = re.search(r'url=(http://[^"]+\?code=([\w-]+))"', page.read_text(encoding="utf-8"))
    assert found is not None and found.group(1).startswith(f"http://127.0.0.1:{port}/")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/session",
        json.dumps({"code": found.group(2)}).encode(),
        {"X-Hivenote-Client": "hivenote-dashboard/test", "Content-Type": "application/json"},
    )
    status, headers, _ = exchange(request)
    assert status == 200 and "HttpOnly" in headers["set-cookie"]
    assert exchange(request)[0] == 403  # once


def test_open_says_when_no_server_runs(tmp_path: Path) -> None:
    done = hivenote(tmp_path / "nothing", "open")
    assert done.returncode != 0 and "No Hivenote server is running" in done.stderr
