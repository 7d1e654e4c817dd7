"""`hivenote stdio`: an MCP endpoint on stdin/stdout for clients that only speak stdio (Claude Desktop, Junie,
configs that ran `npx @modelcontextprotocol/server-memory`), forwarding every message to the running local
server over Streamable HTTP with the stored token, and starting that server headless when none answers.

The client's own `initialize` is forwarded unchanged, so provenance names the real client, not the bridge.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.abc
import httpx2

from . import __version__
from .errors import HivenoteError

SERVER_START_TIMEOUT_S = 20.0
PROTOCOL_HEADER = "mcp-protocol-version"
SESSION_HEADER = "mcp-session-id"


class Unreachable(HivenoteError):
    code = "unavailable"


# One answer can be the whole knowledge graph (read_graph): far past httpx2's 1 MiB default for one event. The
# bridge only talks to this machine's own server, so the bound is there to stop runaway memory, not to limit.
MAX_ANSWER_BYTES = 1 << 30


def server_is_up(base_url: str) -> bool:
    try:
        response = httpx2.get(f"{base_url}/api/health", timeout=2)
    except httpx2.HTTPError:
        return False
    return response.status_code == 200 and response.headers.get("content-type", "").startswith("application/json")


def ensure_server(base_url: str, data_dir: Path, port: int) -> None:
    """Start `hivenote serve` in the background unless a server already answers (it keeps running after us)."""
    if server_is_up(base_url):
        return
    log_path = data_dir / "serve.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data_dir), "serve", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server_is_up(base_url):
        if time.monotonic() > deadline:
            raise Unreachable(
                f"started `hivenote serve` but nothing answers at {base_url} after {SERVER_START_TIMEOUT_S:.0f} s; "
                f"see {log_path}"
            )
        time.sleep(0.1)


class Bridge:
    """Newline-delimited JSON-RPC on the client side, Streamable HTTP on the server side."""

    def __init__(self, url: str, token: str | None, stdout: BinaryIO) -> None:
        self.url = url
        self.stdout = stdout
        self.headers = {"User-Agent": f"hivenote-stdio/{__version__}", "Accept": "application/json, text/event-stream"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.session_id: str | None = None
        self.protocol: str | None = None
        self._write_lock = anyio.Lock()
        self._listening = False

    async def emit(self, message: dict[str, Any]) -> None:
        async with self._write_lock:
            self.stdout.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
            self.stdout.flush()

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol:
            headers[PROTOCOL_HEADER] = self.protocol
        return headers

    async def _fail(self, message: dict[str, Any], text: str) -> None:
        if "id" in message and "method" in message:  # only requests get an answer
            await self.emit({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": text}})

    async def forward(self, http: httpx2.AsyncClient, message: dict[str, Any], tasks: anyio.abc.TaskGroup) -> None:
        try:
            async with http.stream(
                "POST", self.url, json=message, headers={**self._headers(), "Content-Type": "application/json"}
            ) as response:
                if response.status_code in (401, 403, 421):
                    body = json.loads(await response.aread() or b"{}")
                    reason = body.get("error", {}).get("message", response.reason_phrase)
                    await self._fail(message, f"Hivenote refused the request ({response.status_code}): {reason}")
                    return
                if message.get("method") == "initialize" and SESSION_HEADER in response.headers:
                    self.session_id = response.headers[SESSION_HEADER]
                kind = response.headers.get("content-type", "")
                if kind.startswith("text/event-stream"):
                    async for event in httpx2.EventSource(response, max_event_size=MAX_ANSWER_BYTES):
                        if event.data:
                            await self._relay(json.loads(event.data), tasks, http)
                elif kind.startswith("application/json"):
                    body = await response.aread()
                    if body.strip():  # a 202 for a notification has no body
                        await self._relay(json.loads(body), tasks, http)
                elif response.status_code >= 400:
                    await self._fail(message, f"Hivenote answered {response.status_code} {response.reason_phrase}")
        except httpx2.HTTPError as exc:
            await self._fail(message, f"Hivenote is not reachable at {self.url}: {exc}")
        except ValueError as exc:  # not JSON where JSON was promised
            await self._fail(message, f"Hivenote sent an answer the bridge cannot read: {exc}")

    async def _relay(self, answer: Any, tasks: anyio.abc.TaskGroup, http: httpx2.AsyncClient) -> None:
        if isinstance(answer, dict):
            result = answer.get("result")
            if isinstance(result, dict) and "protocolVersion" in result and "serverInfo" in result:
                self.protocol = str(result["protocolVersion"])
                if self.session_id and not self._listening:
                    self._listening = True
                    tasks.start_soon(self._listen, http)
        await self.emit(answer)

    async def _listen(self, http: httpx2.AsyncClient) -> None:
        """The standalone stream: notifications the server sends on its own (resource updates)."""
        try:
            async with http.stream("GET", self.url, headers={**self._headers(), "Accept": "text/event-stream"}) as resp:
                if resp.status_code != 200:
                    return
                async for event in httpx2.EventSource(resp, max_event_size=MAX_ANSWER_BYTES):
                    if event.data:
                        await self.emit(json.loads(event.data))
        except httpx2.HTTPError:
            return

    async def run(self, stdin: BinaryIO) -> None:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=None)) as http, anyio.create_task_group() as bg:
            async with anyio.create_task_group() as requests:  # exits once every request has its answer
                async for raw in _lines(stdin):
                    try:
                        message = json.loads(raw)
                    except ValueError:
                        await self.emit(
                            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
                        )
                        continue
                    if isinstance(message, dict) and message.get("method") == "initialize":
                        await self.forward(http, message, bg)  # the session must exist before anything else
                    elif isinstance(message, dict):
                        requests.start_soon(self.forward, http, message, bg)
            if self.session_id:
                with contextlib.suppress(httpx2.HTTPError):
                    await http.delete(self.url, headers=self._headers())
            bg.cancel_scope.cancel()


async def _lines(stream: BinaryIO) -> Any:
    """Lines of a blocking binary stream, read in a worker thread so the event loop keeps forwarding."""
    while True:
        line = await anyio.to_thread.run_sync(stream.readline)
        if not line:
            return
        if line.strip():
            yield line


def run_bridge(url: str, token: str | None) -> None:
    anyio.run(Bridge(url, token, sys.stdout.buffer).run, sys.stdin.buffer)
