"""`hivenote stdio` handing its client's session to the running server (POSIX): the stdio process passes its stdin
and stdout to the server of its data dir over a Unix domain socket (SCM_RIGHTS), and the server runs the MCP session
on them itself, with the SDK's own session runner, reading the client's requests straight from the pipe and writing
its answers straight to it. A tool call then wakes two processes (client and server), as with the official
node server, where the HTTP bridge (stdio.py) woke four. The stdio process stays, waiting on the socket (the client
watches its child process), and exits when the server says the session ended.

Who may hand a session over: only this OS user. The socket lives where only this user can reach it (`socket_path`),
and the server checks the peer's uid against its own (`peer_uid`) before it reads anything; a token plays no part.

The server stopping (tray Stop, `hivenote stop`) hands the session back: reading stops at a line's end, requests
already read get their answers (for up to HANDBACK_WAIT_S), and the stdio process is sent what the server read but
did not handle, what it could not write yet, the client's `initialize` and its subscriptions; it then carries on as
the HTTP bridge, which opens a new session on the next server with that `initialize` (as after a restart). When
the server dies without a word (kill -9, a crash), the stdio process has the `initialize` and subscriptions the
server sent as soon as it answered them; what the server had read and not answered is lost (see `HandOver`).

The stdio process falls back to the bridge, with nothing read from stdin, whenever the handoff is not there: Windows,
a server without the socket (an older one), a socket that does not answer, a refusal.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import socket
import stat
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, NamedTuple, Self

import anyio
import anyio.abc
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import ServerRunner, serve_dual_era_loop
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from . import sdk
from .direct import RequestChannel
from .handoff_stdio import VERSION, available, json_line, peer_uid, pipe_problem, same_user
from .splice import SCOPE_KEY, Splices

log = logging.getLogger(__name__)

READ_SIZE: Final = 1 << 16
MAX_IN_FLIGHT: Final = 64  # requests read and not yet answered; past it the pipe is not read
OUT_HIGH_WATER: Final = 1 << 20  # answer bytes not yet taken by the client; past it the pipe is not read
HANDBACK_WAIT_S: Final = 2.0  # a stopping server waits this long for the answers to requests it already read
CONTROL_SEND_S: Final = 5.0
ADMIT_TIMEOUT_S: Final = 5.0  # from connecting to the request with its descriptors
ID_SCAN_BYTES: Final = 1 << 16  # of a line past the limit, where its id is looked for
REPLY_BYTES: Final = 1 << 10
_CLOEXEC: Final = getattr(socket, "MSG_CMSG_CLOEXEC", 0)  # received descriptors are not inherited by children
PARSE_ERROR: Final = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n'


# -- the server side --------------------------------------------------------------------------------------------------


class Endpoint(NamedTuple):
    """An MCP endpoint a session can be handed to: its SDK server and the HTTP session manager whose lifespan state
    its sessions share, and the longest line it takes (the HTTP route's body limit)."""

    server: Server[Any]
    manager: StreamableHTTPSessionManager
    max_line: int
    too_large: str  # what a longer line is answered
    # A plain `tools/call` answered in a task of its own by the SDK's runner, not through the session's streams and
    # dispatcher (as `direct.py` does on HTTP): for the graph, whose tools never talk back during a call.
    direct: bool = False


def _error_line(request_id: Any, code: int, text: str) -> bytes:
    return json_line({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}})


class Handoff:
    """The listening socket and the sessions handed over on it, for the app's lifespan (`listening`)."""

    def __init__(self, path: Path | None, endpoints: dict[str, Endpoint]) -> None:
        self.path = path
        self.endpoints = endpoints
        self.listening_at: Path | None = None  # where it listens, once it does (announced in server.json)
        self.sessions: set[HandedSession] = set()
        self.refused = 0  # connections refused (tests)
        self._tasks: anyio.abc.TaskGroup | None = None
        for endpoint in endpoints.values():
            if endpoint.direct:
                endpoint.server.middleware.append(_remember_connection)

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[None]:
        """Listen while the block runs; as it ends, hand every session back to its stdio process."""
        listener = self._bind()
        if listener is None:
            yield
            return
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(self._accept, listener)
                try:
                    yield
                finally:
                    with anyio.CancelScope(shield=True):
                        await self.hand_back_all()
                    tasks.cancel_scope.cancel()
        finally:
            self.listening_at = None
            listener.close()
            with contextlib.suppress(OSError):
                os.unlink(str(self.path))

    def _bind(self) -> socket.socket | None:
        if self.path is None or not available():
            return None
        path = str(self.path)
        # A socket left by a server that died: this process holds the data dir's lock, so no other server of this
        # data dir can be listening on it.
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(16)
            listener.setblocking(False)
        except OSError as exc:
            listener.close()
            log.warning("stdio clients use the HTTP bridge: cannot listen on %s (%s)", path, exc)
            return None
        self.listening_at = self.path
        return listener

    async def _accept(self, listener: socket.socket) -> None:
        assert self._tasks is not None
        while True:
            await anyio.wait_readable(listener)
            try:
                connection, _ = listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as exc:  # out of descriptors: the stdio process falls back to the bridge meanwhile
                log.warning("could not accept a stdio handoff: %s", exc)
                await anyio.sleep(0.1)
                continue
            self._tasks.start_soon(self._admit, connection)

    async def _admit(self, control: socket.socket) -> None:
        """One stdio process: checked, then its session run here until it ends or is handed back."""
        fds: list[int] = []
        try:
            control.setblocking(False)
            if not same_user(control):
                self.refused += 1
                log.warning("refused a stdio handoff from another user (uid %s)", peer_uid(control))
                await _send(
                    control, json_line({"refused": "only the user running this Hivenote may hand it a session"})
                )
                return
            data, flags = b"", 0
            with anyio.move_on_after(ADMIT_TIMEOUT_S):
                while True:
                    await anyio.wait_readable(control)
                    try:
                        data, fds, flags, _ = socket.recv_fds(control, 4096, 4, _CLOEXEC)
                    except (BlockingIOError, InterruptedError):
                        continue
                    break
            problem, endpoint = self._check(data, fds, flags)
            if problem is not None or endpoint is None:
                self.refused += 1
                await _send(control, json_line({"refused": problem}))
                return
            session = HandedSession(control, fds[0], fds[1], endpoint)
            fds = []  # the session's now
            self.sessions.add(session)
            try:
                await _send(control, json_line({"accepted": True}))
                await session.run()
            finally:
                self.sessions.discard(session)
        except Exception:  # one stdio process's trouble must not end the listener or the server
            log.exception("a handed-over stdio session failed")
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            control.close()

    def _check(self, data: bytes, fds: list[int], flags: int) -> tuple[str | None, Endpoint | None]:
        if not data:
            return "no handoff request", None
        if flags & getattr(socket, "MSG_CTRUNC", 0):
            return "the descriptors did not all arrive", None
        try:
            request = json.loads(data)
        except ValueError:
            return "not a handoff request", None
        if not isinstance(request, dict) or request.get("hivenote") != "handoff" or request.get("version") != VERSION:
            return f"not a version {VERSION} handoff request", None
        endpoint = self.endpoints.get(str(request.get("endpoint")))
        if endpoint is None:
            return f"no MCP endpoint {request.get('endpoint')!r} here (one of {', '.join(self.endpoints)})", None
        if len(fds) != 2:
            return "send exactly two descriptors: stdin and stdout", None
        why = pipe_problem(fds[0], writing=False) or pipe_problem(fds[1], writing=True)
        return why, (None if why else endpoint)

    async def hand_back_all(self) -> None:
        """Every session handed back to its stdio process, at once (the server is stopping)."""
        async with anyio.create_task_group() as tasks:
            for session in list(self.sessions):
                tasks.start_soon(session.hand_back)


async def _send(sock: socket.socket, data: bytes) -> bool:
    """Send on a non-blocking socket; False when the stdio process is gone, or stopped reading for CONTROL_SEND_S."""
    view = memoryview(data)
    with anyio.move_on_after(CONTROL_SEND_S):
        while view:
            try:
                sent = sock.send(view)
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(sock)
                continue
            except OSError:  # it ended (the client stopped it): nothing waits for this any more
                return False
            view = view[sent:]
    return not view


class HandedRequest:
    """What a handed session's request carries to its handler where an HTTP request would be: a scope holding the
    `Splices` its answer gets (read_graph's encoded bytes, written into the answer line by `HandedSession.send`,
    as `Splicing` does for HTTP). No headers, no person: the caller is this user, named by its `initialize`."""

    __slots__ = ("scope", "session")

    def __init__(self, session: HandedSession, splices: Splices | None = None) -> None:
        self.session = session
        self.scope = {SCOPE_KEY: splices} if splices is not None else {}


async def _remember_connection(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the SDK connection of a handed session, learnt from a request the SDK serves on it, so
    later tool calls can be answered directly (`HandedSession._direct`)."""
    request = ctx.request
    if isinstance(request, HandedRequest) and request.session.connection is None:
        connection = sdk.connection_of(ctx.session)
        if connection is not None:
            request.session.connection = connection
    return await call_next(ctx)


class _DirectChannel(RequestChannel):
    """The `DispatchContext` of a tool call answered directly on a handed session: as over HTTP, but a notification
    goes to the client's stdout as the dispatcher would send it."""

    def __init__(self, session: HandedSession, request_id: RequestId, metadata: ServerMessageMetadata) -> None:
        super().__init__(request_id, metadata)
        self.session = session

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        notification = JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params) if params else None)
        await self.session.send(SessionMessage(notification))


def _enveloped(params: Mapping[str, Any] | None) -> bool:
    """Whether a request carries the 2026-07-28 per-request envelope (the SDK's loop decides what to do with it)."""
    meta = (params or {}).get("_meta")
    return isinstance(meta, Mapping) and any(str(key).startswith("io.modelcontextprotocol/") for key in meta)


class HandedSession:
    """One MCP session on a client's own stdin and stdout, run by the SDK (`serve_dual_era_loop`, as its stdio
    server does) over `PipeIn` and `PipeOut`, which read and write the pipes with the event loop.

    What it keeps so a stop can hand the session back exactly: the bytes read from the pipe and not yet handed to
    the SDK (`inbox`), the answer bytes not yet taken by the client (`outbox`), the requests handed to the SDK and not
    answered (`in_flight`), the client's `initialize` line and its subscription lines."""

    def __init__(self, control: socket.socket, stdin: int, stdout: int, endpoint: Endpoint) -> None:
        self.control, self.stdin, self.stdout, self.endpoint = control, stdin, stdout, endpoint
        os.set_blocking(stdin, False)
        os.set_blocking(stdout, False)
        self.inbox = bytearray()
        self._scanned = 0
        self._overlong = False  # the rest of a line past `max_line` is being dropped
        self._head = b""  # that line's first bytes
        self.eof = False
        self.outbox = bytearray()
        self._flushing = False
        self.broken = False  # the client's stdout is gone
        self.in_flight: Counter[RequestId] = Counter()
        self._splices: dict[RequestId, Splices] = {}  # of the tool calls in flight
        self.connection: Connection | None = None  # the SDK's, once a request it served named it
        self._tasks: anyio.abc.TaskGroup | None = None
        self.direct = 0  # tool calls answered directly (tests, benchmarks)
        self.initialize: bytes | None = None
        self._initialize_id: RequestId | None = None
        self._initialize_answered = False
        self._state_ids: set[RequestId] = set()  # requests whose answer changes what the stdio process keeps
        self.protocol: str | None = None
        self.subscriptions: dict[str, bytes] = {}
        self.stopping = False  # handing back: no more lines go to the SDK
        self._handing_back = False
        self._changed = anyio.Event()
        self._scope = anyio.CancelScope()
        self.finished = anyio.Event()

    def _note_change(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    # -- the client's lines in -----------------------------------------------------------------------------------------

    def _take_line(self) -> tuple[bytes, bool] | None:
        """The next whole line read (without its end) and whether it was past `max_line` (then only its first
        ID_SCAN_BYTES are kept, to name its id); None until a line is whole."""
        end = self.inbox.find(b"\n", self._scanned)
        if end < 0:
            if self.eof and (self.inbox or self._overlong):  # a last line without its end, as readline gives it
                end = len(self.inbox)
            else:
                self._scanned = len(self.inbox)
                if self._scanned > self.endpoint.max_line:  # dropped as it comes, its head kept; refused at its end
                    if not self._overlong:
                        self._overlong, self._head = True, bytes(self.inbox[:ID_SCAN_BYTES])
                    self.inbox.clear()
                    self._scanned = 0
                return None
        line = bytes(self.inbox[:end])
        del self.inbox[: end + 1]
        self._scanned = 0
        if self._overlong or len(line) > self.endpoint.max_line:
            head = self._head if self._overlong else line[:ID_SCAN_BYTES]
            self._overlong, self._head = False, b""
            return head, True
        return line, False

    def _fill(self) -> None:
        try:
            data = os.read(self.stdin, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.inbox += data
        else:
            self.eof = True

    def _busy(self) -> bool:
        return sum(self.in_flight.values()) >= MAX_IN_FLIGHT or len(self.outbox) > OUT_HIGH_WATER

    async def next_message(self) -> SessionMessage:
        """The next message for the SDK, read from the pipe; bad lines are answered here and go no further."""
        while True:
            if self.stopping:
                await anyio.sleep_forever()
            if self._busy():  # what is read stays in the inbox (or the pipe) until the client takes answers
                await self._changed.wait()
                continue
            taken = self._take_line()
            if taken is not None:
                message = await self._admit_line(*taken)
                if message is not None:
                    return message
                continue
            if self.eof:
                await self.all_answered()  # as the bridge: every request has its answer before the session ends
                raise anyio.EndOfStream
            await anyio.wait_readable(self.stdin)
            self._fill()

    async def _admit_line(self, line: bytes, too_long: bool) -> SessionMessage | None:
        if too_long:  # the HTTP route's refusal, with the request's id when its head names it
            await self.write(_error_line(top_level_id(line), -32600, self.endpoint.too_large))
            return None
        if not line.strip():
            return None
        try:
            message = jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValidationError as exc:
            await self.write(_refusal(line, exc))
            return None
        if isinstance(message, JSONRPCRequest):
            self.in_flight[message.id] += 1
            if message.method == "tools/call":
                splices = self._splices[message.id] = Splices()
                metadata = ServerMessageMetadata(request_context=HandedRequest(self, splices))
                if self._direct_now(message) and self._tasks is not None:
                    self._tasks.start_soon(self._direct, message, metadata)
                    return None
                return SessionMessage(message, metadata=metadata)
            if message.method == "initialize":
                self.initialize, self._initialize_id = line.strip(), message.id
            elif message.method in ("resources/subscribe", "resources/unsubscribe"):
                self._remember_subscription(message, line.strip())
                self._state_ids.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            # A cancelled request may get no answer: it no longer holds the session open.
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, (str, int)) and self.in_flight[cancelled]:
                self._answered(cancelled)
                self._splices.pop(cancelled, None)
        if self.connection is None and self.endpoint.direct:
            return SessionMessage(message, metadata=ServerMessageMetadata(request_context=HandedRequest(self)))
        return SessionMessage(message)

    def _direct_now(self, message: JSONRPCRequest) -> bool:
        connection = self.connection
        return (
            self.endpoint.direct
            and connection is not None
            and connection.initialize_accepted
            and not _enveloped(message.params)
        )

    async def _direct(self, message: JSONRPCRequest, metadata: ServerMessageMetadata) -> None:
        """What the session's dispatcher and runner would answer, from the runner itself, in a task of its own."""
        assert self.connection is not None
        runner = ServerRunner(self.endpoint.server, self.connection, sdk.lifespan_state(self.endpoint.manager))
        answer: JSONRPCResponse | JSONRPCError
        try:
            result = await runner.on_request(_DirectChannel(self, message.id, metadata), message.method, message.params)
            answer = JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
        except Exception as exc:  # the dispatcher's one exception-to-wire boundary, as it is
            error = handler_exception_to_error_data(exc)
            if error is None:
                log.exception("handler for %r raised", message.method)
                error = ErrorData(code=0, message=str(exc))
            answer = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        self.direct += 1
        await self.send(SessionMessage(answer))

    def _remember_subscription(self, message: JSONRPCRequest, line: bytes) -> None:
        uri = (message.params or {}).get("uri")
        if isinstance(uri, str) and message.method == "resources/subscribe":
            self.subscriptions[uri] = line
        elif isinstance(uri, str):
            self.subscriptions.pop(uri, None)

    def _answered(self, request_id: RequestId) -> None:
        self.in_flight[request_id] -= 1
        if self.in_flight[request_id] <= 0:
            del self.in_flight[request_id]
        self._note_change()

    async def all_answered(self) -> None:
        while self.in_flight and not self.broken:
            await self._changed.wait()

    # -- the answers out -----------------------------------------------------------------------------------------------

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        data = message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        if not isinstance(message, (JSONRPCResponse, JSONRPCError)) or message.id is None:
            await self.write(data)  # a notification, or an error about no request in particular
            return
        if (splices := self._splices.pop(message.id, None)) is not None and splices.pairs:
            data = splices.apply(data)  # read_graph's encoded bytes where its placeholders are
        if message.id in self.in_flight:
            if message.id == self._initialize_id and isinstance(message, JSONRPCResponse):
                version = message.result.get("protocolVersion")
                self.protocol = version if isinstance(version, str) else None
                self._initialize_answered = True
                self._state_ids.add(message.id)
            if message.id in self._state_ids:
                # Sent before the answer: whatever happens to this server once the client has it, the stdio
                # process can open the same session again elsewhere.
                self._state_ids.discard(message.id)
                await self._send_state()
            self.outbox += data
            self._answered(message.id)
            await self._flush()
            return
        await self.write(data)

    async def write(self, data: bytes) -> None:
        self.outbox += data
        await self._flush()

    async def _flush(self) -> None:
        """Write the outbox to the client's stdout. One writer at a time; the others' bytes are in the outbox and
        go with it, in order. Bytes a stop or cancellation leaves here are handed back, never dropped."""
        if self._flushing:
            return
        self._flushing = True
        try:
            while self.outbox and not self.broken:
                try:
                    written = os.write(self.stdout, self.outbox)
                except (BlockingIOError, InterruptedError):
                    await anyio.wait_writable(self.stdout)
                    continue
                except OSError:  # the client closed its end: it is gone
                    self.broken = True
                    self.outbox.clear()
                    self._scope.cancel()
                    break
                del self.outbox[:written]
        finally:
            self._flushing = False
            self._note_change()

    async def _send_state(self) -> None:
        if self._initialize_answered and self.initialize is not None:
            state = {
                "initialize": self.initialize.decode(errors="replace"),
                "protocol": self.protocol,
                "subscriptions": [line.decode(errors="replace") for line in self.subscriptions.values()],
            }
            await _send(self.control, json_line({"state": state}))

    # -- the session ---------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until the client closes stdin (every answer written), its stdio process goes, or `hand_back`."""
        endpoint = self.endpoint
        try:
            with self._scope:
                async with anyio.create_task_group() as tasks:
                    self._tasks = tasks
                    tasks.start_soon(self._watch_control)
                    await serve_dual_era_loop(
                        endpoint.server,
                        PipeIn(self),
                        PipeOut(self),
                        lifespan_state=sdk.lifespan_state(endpoint.manager),
                    )
                    tasks.cancel_scope.cancel()
        except Exception:
            log.exception("a handed-over stdio session failed; its stdio process takes it back")
            self._handing_back = True
        finally:
            with anyio.CancelScope(shield=True):
                if self._handing_back and not self.broken:
                    await _send(self.control, json_line({"handback": self._handback()}))
                else:
                    with anyio.move_on_after(CONTROL_SEND_S):  # the last answers, to a client still reading
                        await self._flush()
                    await _send(self.control, json_line({"end": "closed"}))
                for fd in (self.stdin, self.stdout):
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.finished.set()

    async def _watch_control(self) -> None:
        """The stdio process ending (the client stopped it) ends the session: no one waits for it any more."""
        while True:
            await anyio.wait_readable(self.control)
            try:
                if not self.control.recv(REPLY_BYTES):
                    break
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                break
        self._scope.cancel()

    async def hand_back(self) -> None:
        """Stop reading at a line's end, let the requests already read be answered (for up to HANDBACK_WAIT_S),
        then end the session and send the stdio process what it needs to go on (`_handback`)."""
        self.stopping = True
        self._note_change()
        with anyio.move_on_after(HANDBACK_WAIT_S):
            await self.all_answered()
        self._handing_back = True
        self._scope.cancel()
        await self.finished.wait()

    def _handback(self) -> dict[str, Any]:
        """What the stdio process takes over with: the bytes to write to the client first (answers not yet taken,
        then an error for each request that got no answer: it may or may not have taken effect, so it is not sent
        again), the bytes to read before stdin's (lines not handed to the SDK; an `initialize` that got no answer
        goes first, sending it again changes nothing), and the session to open again."""
        unwritten = bytes(self.outbox)
        pending = bytes(self.inbox)
        for request_id in self.in_flight:
            if request_id == self._initialize_id and self.initialize is not None and not self._initialize_answered:
                pending = self.initialize + b"\n" + pending
                self.initialize = None
                continue
            unwritten += _error_line(
                request_id, -32603, "Hivenote stopped before answering; this request may or may not have taken effect"
            )
        return {
            "initialize": None if self.initialize is None else self.initialize.decode(errors="replace"),
            "protocol": self.protocol,
            "subscriptions": [line.decode(errors="replace") for line in self.subscriptions.values()],
            "pending": base64.b64encode(pending).decode(),
            "unwritten": base64.b64encode(unwritten).decode(),
        }


def top_level_id(head: bytes) -> str | int | None:
    """The `id` member of the JSON object `head` begins (a line cut short, too long to parse whole), when it comes
    before the cut; None otherwise. Members of nested objects (a tool's arguments) are passed over."""
    text = head.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    depth, i = 0, 0
    while i < len(text):
        char = text[i]
        if char == '"':
            try:
                key, i = decoder.raw_decode(text, i)
            except ValueError:
                return None  # cut inside a string
            rest = text[i:].lstrip()
            if depth == 1 and key == "id" and rest.startswith(":"):
                start = len(text) - len(rest) + 1
                start += len(text[start:]) - len(text[start:].lstrip())
                try:
                    value, _ = decoder.raw_decode(text, start)
                except ValueError:
                    return None
                return value if isinstance(value, (str, int)) and not isinstance(value, bool) else None
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        i += 1
    return None


def _refusal(line: bytes, exc: ValidationError) -> bytes:
    """The answer to a line that is not a JSON-RPC message, as the bridge gave it: a parse error for what is not
    JSON, an invalid request (with its id when it has one) for JSON that is not a message."""
    try:
        raw = json.loads(line)
    except ValueError:
        return PARSE_ERROR
    request_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    first = exc.errors()[0]["msg"] if exc.errors() else "not a JSON-RPC message"
    return _error_line(request_id, -32600, f"Invalid Request: {first}")


class _Stream:
    """An SDK stream's context manager: the session ends them, not the SDK's `async with`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


class PipeIn(_Stream):
    """The SDK's read stream over a handed session's stdin."""

    def __init__(self, session: HandedSession) -> None:
        self.session = session

    async def receive(self) -> SessionMessage:
        return await self.session.next_message()

    async def aclose(self) -> None:
        return None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class PipeOut(_Stream):
    """The SDK's write stream over a handed session's stdout."""

    def __init__(self, session: HandedSession) -> None:
        self.session = session

    async def send(self, item: SessionMessage, /) -> None:
        await self.session.send(item)

    async def aclose(self) -> None:
        return None
