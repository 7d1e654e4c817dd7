"""What a hostile peer can make a real `hivenote serve` hold or keep (issue 33 item 4): an answer far past the
bytes asked for is read only up to the limit (plus one line) and refused, never buffered whole; a note body past the
64 KiB every writer keeps to is damage from a peer as from the API, reported and never folded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hivenote.server.sync.peerbook import add_peer
from hivenote.server.tokens import new_token
from tests.security.test_log_folder_files import get, notes, op_line, serving
from tests.support.proc import rss_mb, settle
from tests.support.wait import wait_until

FLOOD = 600 << 20  # the range answer of the attack run
EVIL = "evil-0009"


@contextlib.contextmanager
def flooding_peer(first: bytes, size: int) -> Iterator[tuple[str, list[str]]]:
    """A peer that lists one shard of `size` bytes and answers any range of it with all of them: `first`, then as
    many bytes of one endless line as it takes (written as they go, so this process holds none of it)."""
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            served.append(self.path)
            if urlsplit(self.path).path == "/sync/shards":
                head = hashlib.sha256(first[: first.find(b"\n") + 1]).hexdigest()
                body = json.dumps({"node": "hostile-0001", "shards": {EVIL: {"size": size, "head": head, "seq": 2}}})
                self._head("application/json", len(body))
                self.wfile.write(body.encode())
                return
            self._head("application/octet-stream", size, prefix=hashlib.sha256(b"").hexdigest())
            with contextlib.suppress(OSError):  # the puller hangs up once it has read enough
                self.wfile.write(first)
                block, left = b"x" * (1 << 20), size - len(first)
                while left > 0:
                    self.wfile.write(block[:left])
                    left -= len(block)

        def _head(self, kind: str, length: int, prefix: str = "") -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(length))
            if prefix:
                self.send_header("X-Shard-Prefix", prefix)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def peer_error(port: int, token: str, url: str) -> str:
    transports = get(port, token, "/api/status")[1]["sync"]["transports"]
    return str(next((t.get("error", "") for t in transports if t.get("target") == url), ""))


def test_a_range_answer_far_past_the_limit_is_refused_without_being_held(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True)
    first = op_line(EVIL, 1, "the bait")
    with flooding_peer(first, FLOOD) as (url, served), serving(data_dir) as (process, port, token):
        settle(process.pid)  # start-up work done: what it holds idle
        idle = peak = rss_mb(process.pid)
        add_peer(data_dir, url, new_token())  # the running server reads peers.json again every second

        def refused() -> bool:
            nonlocal peak
            peak = max(peak, rss_mb(process.pid))
            return "more than the" in peer_error(port, token, url)

        wait_until(refused, 60, what=lambda: f"{peer_error(port, token, url)!r}, {served[-3:]}")
        wait_until(lambda: sum("/sync/shards/" in p for p in served) >= 3, 60, what="the peer asked again")
        peak = max(peak, rss_mb(process.pid))
        assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"
        assert not (data_dir / "log" / f"{EVIL}.jsonl").exists()  # nothing of the answer kept
        assert notes(port, token) == 0


def test_a_note_body_past_64_kib_from_a_peer_is_damage_reported_and_never_folded(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True)
    shard = op_line(EVIL, 1, "an ordinary note")
    big = json.loads(op_line(EVIL, 2, "a huge one"))
    big["fields"]["body"] = "y" * (200 << 10)  # a line well under 1 MiB, a body three times the limit
    shard += json.dumps(big).encode() + b"\n"
    with flooding_peer(shard, len(shard)) as (url, _):
        add_peer(data_dir, url, new_token())
        with serving(data_dir) as (_, port, token):
            wait_until(lambda: (data_dir / "log" / f"{EVIL}.jsonl").exists() and notes(port, token) >= 1, 60)
            health = get(port, token, "/api/status")[1]["shards"][f"{EVIL}.jsonl"]
            assert notes(port, token) == 1, health
            assert health["bad_lines"] == 1 and "body is over 65536 bytes" in health["problems"][0]["reason"], health
