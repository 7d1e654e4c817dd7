"""`hivenote stdio` sends the owner's token only to the Hivenote of its own data dir (issue 14 items 6 and 17): a
program of another account holding the port while Hivenote is down, or another data dir's Hivenote on the same
port, gets no token, and the client is told what holds the port."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.live import free_port, initialize
from tests.support.wait import wait_until

pytestmark = pytest.mark.system  # the stdio bridge as a process, against servers

INITIALIZE = initialize("claude-ai")


class Impostor(BaseHTTPRequestHandler):
    """Answers like a Hivenote would (health, and any MCP post) and keeps every Authorization header it is sent."""

    seen: ClassVar[list[str]] = []

    def _answer(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        Impostor.seen.append(self.headers.get("Authorization", ""))
        self._answer({"ok": True, "version": "0.1.0"})

    def do_POST(self) -> None:
        Impostor.seen.append(self.headers.get("Authorization", ""))
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-06-18", "capabilities": {}}})

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def impostor(port: int) -> Iterator[list[str]]:
    Impostor.seen.clear()
    server = ThreadingHTTPServer(("127.0.0.1", port), Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Impostor.seen
    finally:
        server.shutdown()
        server.server_close()


def stdio(data_dir: Path, port: int) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data_dir), "stdio", "--port", str(port)]
    return subprocess.run(argv, input=json.dumps(INITIALIZE) + "\n", capture_output=True, encoding="utf-8", timeout=120)


def test_the_bridge_never_sends_the_token_to_a_program_holding_the_port(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = Tokens(data / "tokens.json").default()
    port = free_port()
    with impostor(port) as seen:
        done = stdio(data, port)
    assert not any(token in header for header in seen), "the owner's token went to whatever held the port"
    assert done.returncode != 0
    assert f"127.0.0.1:{port}" in done.stderr and "not the Hivenote of" in done.stderr, done.stderr
    assert "--port" in done.stderr  # what to do
    (answer,) = [json.loads(line) for line in done.stdout.splitlines()]  # the client is told, with its request's id
    assert answer["id"] == 1 and "not the Hivenote of" in answer["error"]["message"]


def test_another_data_dirs_hivenote_on_the_port_is_named_as_the_cause(tmp_path: Path) -> None:
    """Two stdio configs with different data dirs on one port: the second used to get "needs a token" (401)."""
    port = free_port()
    other = tmp_path / "other"
    sock = bind("127.0.0.1", port)
    settings = replace(Settings(data_dir=other), port=port)
    with Store(other) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        try:
            done = stdio(tmp_path / "mine", port)
        finally:
            server.stop()
    assert done.returncode != 0
    assert "another data dir" in done.stderr and str(tmp_path / "mine") in done.stderr, done.stderr
    assert "another data dir" in json.loads(done.stdout)["error"]["message"]
