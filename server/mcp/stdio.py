"""The HTTP bridge of `hivenote stdio` (the MCP endpoint on stdin/stdout for clients that only speak stdio: Claude
Desktop, Junie, configs that ran `npx @modelcontextprotocol/server-memory`), and the start of the local server it
needs (`ensure_server`: started headless when none answers).

The bridge is the fallback: first the server is handed the client's stdin and stdout (handoff_stdio.py) and answers it
itself. The bridge serves where that is not possible (not POSIX, `--bridge`, a server that does not take the
session) and takes over a session the server handed back or left when it stopped: every message forwarded over
Streamable HTTP with the stored token. The client's own `initialize` goes through unchanged either way, so
provenance names the real client.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlsplit

import anyio
import anyio.abc
import httpx2

from .. import __version__
from ..core.errors import HivenoteError
from ..storage.identity import make_data_dir
from ..storage.layout import Layout
from ..tokens import identity_proof
from .handoff_stdio import HandOver

SERVER_START_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 30.0
PROTOCOL_HEADER = "mcp-protocol-version"
SESSION_HEADER = "mcp-session-id"
READ_SIZE = 1 << 16
# The session id a handed-back session starts with: no server knows it, so the first message opens it again.
HANDED_BACK = "handed-back"


class Unreachable(HivenoteError):
    code = "unavailable"


class NotOurServer(Unreachable):
    """Something answers on the port, but it is not the Hivenote of this data dir: the token is not sent."""

    def __init__(self, base_url: str, data_dir: Path, hivenote: bool) -> None:
        port = urlsplit(base_url).port or 80
        what = (
            "a Hivenote of another data dir answers there"
            if hivenote
            else "another program answers there (another account's, or not Hivenote at all)"
        )
        super().__init__(
            f"{base_url} is not the Hivenote of {data_dir}: {what}, so the token was not sent. Stop it, or give "
            f"this data dir its own port: `hivenote --data-dir {data_dir} serve --port <N>` and `stdio --port <N>` "
            f"in the client's config (port {port} is taken)."
        )


class AnswerTooBig(ValueError):
    pass


# One answer can be the whole knowledge graph (read_graph). The bridge only talks to this machine's own server, so
# the bound is there to stop runaway memory, not to limit.
MAX_ANSWER_BYTES = 1 << 30
LINE_ENDS_TO_SPACES = bytes.maketrans(b"\r\n", b"  ")
# What a dropped connection, a refused one or a broken HTTP exchange raise on the way to the server.
TRANSPORT_ERRORS = (OSError, TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, EOFError)


def answers_as_ours(status: int, body: bytes, port: int, token: str, challenge: str) -> str:
    """ "ours" when a health answer proves it comes from the Hivenote of the data dir `token` is from, "hivenote" for
    another Hivenote, "other" for anything else."""
    try:
        answer = json.loads(body) if status == 200 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        return "other"
    proof = answer.get("proof")
    if isinstance(proof, str) and hmac.compare_digest(proof, identity_proof(token, port, challenge)):
        return "ours"
    return "hivenote" if "version" in answer else "other"


def server_identity(base_url: str, token: str) -> str:
    """ "none" when nothing answers at `base_url`, else what answers_as_ours says."""
    challenge = secrets.token_hex(16)
    try:
        response = httpx2.get(f"{base_url}/api/health", params={"challenge": challenge}, timeout=2)
    except httpx2.HTTPError:
        return "none"
    return answers_as_ours(response.status_code, response.content, urlsplit(base_url).port or 80, token, challenge)


def ensure_server(base_url: str, data_dir: Path, port: int, token: str) -> None:
    """Start `hivenote serve` in the background unless this data dir's server already answers (it keeps running
    after us). Whatever else answers on the port gets nothing: NotOurServer says what holds it."""
    found = server_identity(base_url, token)
    if found == "ours":
        return
    if found != "none":
        raise NotOurServer(base_url, data_dir, hivenote=found == "hivenote")
    log_path = Layout(data_dir).serve_log
    make_data_dir(data_dir)
    with open(log_path, "ab") as log:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hivenote.server.cli",
                "--data-dir",
                str(data_dir),
                "serve",
                "--port",
                str(port),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while (found := server_identity(base_url, token)) != "ours":
        if found != "none":
            raise NotOurServer(base_url, data_dir, hivenote=found == "hivenote")
        if time.monotonic() > deadline:
            raise Unreachable(
                f"started `hivenote serve` but nothing answers at {base_url} after {SERVER_START_TIMEOUT_S:.0f} s; "
                f"see {log_path}"
            )
        time.sleep(0.1)


# -- HTTP/1.1 to the local server: kept-alive connections, framed here ----------------------------------------------


class ProtocolError(ValueError):
    """An answer that is not HTTP/1.1 as this bridge reads it, or a header it must not send."""


MAX_HEAD_BYTES = 64 << 10  # an answer's status line and headers
_NO_BODY = frozenset((204, 304))


class Response:
    """An answer's status and headers (names lowercased), as it starts; its body follows, `chunk` by `chunk`."""

    __slots__ = ("headers", "reason", "status_code")

    def __init__(self, status_code: int, reason: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.status_code, self.reason, self.headers = status_code, reason, headers


def _field(value: str) -> bytes:
    raw = value.encode("latin-1")
    if b"\r" in raw or b"\n" in raw or b"\0" in raw:
        raise ProtocolError(f"a header value holds a line end: {value[:40]!r}")
    return raw


class Connection:
    """One HTTP/1.1 connection to the server, kept open between messages: a new TCP connection and a general
    purpose HTTP client's layers per message would cost more than the server's own work on most tool calls. It
    speaks just what this bridge sends and its server answers: requests with a Content-Length; answers framed by
    Content-Length, chunked, or by the connection's end; 1xx answers passed over."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._left = 0  # body bytes left: of the answer (Content-Length) or of the current chunk
        self._framing = b""  # b"length", b"chunked" or b"close"; b"" once the answer's body is read to its end
        self._keep = True  # the server keeps the connection open after this answer

    async def request(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> Response:
        """Send one request; returns the answer's status and headers (its body follows, `chunk` by `chunk`)."""
        head = b"".join(
            (
                _field(f"{method} {target} HTTP/1.1"),
                b"\r\n",
                *(b"".join((_field(k), b": ", _field(v), b"\r\n")) for k, v in headers),
                b"\r\n",
            )
        )
        self.writer.write(head + body if len(body) < 1 << 16 else head)
        if len(body) >= 1 << 16:
            self.writer.write(body)
        await self.writer.drain()
        while True:
            response = await self._head()
            if response.status_code >= 200:  # 1xx answers are passed over
                return response

    async def _head(self) -> Response:
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise anyio.EndOfStream from None
        except asyncio.LimitOverrunError:
            raise ProtocolError(f"an answer's head longer than {MAX_HEAD_BYTES} bytes") from None
        status, *lines = raw[:-4].split(b"\r\n")
        version, _, rest = status.partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.1 answer: {status[:60]!r}")
        headers: list[tuple[bytes, bytes]] = []
        for line in lines:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or b"\n" in line:
                raise ProtocolError(f"not a header line: {line[:60]!r}")
            headers.append((name.lower(), value.strip()))
        found = dict(headers)
        status_code = int(code)
        self._keep = b"close" not in found.get(b"connection", b"").lower() and version == b"HTTP/1.1"
        length = found.get(b"content-length")
        if status_code < 200 or status_code in _NO_BODY:
            self._framing = b""
        elif b"chunked" in found.get(b"transfer-encoding", b"").lower():
            self._framing, self._left = b"chunked", 0
        elif length is not None:
            if not length.isdigit():
                raise ProtocolError(f"not a Content-Length: {length[:40]!r}")
            self._framing, self._left = (b"length" if int(length) else b""), int(length)
        else:
            self._framing, self._keep = b"close", False
        return Response(status_code, reason, headers)

    async def chunk(self) -> bytes:
        """The next piece of the answer's body; b"" once it is complete."""
        while self._framing:
            if self._framing == b"close":
                data = await self.reader.read(READ_SIZE)
                if not data:
                    self._framing = b""
                return data
            if self._left:
                data = await self.reader.read(min(self._left, READ_SIZE))
                if not data:
                    raise anyio.EndOfStream
                self._left -= len(data)
                if not self._left and self._framing == b"length":
                    self._framing = b""
                elif not self._left:
                    await self._line()  # the CRLF after a chunk's data
                return data
            if self._framing == b"length":
                self._framing = b""
                return b""
            size = (await self._line()).split(b";", 1)[0].strip()
            try:
                self._left = int(size, 16)
            except ValueError:
                raise ProtocolError(f"not a chunk size: {size[:20]!r}") from None
            if not self._left:
                while await self._line():  # trailers, up to the blank line
                    pass
                self._framing = b""
        return b""

    async def _line(self) -> bytes:
        try:
            return (await self.reader.readuntil(b"\r\n"))[:-2]
        except asyncio.IncompleteReadError:
            raise anyio.EndOfStream from None
        except asyncio.LimitOverrunError:
            raise ProtocolError(f"a chunk line longer than {MAX_HEAD_BYTES} bytes") from None

    def reuse(self) -> bool:
        """Whether the exchange ended cleanly and the server keeps the connection open (then it is ready)."""
        return not self._framing and self._keep and not self.writer.is_closing()

    async def aclose(self) -> None:
        self.writer.close()
        with contextlib.suppress(*TRANSPORT_ERRORS):
            await self.writer.wait_closed()


class Pool:
    """Connections to one server, each carrying one exchange at a time; concurrent messages open more. With a
    `token`, each new connection first has the server prove it is the Hivenote of that token's data dir (the
    server may have stopped and something else taken its port since the last one)."""

    def __init__(self, url: str, token: str | None = None, data_dir: Path | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.target = parts.path or "/"
        self.authority = parts.netloc
        self.token, self.data_dir = token, data_dir
        self._idle: list[Connection] = []

    async def connect(self) -> Connection:
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            connection = Connection(*await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD_BYTES))
        if self.token is None:
            return connection
        try:
            await self._verify(connection, self.token)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _verify(self, connection: Connection, token: str) -> None:
        challenge = secrets.token_hex(16)
        headers = self.framed([("User-Agent", f"hivenote-stdio/{__version__}")], b"")
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            response = await connection.request("GET", f"/api/health?challenge={challenge}", headers, b"")
            body = await read_body(connection)
        found = answers_as_ours(response.status_code, body, self.port, token, challenge)
        if found != "ours":
            base = f"http://{self.authority}"
            raise NotOurServer(base, self.data_dir or Path("this data dir"), hivenote=found == "hivenote")
        if not connection.reuse():
            raise anyio.EndOfStream

    def framed(self, headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
        return [("Host", self.authority), *headers, ("Content-Length", str(len(body)))]

    async def _send(self, method: str, headers: list[tuple[str, str]], body: bytes) -> tuple[Connection, Response]:
        headers = self.framed(headers, body)
        while self._idle:
            connection = self._idle.pop()
            try:
                return connection, await connection.request(method, self.target, headers, body)
            except TRANSPORT_ERRORS:  # closed by the server while idle (keep-alive timeout, a restart): next one
                await connection.aclose()
        connection = await self.connect()
        try:
            return connection, await connection.request(method, self.target, headers, body)
        except BaseException:
            await connection.aclose()
            raise

    @contextlib.asynccontextmanager
    async def exchange(
        self, method: str, headers: list[tuple[str, str]], body: bytes = b""
    ) -> AsyncIterator[tuple[Response, Connection]]:
        """One request and its answer; the connection goes back to the pool if the answer was read to its end."""
        connection, response = await self._send(method, headers, body)
        reusable = False
        try:
            yield response, connection
            reusable = connection.reuse()
        finally:
            if reusable:
                self._idle.append(connection)
            else:
                await connection.aclose()

    async def aclose(self) -> None:
        while self._idle:
            await self._idle.pop().aclose()


class Body(Protocol):
    """An answer's body as it arrives (a `Connection`)."""

    async def chunk(self) -> bytes: ...


async def read_body(connection: Body) -> bytes:
    body = bytearray()
    while chunk := await connection.chunk():
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            raise AnswerTooBig(f"an answer larger than {MAX_ANSWER_BYTES} bytes")
    return bytes(body)


async def event_data(connection: Body) -> AsyncIterator[bytes]:
    """The data of each server-sent event in the answer (its `data:` lines joined), as the events arrive. Lines end
    in LF or CRLF (a lone CR is not a line end here: no server of ours sends one)."""
    buffer = bytearray()
    scanned = 0  # the buffer holds no line end before this
    data: list[bytes] = []
    while chunk := await connection.chunk():
        buffer += chunk
        if len(buffer) > MAX_ANSWER_BYTES:
            raise AnswerTooBig(f"an event larger than {MAX_ANSWER_BYTES} bytes")
        start = 0
        while (end := buffer.find(b"\n", max(start, scanned))) >= 0:
            line = bytes(buffer[start:end]).removesuffix(b"\r")
            start = end + 1
            if not line:  # a blank line ends the event
                if data:
                    yield b"\n".join(data)
                data = []
            elif line.startswith(b"data:"):
                data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        del buffer[:start]
        scanned = len(buffer)


# -- the bridge -------------------------------------------------------------------------------------------------------


class Bridge:
    """Newline-delimited JSON-RPC on the client side, Streamable HTTP on the server side."""

    def __init__(self, url: str, token: str | None, stdout: BinaryIO, data_dir: Path | None = None) -> None:
        self.url = url
        self.stdout = stdout
        self.pool = Pool(url, token, data_dir)
        self.headers = [("User-Agent", f"hivenote-stdio/{__version__}")]
        if token:
            self.headers.append(("Authorization", f"Bearer {token}"))
        self.session_id: str | None = None
        self.protocol: str | None = None
        self._write_lock = anyio.Lock()
        self._listening = False
        # Replayed when the server forgot the session (it restarted: the tray's Stop/Start, a crash): the client's
        # initialize and its subscriptions, so the client never learns of it.
        self._initialize: bytes | None = None
        self._subscriptions: dict[str, bytes] = {}
        self._reopening = anyio.Lock()

    def resume(self, initialize: bytes | None, protocol: str | None, subscriptions: list[bytes]) -> None:
        """Go on with a session the server ran on the client's pipes and handed back (handoff.py): the next server
        does not know it, so the first message finds it stale and opens it again with the client's own
        initialize and subscriptions, as after a restart (`_reopen`)."""
        if initialize is None:
            return  # not initialized yet: the client's initialize is still to come, from `pending` or stdin
        self._initialize, self.protocol = initialize, protocol
        self._subscriptions = {str(i): raw for i, raw in enumerate(subscriptions)}
        self.session_id = HANDED_BACK

    async def emit(self, message: dict[str, Any]) -> None:
        await self._write(json.dumps(message, ensure_ascii=False).encode())

    async def _write(self, line: bytes) -> None:
        async with self._write_lock:
            self.stdout.write(line + b"\n")
            self.stdout.flush()

    def _headers(self, accept: str) -> list[tuple[str, str]]:
        headers = [*self.headers, ("Accept", accept)]
        if self.session_id:
            headers.append((SESSION_HEADER, self.session_id))
        if self.protocol:
            headers.append((PROTOCOL_HEADER, self.protocol))
        return headers

    def _post_headers(self) -> list[tuple[str, str]]:
        """A client message's POST: JSON out, a JSON body or an SSE stream back."""
        return [*self._headers("application/json, text/event-stream"), ("Content-Type", "application/json")]

    async def _fail(self, message: dict[str, Any], text: str) -> None:
        if "id" in message and "method" in message:  # only requests get an answer
            await self.emit({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": text}})

    async def forward(
        self, raw: bytes, message: dict[str, Any], tasks: anyio.abc.TaskGroup, *, again: bool = True
    ) -> None:
        """One client message, sent as the client wrote it; its answers (a JSON body or SSE events) relayed."""
        session = self.session_id
        try:
            async with self.pool.exchange("POST", self._post_headers(), raw.strip()) as (response, connection):
                if not (response.status_code == 404 and session and message.get("method") != "initialize"):
                    await self._answer(message, response, connection, tasks)
                    return
                await read_body(connection)  # "Session not found": the server restarted since the client connected
            if not again:
                await self._fail(message, "Hivenote forgot this session again at once; reconnect the client")
                return
            await self._reopen(session, tasks)
        except NotOurServer as exc:
            await self._fail(message, str(exc))
            return
        except TRANSPORT_ERRORS as exc:
            await self._fail(message, f"Hivenote is not reachable at {self.url}: {exc!r}")
            return
        except ValueError as exc:  # not JSON where JSON was promised, or too big
            await self._fail(message, f"Hivenote sent an answer the bridge cannot read: {exc}")
            return
        await self.forward(raw, message, tasks, again=False)

    async def _answer(
        self, message: dict[str, Any], response: Response, connection: Connection, tasks: anyio.abc.TaskGroup
    ) -> None:
        status, answer = response.status_code, dict(response.headers)  # lowercase names
        if status >= 400 and not answer.get(b"content-type", b"").startswith(b"text/event-stream"):
            await self._refused(message, status, response.reason, await read_body(connection))
            return
        if message.get("method") == "initialize" and SESSION_HEADER.encode() in answer:
            self.session_id = answer[SESSION_HEADER.encode()].decode()
        kind = answer.get(b"content-type", b"")
        if kind.startswith(b"text/event-stream"):
            async for data in event_data(connection):
                await self._relay(data, tasks)
            return
        if kind.startswith(b"application/json") and self.protocol is not None:
            await self._pass_on(connection)
            return
        body = await read_body(connection)
        if kind.startswith(b"application/json") and body.strip():  # a 202 for a notification has no body
            await self._relay(body, tasks)

    async def _refused(self, message: dict[str, Any], status: int, reason: bytes, raw: bytes) -> None:
        """An HTTP error becomes a JSON-RPC error for the request it answers (with the request's id, which an error
        answered before the server read the body cannot carry), saying what the server said."""
        try:
            body = json.loads(raw) if raw.strip() else None
        except ValueError:
            body = None
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(body, dict) and body.get("jsonrpc") == "2.0" and isinstance(error, dict):
            if "id" in message and "method" in message:
                await self.emit({**body, "id": message["id"] if body.get("id") is None else body["id"]})
            return
        said = error.get("message") if isinstance(error, dict) else None
        await self._fail(message, f"Hivenote refused the request ({status}): {said or reason.decode(errors='replace')}")

    async def _pass_on(self, connection: Body) -> None:
        """A JSON answer written to the client as it arrives, in the pieces it arrives in: a big one (read_graph)
        reaches the client while the rest is still on its way, and is never copied whole. A line end can only be
        whitespace in JSON, so any becomes a space: stdio framing ends a message at a line end. Each piece is
        written once the next one is known, so the last goes with the line's end in one write (the client wakes
        once for an answer that came in one piece, not once more for its line end)."""
        chunk = await connection.chunk()
        if not chunk:
            return  # a 202 for a notification has no body
        async with self._write_lock:
            size, piece = 0, b""
            try:
                while chunk:
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise AnswerTooBig(f"an answer larger than {MAX_ANSWER_BYTES} bytes")
                    self.stdout.write(piece)
                    piece = chunk.translate(LINE_ENDS_TO_SPACES)
                    chunk = await connection.chunk()
            finally:  # the line is ended even if the answer broke off, so the client reads the error that follows
                self.stdout.write(piece + b"\n")
                self.stdout.flush()

    async def _reopen(self, stale: str, tasks: anyio.abc.TaskGroup) -> None:
        """A new session in place of one the server forgot: the client's initialize and subscriptions sent again,
        their answers kept from the client (it already had them), the notification stream opened again."""
        async with self._reopening:
            if self.session_id != stale or self._initialize is None:
                return  # another request already did it
            self.session_id = None
            initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            for raw in (self._initialize, initialized, *self._subscriptions.values()):
                async with self.pool.exchange("POST", self._post_headers(), raw) as (response, connection):
                    answer = dict(response.headers)
                    if raw is self._initialize:
                        self.session_id = answer.get(SESSION_HEADER.encode(), b"").decode() or None
                    if answer.get(b"content-type", b"").startswith(b"text/event-stream"):
                        async for _ in event_data(connection):
                            pass
                    else:
                        await read_body(connection)
            if self.session_id:
                tasks.start_soon(self._listen)

    def _remember_subscription(self, raw: bytes, message: dict[str, Any]) -> None:
        params = message.get("params")
        uri = params.get("uri") if isinstance(params, dict) else None
        if isinstance(uri, str) and message.get("method") == "resources/subscribe":
            self._subscriptions[uri] = raw.strip()
        elif isinstance(uri, str) and message.get("method") == "resources/unsubscribe":
            self._subscriptions.pop(uri, None)

    async def _relay(self, data: bytes, tasks: anyio.abc.TaskGroup) -> None:
        # Passed on as it came (one line of compact JSON): only the answer to initialize is looked into, and one
        # spanning lines, which stdio framing cannot carry, is written again on one.
        if self.protocol is None or b"\n" in data:
            answer = json.loads(data)
            if isinstance(answer, dict):
                result = answer.get("result")
                if isinstance(result, dict) and "protocolVersion" in result and "serverInfo" in result:
                    self.protocol = str(result["protocolVersion"])
                    if self.session_id and not self._listening:
                        self._listening = True
                        tasks.start_soon(self._listen)
            if b"\n" in data:
                data = json.dumps(answer, ensure_ascii=False).encode()
        await self._write(data)

    async def _listen(self) -> None:
        """The standalone stream: notifications the server sends on its own (resource updates)."""
        try:
            connection = await self.pool.connect()
        except (*TRANSPORT_ERRORS, NotOurServer):
            return
        try:
            headers = self.pool.framed(self._headers("text/event-stream"), b"")
            response = await connection.request("GET", self.pool.target, headers, b"")
            if response.status_code != 200:
                return
            async for data in event_data(connection):
                await self._write_notification(data)
        except (*TRANSPORT_ERRORS, ValueError):
            return
        finally:
            await connection.aclose()

    async def _write_notification(self, data: bytes) -> None:
        await self._write(data if b"\n" not in data else json.dumps(json.loads(data), ensure_ascii=False).encode())

    async def run(self, stdin: BinaryIO, pending: bytes = b"") -> None:
        """Serve the client's lines until stdin ends; `pending`: lines read from it before (by the server that
        handed the session back), served first."""
        async with anyio.create_task_group() as bg:
            try:
                async with anyio.create_task_group() as requests:  # exits once every request has its answer
                    async for raw in _lines(stdin, pending):
                        try:
                            message = json.loads(raw)
                        except ValueError:
                            await self.emit(
                                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
                            )
                            continue
                        if isinstance(message, dict) and message.get("method") == "initialize":
                            self._initialize = raw.strip()
                            await self.forward(raw, message, bg)  # the session must exist before anything else
                        elif isinstance(message, dict):
                            self._remember_subscription(raw, message)
                            requests.start_soon(self.forward, raw, message, bg)
                if self.session_id and self.session_id != HANDED_BACK:
                    with contextlib.suppress(*TRANSPORT_ERRORS, ValueError):
                        async with self.pool.exchange("DELETE", self._headers("application/json")) as (_, connection):
                            await read_body(connection)
            finally:
                bg.cancel_scope.cancel()
                await self.pool.aclose()


async def _lines(stream: BinaryIO, pending: bytes = b"") -> AsyncIterator[bytes]:
    """The client's messages, one a line (`pending`'s first, then the stream's). Read by the event loop itself where
    stdin is a pipe (POSIX): a worker thread per line made every message wake two threads before it was even sent
    on."""
    reader = await _pipe_reader(stream)
    if reader is not None and pending:
        reader.feed_data(pending)
        pending = b""
    while True:
        if reader is not None:
            try:
                line = await reader.readline()
            except ValueError:  # a line past the reader's limit: let the server's JSON parser refuse it
                line = await reader.read(MAX_ANSWER_BYTES)
        elif pending:
            line, newline, pending = pending.partition(b"\n")
            line += newline or await anyio.to_thread.run_sync(stream.readline)
        else:
            line = await anyio.to_thread.run_sync(stream.readline)
        if not line:
            return
        if line.strip():
            yield line


async def _pipe_reader(stream: BinaryIO) -> asyncio.StreamReader | None:
    if sys.platform == "win32":  # the proactor loop cannot read a console or an inherited anonymous pipe
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_ANSWER_BYTES, loop=loop)
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stream)
    except (ValueError, OSError):  # a regular file or a terminal: read it in a thread instead
        return None
    return reader


def refuse_all(reason: str, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """When no bridge can be made (the port is held by something else): every request the client sends gets a
    JSON-RPC error with its id and `reason`, so the client shows why instead of a dropped connection."""
    for line in stdin:
        try:
            message = json.loads(line)
        except ValueError:
            message = {"id": None, "method": ""}
        if isinstance(message, dict) and "id" in message and "method" in message:
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": reason}}
            stdout.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
            stdout.flush()


def run_bridge(url: str, token: str | None, data_dir: Path | None = None, handed: HandOver | None = None) -> None:
    """The bridge on this process's stdin and stdout; with `handed`, taking over a session the server ran on them."""
    bridge = Bridge(url, token, sys.stdout.buffer, data_dir)
    pending = b""
    if handed is not None:
        # The server had the pipes non-blocking; the bridge writes stdout with blocking writes.
        with contextlib.suppress(OSError):
            os.set_blocking(sys.stdout.fileno(), True)
            os.set_blocking(sys.stdin.fileno(), True)
        if handed.crashed:  # what it had read and not answered is lost: the client's own timeout applies to those
            sys.stderr.write("hivenote: the server ended without handing the session back; the HTTP bridge serves it\n")
        if handed.unwritten:
            sys.stdout.buffer.write(handed.unwritten)
            sys.stdout.buffer.flush()
        bridge.resume(handed.initialize, handed.protocol, handed.subscriptions)
        pending = handed.pending
    anyio.run(bridge.run, sys.stdin.buffer, pending)
