"""What a hostile peer can make a real `hivenote serve` hold or keep (issue 33 item 4): an answer far past the
bytes asked for is read only up to the limit (plus one line) and refused, never buffered whole; a note body past the
64 KiB every writer keeps to is damage from a peer as from the API, reported and never folded."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from hivenote.server.sync.peerbook import add_peer
from hivenote.server.tokens import new_token
from tests.support.proc import rss_mb, settle
from tests.support.s3env import moto_sandbox
from tests.support.serving import get, notes, op_line, serving
from tests.support.wait import wait_until

FLOOD = 600 << 20  # the range answer of the attack run
EVIL = "evil-0009"


@contextlib.contextmanager
def answering(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A peer: `handler` answering on a free port of 127.0.0.1 from a thread, stopped at the end; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


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

    with answering(Handler) as url:
        yield url, served


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


LINE = 256 << 10  # every line of the whole copy below: an honest size (under MAX_LINE_BYTES)
WHOLE = 384 << 20  # the whole (compacted) copy the peer offers: far more than the server holds idle
PER_RANGE = (4 << 20) // LINE  # lines in one honest range answer (routes.MAX_LIMIT)


def padded_line(seq: int, size: int = LINE) -> bytes:
    """A line of `size` bytes (newline included) that says it is EVIL's op `seq` (no op the fold can use)."""
    start = json.dumps({"node": EVIL, "seq": seq, "pad": ""}).encode()
    return start[:-2] + b"x" * (size - len(start) - 1) + b'"}\n'


@contextlib.contextmanager
def compacting_peer(damage_at: int = 0) -> Iterator[tuple[str, list[str]]]:
    """A peer whose copy of EVIL's shard is not the one held here (it answers 409 to a continuation), so the puller
    fetches it whole: WHOLE bytes of LINE-byte lines, range by range, each made as it is sent (this process holds
    none of it). With `damage_at`, that line is longer than any op (sent alone, within what a range may carry)."""
    served: list[str] = []
    count = WHOLE // LINE

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            served.append(self.path)
            parts = urlsplit(self.path)
            if parts.path == "/sync/shards":
                head = hashlib.sha256(padded_line(1)).hexdigest()
                listed = {"node": "hostile-0002", "shards": {EVIL: {"size": WHOLE, "head": head, "seq": count}}}
                self._send(200, json.dumps(listed).encode(), [])
                return
            query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
            offset, limit = int(query.get("offset", "0")), int(query.get("limit", str(4 << 20)))
            if 0 < offset < LINE:  # the continuation of the copy held here: another generation
                self._send(409, b'{"error": {"code": "replaced", "message": "compacted"}}', [])
                return
            first = offset // LINE + 1
            seqs = list(range(first, min(count, first + max(1, limit // LINE) - 1) + 1))
            if damage_at in seqs:  # the overlong line alone (an honest range carries one line past its limit)
                seqs = [damage_at] if seqs[0] == damage_at else [s for s in seqs if s < damage_at]
            lines = [padded_line(s, (1 << 20) + 4096 if s == damage_at else LINE) for s in seqs]
            self._send(200, lines, [("X-Shard-Prefix", query.get("prefix", hashlib.sha256(b"").hexdigest()))])

        def _send(self, status: int, body: bytes | list[bytes], headers: list[tuple[str, str]]) -> None:
            pieces = [body] if isinstance(body, bytes) else body
            self.send_response(status)
            self.send_header("Content-Length", str(sum(map(len, pieces))))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            with contextlib.suppress(OSError):
                for piece in pieces:
                    self.wfile.write(piece)

    with answering(Handler) as url:
        yield url, served


def whole_ranges(served: list[str]) -> int:
    """Range requests of the whole copy (from its start, not the refused continuation)."""
    return sum(
        "/sync/shards/" in p and "offset=" in p and int(p.split("offset=")[1].split("&")[0]) % LINE == 0 for p in served
    )


@pytest.mark.parametrize("damage_at", [0, (WHOLE // LINE) - PER_RANGE + 1], ids=["whole", "overlong-line-at-the-end"])
def test_a_whole_copy_from_a_peer_streams_to_disk_within_memory(tmp_path: Path, damage_at: int) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True)
    (data_dir / "log" / f"{EVIL}.jsonl").write_bytes(op_line(EVIL, 1, "the copy held here"))
    with compacting_peer(damage_at) as (url, served), serving(data_dir) as (process, port, token):
        settle(process.pid)
        idle = peak = rss_mb(process.pid)
        add_peer(data_dir, url, new_token())
        answered = 0

        def done() -> bool:
            nonlocal peak, answered
            peak = max(peak, rss_mb(process.pid))
            status, _ = get(port, token, "/api/health", timeout=5)  # answered while the copy streams
            answered += status == 200
            error = peer_error(port, token, url)
            if damage_at:
                return "longer than any op" in error
            return any(p.name.startswith(f"{EVIL}~") for p in (data_dir / "log").iterdir()) and not error

        wait_until(done, 300, what=lambda: f"{peer_error(port, token, url)!r}, {len(served)} asked, peak {peak:.0f}")
        peak = max(peak, rss_mb(process.pid))
        print(f"idle RSS {idle:.0f} MB, peak {peak:.0f} MB while a {WHOLE >> 20} MB whole copy streamed")
        assert whole_ranges(served) >= (WHOLE // LINE) // PER_RANGE - 1  # the copy was really fetched
        assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"
        assert answered >= 1
        held = (data_dir / "log" / f"{EVIL}.jsonl").read_bytes()
        assert held == op_line(EVIL, 1, "the copy held here")  # another history: ours stays as it was
        branches = [p for p in (data_dir / "log").iterdir() if p.name.startswith(f"{EVIL}~")]
        if damage_at:
            assert branches == [], "nothing of a copy with damage in it is kept"
        else:
            assert [p.stat().st_size for p in branches] == [WHOLE]


def bucket_ok(port: int, token: str) -> bool:
    transports = get(port, token, "/api/status")[1]["sync"]["transports"]
    return any(t.get("kind") == "s3" and not t.get("failing") for t in transports)


def test_a_whole_generation_in_the_bucket_streams_to_disk_within_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone who can write the bucket (every machine that syncs through it) can put a generation of many chunks
    under a node's name: a real `hivenote serve` fetches it to disk chunk by chunk, within memory, and answers."""
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True)
    per_chunk, gen = (8 << 20) // LINE, "000001-0badc0de"  # s3.CHUNK_BYTES of lines, the biggest object sync takes
    with moto_sandbox(monkeypatch, tmp_path / "aws") as moto, moto.client() as client:
        client.create_bucket(Bucket="shared")
        settings = {"s3_bucket": "shared", "s3_endpoint": moto.endpoint, "s3_region": "us-east-1"}  # prefix hivenote/
        (data_dir / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        with serving(data_dir) as (process, port, token):
            wait_until(lambda: bucket_ok(port, token), 60, what=lambda: str(get(port, token, "/api/status")[1]["sync"]))
            settle(process.pid)
            idle = peak = rss_mb(process.pid)
            for first in range(1, WHOLE // LINE + 1, per_chunk):  # the chunks first, HEAD last, as a writer does
                body = b"".join(padded_line(seq) for seq in range(first, first + per_chunk))
                client.put_object(
                    Bucket="shared", Key=f"hivenote/{EVIL}/{gen}/{(first - 1) * LINE:015d}.jsonl", Body=body
                )
                peak = max(peak, rss_mb(process.pid))
            head = json.dumps({"v": 1, "node": EVIL, "generation": gen}).encode()
            client.put_object(Bucket="shared", Key=f"hivenote/{EVIL}/HEAD", Body=head)
            replica, answered = data_dir / "log" / f"{EVIL}.jsonl", 0

            def fetched() -> bool:
                nonlocal peak, answered
                peak = max(peak, rss_mb(process.pid))
                answered += get(port, token, "/api/health", timeout=5)[0] == 200
                return replica.exists() and replica.stat().st_size == WHOLE

            wait_until(fetched, 300, what=lambda: str(get(port, token, "/api/status")[1]["sync"]["transports"]))
            peak = max(peak, rss_mb(process.pid))
            print(f"idle RSS {idle:.0f} MB, peak {peak:.0f} MB while a {WHOLE >> 20} MB generation came down")
            assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"
            assert answered >= 1


def spools(pid: int) -> list[str]:
    """The files `pid` holds open that have no name any more (a spool: O_TMPFILE, or unlinked)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.endswith(" (deleted)"):
                found.append(target)
    return found


def test_a_whole_copy_is_spooled_in_the_cache_folder_never_in_the_log_folder(tmp_path: Path) -> None:
    """A sync tool watches the log folder: on Windows the spool has a name while open, so it never goes there."""
    data_dir = tmp_path / "data"
    (data_dir / "log").mkdir(parents=True)
    (data_dir / "log" / f"{EVIL}.jsonl").write_bytes(op_line(EVIL, 1, "the copy held here"))
    with compacting_peer() as (url, _), serving(data_dir) as (process, _, _):
        add_peer(data_dir, url, new_token())
        seen: list[str] = []

        def spooling() -> bool:
            seen.extend(spools(process.pid))
            return bool(seen)

        wait_until(spooling, 300, what="a spool open while the copy arrives")
        assert all(s.startswith(f"{data_dir / 'cache'}{os.sep}") for s in seen), seen
