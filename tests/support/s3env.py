"""A real S3 server for the bucket transport's tests (moto's server mode on 127.0.0.1, restartable on the same port
to play "offline, then online again"), Hivenote servers syncing through it, and the fold of what a bucket holds."""

from __future__ import annotations

import contextlib
import json
import logging
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from moto.server import ThreadedMotoServer

from hivenote.server.agents import AgentTracker
from hivenote.server.core.fold import State
from hivenote.server.core.model import CorruptLine, decode_op
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from hivenote.server.web.services import Services
from tests.support.system import SERVER, needs
from tests.support.wait import wait_until

WAIT_S = 20  # generous: sync rounds take a fraction of a second here
FAST = {"s3_poll_s": 0.1, "s3_backoff_max_s": 0.5}  # settings.extra for quick rounds in tests


@needs(SERVER)
class Moto:
    """moto's S3 server on loopback; `stop()` then `start()` brings it back on the same port with the same buckets
    (moto keeps its state per process)."""

    def __init__(self) -> None:
        self.port = 0
        self.server: ThreadedMotoServer | None = None

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.port = int(self.server.get_host_and_port()[1])

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @contextlib.contextmanager
    def client(self) -> Iterator[Any]:
        client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1", config=Config(s3={"addressing_style": "path"})
        )
        try:
            yield client
        finally:
            client.close()


@contextlib.contextmanager
def moto_sandbox(environ: Any, home: Path) -> Iterator[Moto]:
    """The S3 server, and an AWS environment (inherited by child processes) that reaches nothing else: test keys, no
    profile, no metadata probe. `environ` is pytest's monkeypatch; `home` a folder for the absent AWS files."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        environ.delenv(name, raising=False)
    environ.setenv("AWS_ACCESS_KEY_ID", "testing")
    environ.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    environ.setenv("AWS_EC2_METADATA_DISABLED", "true")
    environ.setenv("AWS_CONFIG_FILE", str(home / "no-aws-config"))
    environ.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "no-aws-credentials"))
    server = Moto()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def s3_settings(data_dir: Path, moto: Moto, bucket: str, **changes: Any) -> Settings:
    base = Settings(data_dir=data_dir, s3_bucket=bucket, s3_endpoint=moto.endpoint, s3_region="us-east-1")
    return replace(base, **({"extra": dict(FAST)} | changes))


@dataclass
class Node:
    """One running Hivenote syncing through the bucket."""

    url: str
    token: str
    store: Store
    services: Services

    @property
    def node(self) -> str:
        return self.store.node

    def remember(self, title: str) -> str:
        body = json.dumps({"kind": "decision", "title": title}).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.url}/api/notes", body, headers, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return str(json.loads(response.read())["note"]["id"])

    def snapshot(self) -> dict[str, Any]:
        with self.store.reading() as state:
            return state.snapshot()

    def has(self, note_id: str) -> bool:
        with self.store.reading() as state:
            return state.note(note_id) is not None

    def s3(self) -> dict[str, Any]:
        """This node's S3 transport as /api/status shows it ({} before its first report)."""
        return next((t for t in self.services.sync.snapshot() if t["name"] == "s3"), {})


@needs(SERVER)
@contextlib.contextmanager
def running(settings: Settings) -> Iterator[Node]:
    """A real server (uvicorn on 127.0.0.1) over `settings.data_dir`, with its transports started."""
    sock = bind("127.0.0.1", 0)
    settings = replace(settings, port=sock.getsockname()[1])
    tokens = Tokens(settings.data_dir / "tokens.json")
    with Store(settings.data_dir) as store:
        app = create_app(settings, store, tokens=tokens, tracker=AgentTracker())
        server = ServerThread(app, settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive(), what="server started")
        assert server.started, server.error
        try:
            yield Node(f"http://127.0.0.1:{server.port}", tokens.default(), store, app.state.services)
        finally:
            server.stop()


def objects(client: Any, bucket: str, prefix: str = "") -> dict[str, int]:
    """Key -> size of every object under `prefix`."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents", [])}


def read(client: Any, bucket: str, key: str) -> bytes:
    with contextlib.closing(client.get_object(Bucket=bucket, Key=key)["Body"]) as body:
        return bytes(body.read())


def generation(client: Any, bucket: str, node: str, prefix: str = "hivenote") -> str:
    return str(json.loads(read(client, bucket, f"{prefix}/{node}/HEAD"))["generation"])


def bucket_shard(client: Any, bucket: str, node: str, prefix: str = "hivenote") -> bytes:
    """A node's current generation, its chunks joined in order."""
    folder = f"{prefix}/{node}/{generation(client, bucket, node, prefix)}/"
    return b"".join(read(client, bucket, key) for key in sorted(objects(client, bucket, folder)))


def bucket_fold(client: Any, bucket: str, prefix: str = "hivenote") -> dict[str, Any]:
    """The state that folding everything the bucket holds gives."""
    state = State()
    nodes = {key.split("/")[1] for key in objects(client, bucket, f"{prefix}/") if key.endswith("/HEAD")}
    for node in sorted(nodes):
        for line in bucket_shard(client, bucket, node, prefix).splitlines():
            with contextlib.suppress(CorruptLine):
                state.apply(decode_op(line))
    return state.snapshot()
