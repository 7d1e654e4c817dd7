"""Sync latency: from a write acknowledged on A to the note readable on B, per transport, with two real
`hivenote serve` processes on 127.0.0.1. Prints p50/p95 and bytes moved per op.

- folder: the two log folders joined by a copy loop standing in for Syncthing/Dropbox (it polls every 0.2 s,
  like a sync tool's watcher delay), so the figure is the server's part: noticing a grown shard and folding it.
- peer: B pulls from A over /sync.
- s3: A uploads to and B downloads from a moto S3 server on loopback.

    python bench/bench_sync.py [--writes 40] [--transports folder,peer,s3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hivenote.server.storage.identity import read_node
from hivenote.server.sync.replica import Replicas, complete_size
from hivenote.server.tokens import Tokens

COPY_EVERY_S = 0.2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Server:
    def __init__(self, data_dir: Path, env: dict[str, str] | None = None) -> None:
        self.data_dir, self.port = data_dir, free_port()
        argv = [
            sys.executable,
            "-m",
            "hivenote.desktop",
            "--data-dir",
            str(data_dir),
            "serve",
            "--port",
            str(self.port),
        ]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 60
        while not self.healthy():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the server for {data_dir} did not start")
            time.sleep(0.05)
        self.token = Tokens(data_dir / "tokens.json").default()
        self.node = read_node(data_dir)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/health", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def copy_loop(a: Server, b: Server, stop: threading.Event) -> None:
    """A stand-in sync tool: every COPY_EVERY_S, append what A's log folder has beyond B's copy (and back)."""
    pairs = [(a, b), (b, a)]
    replicas = {id(s): Replicas(s.data_dir / "log", s.node) for s in (a, b)}
    while not stop.wait(COPY_EVERY_S):
        for src, dst in pairs:
            for shard in (src.data_dir / "log").glob("*.jsonl"):
                node = shard.stem
                if node == dst.node:
                    continue
                have, there = replicas[id(dst)].size(node), complete_size(shard)
                if there > have:
                    with open(shard, "rb") as fh:
                        fh.seek(have)
                        replicas[id(dst)].append(node, fh.read(there - have), have)


def measure(a: Server, b: Server, writes: int) -> tuple[list[float], int]:
    """Seconds from A's acknowledgement to the note on B, per write; and the bytes B's log folder grew by."""
    before = sum(p.stat().st_size for p in (b.data_dir / "log").glob("*.jsonl"))
    times = []
    for i in range(writes):
        status, body = a.call("POST", "/api/notes", {"kind": "fact", "title": f"bench note {i}", "body": "x" * 200})
        assert status == 201, status
        acked = time.perf_counter()
        note_id = body["note"]["id"]
        while b.call("GET", f"/api/notes/{note_id}")[0] != 200:
            if time.perf_counter() - acked > 30:
                raise RuntimeError("a write did not reach B within 30 s")
            time.sleep(0.01)
        times.append(time.perf_counter() - acked)
    after = sum(p.stat().st_size for p in (b.data_dir / "log").glob("*.jsonl"))
    return times, after - before


@contextlib.contextmanager
def pair(kind: str, root: Path) -> Iterator[tuple[Server, Server]]:
    if kind == "folder":
        a, b = Server(root / "a"), Server(root / "b")
        stop = threading.Event()
        loop = threading.Thread(target=copy_loop, args=(a, b, stop), daemon=True)
        loop.start()
        try:
            yield a, b
        finally:
            stop.set()
            loop.join()
            a.stop()
            b.stop()
        return
    if kind == "peer":
        from hivenote.server.sync.peerbook import add_peer

        a = Server(root / "a")
        token = a.token
        b_dir = root / "b"
        b_dir.mkdir(parents=True)
        add_peer(b_dir, f"http://127.0.0.1:{a.port}", token)
        b = Server(b_dir)
        try:
            yield a, b
        finally:
            a.stop()
            b.stop()
        return
    if kind == "s3":
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per S3 request otherwise
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        env = os.environ | {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=f"http://{host}:{port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket="bench")
        s3.close()
        for name in ("a", "b"):
            (root / name).mkdir(parents=True)
            settings = {"s3_bucket": "bench", "s3_endpoint": f"http://{host}:{port}", "s3_region": "us-east-1"}
            (root / name / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
        a, b = Server(root / "a", env), Server(root / "b", env)
        try:
            yield a, b
        finally:
            a.stop()
            b.stop()
            moto.stop()
        return
    raise ValueError(kind)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=40)
    parser.add_argument("--transports", default="folder,peer,s3")
    args = parser.parse_args()
    print(f"{'transport':<10} {'writes':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7} {'bytes/op':>9}")
    for kind in args.transports.split(","):
        with tempfile.TemporaryDirectory() as tmp, pair(kind, Path(tmp)) as (a, b):
            times, moved = measure(a, b, args.writes)
        p50, p95 = pct(times, 0.5), pct(times, 0.95)
        print(f"{kind:<10} {len(times):>6} {p50:>7.2f} {p95:>7.2f} {max(times):>7.2f} {moved // len(times):>9}")


if __name__ == "__main__":
    main()
