"""Peers in this process, for the puller's tests: a real server (uvicorn on 127.0.0.1 over a real store, as the
CLI runs it) whose store the test can reach, and a hostile peer (a plain HTTP server answering `/sync` with
whatever bytes the test gives it: cut mid-line, naming another writer, not JSON)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.system import SERVER, needs


@dataclass
class Served:
    url: str
    token: str
    store: Store

    def remember(self, title: str) -> str:
        return Notebook(self.store).remember(kind="fact", title=title, by=Author(agent="cli")).note.id

    def shard(self) -> bytes:
        assert self.store.shard_path is not None
        return self.store.shard_path.read_bytes()


@needs(SERVER)
@contextlib.contextmanager
def served(data_dir: Path) -> Iterator[Served]:
    sock = bind("127.0.0.1", 0)
    settings = replace(Settings(data_dir=data_dir), port=sock.getsockname()[1])
    with Store(data_dir) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        server.start()
        while not server.started and server.thread.is_alive():
            server.thread.join(0.02)
        assert server.started, server.error
        try:
            yield Served(f"http://127.0.0.1:{server.port}", Tokens(data_dir / "tokens.json").default(), store)
        finally:
            server.stop()


@dataclass
class Hostile:
    """What the hostile peer answers: a listing, and each shard's bytes (`cut` shortens a range's body)."""

    url: str = ""
    node: str = "hostile-0001"
    shards: dict[str, bytes] = field(default_factory=dict)
    cut: Callable[[str, int, bytes], bytes] = lambda node, offset, body: body
    listing: Any = None  # when set, answered as is instead of the listing made from `shards`
    requests: list[str] = field(default_factory=list)
    older: bool = False  # answers as a Hivenote from before the prefix proof did (head/tail only)


def _handler(peer: Hostile) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads `requests`
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json", prefix: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            if prefix:
                self.send_header("X-Shard-Prefix", prefix)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            peer.requests.append(self.path)
            if parts.path == "/sync/shards":
                listing = peer.listing
                if listing is None:
                    shards = {n: _summary(data) for n, data in peer.shards.items()}
                    listing = {"node": peer.node, "shards": shards, "peers": []}
                self._send(200, listing if isinstance(listing, bytes) else json.dumps(listing).encode())
                return
            node = parts.path.removeprefix("/sync/shards/")
            if peer.older and "prefix" in parse_qs(parts.query):
                message = "unknown parameter 'prefix'; use offset, limit, head and tail"
                self._send(400, json.dumps({"error": {"code": "invalid", "message": message}}).encode())
                return
            offset = int(parse_qs(parts.query).get("offset", ["0"])[0])
            data = peer.shards.get(node, b"")
            # Honest about its bytes (the prefix it says is its own), but it checks no proof: the puller must.
            prefix = hashlib.sha256(data[:offset]).hexdigest()
            self._send(200, peer.cut(node, offset, data[offset:]), "application/octet-stream", prefix)

    return Handler


def _summary(data: bytes) -> dict[str, Any]:
    first = data[: data.find(b"\n") + 1]
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return {"size": len(data), "head": hashlib.sha256(first).hexdigest(), "seq": json.loads(last)["seq"]}


@contextlib.contextmanager
def hostile_peer(peer: Hostile) -> Iterator[Hostile]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(peer))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    peer.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield peer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
