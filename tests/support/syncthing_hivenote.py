"""Real `hivenote serve` processes for the synced-folder tests: launched in their own process group on a free
127.0.0.1 port, called over REST with the owner's token, stopped (and killed if need be) on exit."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivenote.server.settings import load_settings
from hivenote.server.storage.identity import read_node
from hivenote.server.tokens import Tokens
from tests.support.live import call, free_port, health
from tests.support.system import SERVE, needs
from tests.support.wait import wait_until

START_S = 30


@dataclass
class Hivenote:
    """One server process over `data_dir` (its settings.json decides the log folder)."""

    data_dir: Path
    port: int
    token: str
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def node(self) -> str:
        return read_node(self.data_dir)

    @property
    def log_dir(self) -> Path:
        return load_settings(data_dir=self.data_dir).log_path

    def log_tail(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return json.loads(call(self.port, self.token, method, path, body))

    def has_note(self, note_id: str) -> bool:
        try:
            self.call("GET", f"/api/notes/{note_id}")
        except urllib.error.HTTPError as error:
            error.close()
            if error.code == 404:
                return False
            raise
        return True

    def state(self) -> dict[str, Any]:
        """The whole notebook as this server folds it (the export, without what names the exporter)."""
        notebook: dict[str, Any] = self.call("GET", "/api/export?format=notebook")
        for volatile in ("exported_at", "node"):
            notebook.pop(volatile)
        return notebook

    def healthy(self) -> bool:
        assert self.process.poll() is None, f"hivenote serve exited ({self.process.returncode}):\n{self.log_tail()}"
        return health(self.port) == 200

    def wait_ready(self) -> None:
        wait_until(self.healthy, START_S, lambda: f"hivenote serve answering\n{self.log_tail()}")

    def stop(self) -> int:
        """SIGTERM to its process group (what `hivenote serve` stops on), SIGKILL if it hangs; the exit code."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return -signal.SIGKILL


@needs(SERVE)
def launch(data_dir: Path) -> Hivenote:
    """Start `hivenote serve` without waiting for it (see `wait_ready`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    token = Tokens(data_dir / "tokens.json").default()  # before the server starts, so both use the same file
    port, log_path = free_port(), data_dir.parent / f"{data_dir.name}-serve.log"
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return Hivenote(data_dir, port, token, log_path, process)


@contextlib.contextmanager
def serving(*data_dirs: Path) -> Iterator[list[Hivenote]]:
    """Servers over each data dir, started together; each must stop cleanly (exit 0) when the block ends well."""
    servers: list[Hivenote] = []
    try:
        for data_dir in data_dirs:
            servers.append(launch(data_dir))
        for server in servers:
            server.wait_ready()
        yield servers
    except BaseException:
        for server in servers:
            server.stop()
        raise
    codes = [(server.stop(), server) for server in servers]
    for code, server in codes:
        assert code == 0, f"hivenote serve exited with {code}:\n{server.log_tail()}"
