"""A real Hivenote server for tests: uvicorn on 127.0.0.1 over a real store, a clock to move, MCP and HTTP clients."""

from __future__ import annotations

import contextlib
import json
import socket
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.types import EmptyResult, Implementation, ResourceUpdatedNotification, SubscribeRequest, SubscribeRequestParams

from hivenote.server.agents import AgentTracker
from hivenote.server.notebook import Notebook
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from hivenote.server.web.services import Services
from tests.support.system import SERVER, needs
from tests.support.wait import wait_until

needs(SERVER)(ServerThread)  # a test that starts one itself is a system test too


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


@dataclass
class Running:
    url: str
    token: str
    store: Store
    tracker: AgentTracker
    clock: Clock
    tokens: Tokens
    notebook: Notebook  # the server's own (with its meaning index, when meaning search is on)
    services: Services  # what the server's routes work with (its sign-in codes, ...)


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now (for servers started with an explicit --port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def taken_port(port: int = 0) -> Iterator[tuple[int, socket.socket]]:
    """Another program holding a port on 127.0.0.1 (`port`, or a free one): it listens and never answers. Yields the
    port and the socket; closing the socket frees the port before the block ends."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        yield int(squatter.getsockname()[1]), squatter


def exchange(request: urllib.request.Request | str, timeout: float = 10) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one request; an error status is returned, not raised."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        with error:  # it holds the connection
            return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def health(port: int) -> int | None:
    """The status of GET /api/health on 127.0.0.1:port, or None when nothing answers."""
    try:
        return exchange(f"http://127.0.0.1:{port}/api/health", timeout=5)[0]
    except OSError:
        return None


def call(port: int, token: str, method: str, path: str, body: Any = None) -> bytes:
    """One REST call with the bearer token to the server on 127.0.0.1:port; the raw answer (HTTPError on 4xx/5xx)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data, headers, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return bytes(response.read())


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str, name: str, *, message_handler: Any = None) -> AsyncIterator[Client]:
    """A real MCP client over streamable HTTP at `url` (the /mcp endpoint), named as an agent names itself."""
    async with httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)
    ) as http:
        client = Client(
            streamable_http_client(url, http_client=http),
            client_info=Implementation(name=name, version="1.7.0"),
            mode="legacy",
            message_handler=message_handler,
        )
        async with client:
            yield client


@contextlib.asynccontextmanager
async def mcp_client(
    running: Running,
    name: str = "cursor-vscode",
    token: str | None = None,
    *,
    path: str = "/mcp",
    message_handler: Any = None,
) -> AsyncIterator[Client]:
    async with mcp_session(
        f"{running.url}{path}", token or running.token, name, message_handler=message_handler
    ) as client:
        yield client


def fetch(
    url: str, headers: dict[str, str] | None = None, data: bytes | None = None
) -> tuple[int, dict[str, str], Any]:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    status, answer_headers, body = exchange(request)
    return status, answer_headers, json.loads(body or b"null")


def sign_in_code(url: str, token: str) -> str:
    """A one-time code from the server at `url`, asked with the owner's token, as the tray and `hivenote open` ask."""
    request = urllib.request.Request(
        url + "/api/session/code", b"", {"Authorization": f"Bearer {token}"}, method="POST"
    )
    status, _, body = exchange(request)
    assert status == 201, body
    code: str = json.loads(body)["code"]
    return code


def dashboard_url(running: Running, path: str = "/") -> str:
    """The dashboard's address as the tray opens it: `path` (a fragment names a view) with a fresh one-time code."""
    where, _, view = path.partition("#")
    return f"{running.url}{where}?code={sign_in_code(running.url, running.token)}" + (f"#{view}" if view else "")


def signed_in(running: Running, client: str = "hivenote-dashboard/test") -> dict[str, str]:
    """The headers of the dashboard's own requests after it traded a code for its cookie: the cookie, the key the
    page keeps beside it and the client header (without either of which the cookie does not count)."""
    headers = {"X-Hivenote-Client": client, "Content-Type": "application/json"}
    body = json.dumps({"code": sign_in_code(running.url, running.token)}).encode()
    status, answer, _ = exchange(urllib.request.Request(running.url + "/api/session", body, headers, method="POST"))
    assert status == 200 and "set-cookie" in answer, (status, answer)
    cookie = answer["set-cookie"].split(";", 1)[0]
    return {"Cookie": cookie, "X-Hivenote-Key": answer["x-hivenote-key"], "X-Hivenote-Client": client}


GRAPH_URI = "memory://knowledge-graph"
WAIT_S = 10  # generous deadline for anything that should take milliseconds


class Inbox:
    """Notifications one client received, with a way to wait for the next ones."""

    def __init__(self) -> None:
        self.updates: list[str] = []
        self._changed = anyio.Event()

    async def handle(self, message: IncomingMessage) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.updates.append(message.params.uri)
            self._changed.set()
            self._changed = anyio.Event()

    async def until(self, count: int) -> None:
        with anyio.fail_after(WAIT_S):
            while len(self.updates) < count:
                await self._changed.wait()


async def subscribe(client: Client, uri: str = GRAPH_URI) -> None:
    # `Client.subscribe_resource` is deprecated (MCPDeprecationWarning: gone in the 2026-07-28 era); the request
    # itself is what handshake-era clients send.
    await client.session.send_request(SubscribeRequest(params=SubscribeRequestParams(uri=uri)), EmptyResult)


@needs(SERVER)
@contextlib.contextmanager
def serve(data_dir: Path, tracker: AgentTracker | None = None, **changes: Any) -> Iterator[Running]:
    """Another real server (conftest's `running` with other settings, or a second notebook)."""
    sock = bind("127.0.0.1", 0)
    settings = replace(Settings(data_dir=data_dir), port=sock.getsockname()[1], **changes)
    clock = Clock()
    tracker = tracker or AgentTracker(now_ms=clock)
    tokens = Tokens(data_dir / "tokens.json")
    with contextlib.closing(sock), Store(data_dir) as store:  # closed too when the store or the app fails to open
        app = create_app(settings, store, tokens=tokens, tracker=tracker)
        server = ServerThread(app, settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        assert server.started, server.error
        try:
            notebook = app.state.services.notebook
            services = app.state.services
            yield Running(
                f"http://127.0.0.1:{server.port}", tokens.default(), store, tracker, clock, tokens, notebook, services
            )
        finally:
            server.stop()


PROTOCOL_VERSION = "2025-06-18"  # the MCP revision the raw JSON-RPC tests speak
INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def initialize(client: str, *, id: int = 1, version: str = "1") -> dict[str, Any]:
    """An MCP `initialize` request from a client with that clientInfo name (the agent it is recognised as)."""
    params = {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": client, "version": version},
    }
    return {"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params}
