"""Real `hivenote serve` processes for the peer-sync tests: each on its own free 127.0.0.1 port (kept across
restarts, as a peer's URL is), in its own process group, called over REST with the owner's token; stopped cleanly,
or killed, and always reaped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hivenote.server.storage.identity import read_node
from hivenote.server.tokens import Tokens
from tests.support.live import call, exchange, free_port, health
from tests.support.system import SERVE, needs
from tests.support.wait import wait_until

START_S = 30
WAIT_S = 20  # for anything that should take a second or two


@needs(SERVE)
@dataclass
class Node:
    """One data dir and the port its server listens on; `start` and `stop` as often as needed."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    env: dict[str, str] | None = None  # the process's environment (None: this one's), e.g. a wall clock set wrong

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def node(self) -> str:
        return read_node(self.data_dir)

    @property
    def token(self) -> str:
        return Tokens(self.data_dir / "tokens.json").default()

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}-serve.log"

    def log_tail(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-3000:]

    def start(self) -> None:
        """Launch `hivenote serve` (see `wait_ready`)."""
        assert self.process is None, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.token  # noqa: B018 - created before the server starts, so both use the same file
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(self.data_dir), "serve"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [*argv, "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
            )

    def healthy(self) -> bool:
        assert self.process is not None and self.process.poll() is None, f"serve exited:\n{self.log_tail()}"
        return health(self.port) == 200

    def wait_ready(self) -> None:
        wait_until(self.healthy, START_S, lambda: f"hivenote serve answering\n{self.log_tail()}")

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        """`sig` to its process group (SIGTERM stops `hivenote serve` cleanly), SIGKILL if it hangs; the exit code."""
        process, self.process = self.process, None
        if process is None:
            return 0
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            return process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return -signal.SIGKILL

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return json.loads(call(self.port, self.token, method, path, body))

    def remember(self, title: str) -> str:
        made = self.call("POST", "/api/notes", {"kind": "fact", "title": title})
        return str(made["note"]["id"])

    def titles(self) -> set[str]:
        found = self.call("GET", "/api/notes?limit=200")
        return {note["title"] for note in found["results"]}

    def shard(self, node: str) -> bytes:
        """This data dir's copy of `node`'s shard (b"" when it has none)."""
        try:
            return (self.data_dir / "log" / f"{node}.jsonl").read_bytes()
        except FileNotFoundError:
            return b""

    def peers(self) -> dict[str, dict[str, Any]]:
        """peers.json as the server keeps it, by URL."""
        try:
            raw = json.loads((self.data_dir / "peers.json").read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):  # not written yet, or caught between write and rename
            return {}
        return {p["url"]: p for p in raw["peers"]}


@contextlib.contextmanager
def running(*nodes: Node) -> Iterator[None]:
    """Start the nodes together and wait for each; those still running at the end must stop cleanly (exit 0)."""
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_ready()
        yield
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    codes = [(node.stop(), node) for node in nodes if node.process is not None]
    for code, node in codes:
        assert code == 0, f"hivenote serve exited with {code}:\n{node.log_tail()}"


def fetch(
    url: str, token: str | None, method: str = "GET", data: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one request (errors included, not raised)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return exchange(urllib.request.Request(url, data, headers, method=method))
