"""A real `hivenote serve` of a data dir on 127.0.0.1 for the tests that put files in its log folder or answer it as
a peer, and the few calls they make of it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hivenote.server.tokens import Tokens
from tests.support.live import exchange, free_port, health
from tests.support.system import SERVE, needs
from tests.support.wait import wait_started

START_S = 30


def op_line(node: str, seq: int, title: str) -> bytes:
    op = {"v": 1, "node": node, "seq": seq, "hlc": [1_764_495_000_000 + seq, 0], "op": "note.set"}
    op |= {"id": f"01JDX{node[:3].upper()}{seq:017d}", "fields": {"kind": "fact", "title": title}}
    return json.dumps(op).encode() + b"\n"


@needs(SERVE)
@contextlib.contextmanager
def serving(data_dir: Path, prefix: list[str] | None = None) -> Iterator[tuple[subprocess.Popen[bytes], int, str]]:
    """A real `hivenote serve` on 127.0.0.1 (its log beside the data dir), the owner's token."""
    token = Tokens(data_dir / "tokens.json").default()
    port = free_port()
    argv = [*(prefix or []), sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir)]
    log = data_dir.parent / "serve.log"
    with log.open("ab") as sink:
        process = subprocess.Popen([*argv, "serve", "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT)
    try:
        wait_started(process, lambda: health(port) == 200, START_S, log)
        yield process, port, token
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def get(port: int, token: str, path: str, timeout: float = 10) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"})
    status, _, body = exchange(request, timeout=timeout)
    return status, json.loads(body) if body.startswith(b"{") else body


def notes(port: int, token: str) -> int:
    return int(get(port, token, "/api/status")[1]["counts"]["notes"])
