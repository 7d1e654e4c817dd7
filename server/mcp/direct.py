"""`tools/call` on /mcp/graph answered in its HTTP request's own task: the SDK's own request handling (its
middleware, so agent tracking; its checks of the request and its params; the tool; the shaping of the answer) run
on the session's connection, without the session's message streams, router and dispatcher task in between (most of
a small call's server time went there). Anything but a plain `tools/call` on a live, initialized session is handed
to the SDK unchanged, with its body, so every refusal is the SDK's own.

It sits inside the auth guard (the route is what the guard lets through) and inside the session limits; what the
SDK's transport checks on the way (Content-Type, Accept, the session, the protocol version header) is checked with
the SDK's own functions, and a request failing any of them goes the SDK's way. One difference: a client's
`notifications/cancelled` for a call answered here finds nothing to cancel (the call runs to its answer, a few
milliseconds), where the SDK would answer it with a "Request cancelled" error if it came in time."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import anyio
import pydantic_core
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse, RequestId, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import sdk as sdk_internals

log = logging.getLogger(__name__)

METHOD: Final = "tools/call"
_SESSION: Final = MCP_SESSION_ID_HEADER.encode()
_PROTOCOL: Final = MCP_PROTOCOL_VERSION_HEADER.encode()
_REMEMBERED: Final = "hivenote.direct.remembered"  # per-connection flag in `Connection.state`
NO_BACK_CHANNEL: Final = TransportContext(kind="jsonrpc", can_send_request=False)


class Connections:
    """The SDK's connection behind each HTTP session id, learnt from the requests the SDK serves (the first is the
    session's `initialize`) and forgotten when the connection ends."""

    def __init__(self) -> None:
        self._by_session: dict[str, Connection] = {}

    def get(self, session_id: str) -> Connection | None:
        return self._by_session.get(session_id)

    def __len__(self) -> int:
        return len(self._by_session)

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: remembers the connection of every request that came over HTTP with a session."""
        connection = sdk_internals.connection_of(ctx.session)
        if connection is not None and connection.session_id and not connection.state.get(_REMEMBERED):
            connection.state[_REMEMBERED] = True
            self._by_session[connection.session_id] = connection
            connection.exit_stack.callback(self._by_session.pop, connection.session_id, None)
        return await call_next(ctx)


class RequestChannel:
    """The `DispatchContext` of a request answered directly: as the SDK's in JSON-response mode, where the answer's
    body carries only the answer (no server-initiated request, and nothing else scoped to the request, reaches the
    client)."""

    transport = NO_BACK_CHANNEL
    can_send_request = False

    def __init__(self, request_id: RequestId, metadata: ServerMessageMetadata) -> None:
        self.request_id = request_id
        self.message_metadata = metadata
        self._cancel: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        if self._cancel is None:
            self._cancel = anyio.Event()
        return self._cancel

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        log.debug("dropped %s: a JSON answer carries only the answer", method)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((v for k, v in scope["headers"] if k == name), None)


async def _whole_body(receive: Receive) -> tuple[bytes, list[Message]] | None:
    """The request's body, and the messages read to get it (to hand on if the SDK answers after all); None when the
    client left before sending it all."""
    body = bytearray()
    read: list[Message] = []
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body), read


def _replaying(read: list[Message], receive: Receive) -> Receive:
    pending = list(read)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


class DirectCalls:
    """ASGI: a plain `tools/call` answered directly (see the module's doc); any other request goes to `sdk`, the
    SDK's Streamable HTTP endpoint of `manager` (JSON-response mode)."""

    def __init__(
        self,
        server: Server[Any],
        manager: StreamableHTTPSessionManager,
        connections: Connections,
        sdk: ASGIApp,
    ) -> None:
        assert manager.json_response, "answered directly means one JSON body, as the SDK's JSON-response mode"
        sdk_internals.check(manager)
        self.server = server
        self.manager = manager
        self.connections = connections
        self.sdk = sdk
        self.on = True  # off: every request goes the SDK's way (the equivalence tests compare the two)
        self.answered = 0  # tools/call requests answered directly (tests, benchmarks)

    def _session(self, scope: Scope) -> tuple[StreamableHTTPServerTransport, Connection] | None:
        """The live, initialized session a request names, when the SDK would hand it to that session's transport
        as it is; else None."""
        raw = _header(scope, _SESSION)
        protocol = _header(scope, _PROTOCOL)
        if raw is None or (protocol is not None and protocol.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS):
            return None
        session_id = raw.decode("latin-1")
        transport = sdk_internals.live_sessions(self.manager).get(session_id)
        connection = self.connections.get(session_id)
        if (
            transport is None
            or connection is None
            or not sdk_internals.running(self.manager)
            or "user" in scope  # the SDK's per-credential session owners: not used here, so not answered here
            or sdk_internals.session_owned(self.manager, session_id)
            or transport.is_terminated
            or (transport.idle_scope is not None and transport.idle_scope.cancel_called)
            or not connection.initialize_accepted
        ):
            return None
        return transport, connection

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not self.on:
            await self.sdk(scope, receive, send)
            return
        found = self._session(scope)
        if found is None:
            await self.sdk(scope, receive, send)
            return
        transport, connection = found
        request = Request(scope, receive)
        has_json, _ = check_accept_headers(request)
        if not has_json or await sdk_internals.refuses(transport, request):
            await self.sdk(scope, receive, send)
            return
        whole = await _whole_body(receive)
        if whole is None:
            await self.sdk(scope, _replaying([], receive), send)
            return
        body, read = whole
        replay = _replaying(read, receive)
        message = _plain_call(body)
        if message is None:
            await self.sdk(scope, replay, send)
            return
        await self._answer(transport, connection, message, Request(scope, replay), send)

    async def _answer(
        self,
        transport: StreamableHTTPServerTransport,
        connection: Connection,
        message: JSONRPCRequest,
        request: Request,
        send: Send,
    ) -> None:
        """What the session's transport, dispatcher and runner would answer, from the runner itself; the session
        counts as busy meanwhile (its idle countdown stopped), as for any request the SDK serves."""
        with sdk_internals.busy(transport):
            metadata = ServerMessageMetadata(request_context=request, can_send_request=False)
            runner = ServerRunner(self.server, connection, sdk_internals.lifespan_state(self.manager))
            answer: JSONRPCResponse | JSONRPCError
            try:
                result = await runner.on_request(RequestChannel(message.id, metadata), METHOD, message.params)
                answer = JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)
            except Exception as exc:  # the dispatcher's one exception-to-wire boundary, as it is
                error = handler_exception_to_error_data(exc)
                if error is None:
                    log.exception("handler for %r raised", METHOD)
                    error = ErrorData(code=0, message=str(exc))
                answer = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
            self.answered += 1
            await sdk_internals.json_answer(transport, answer)(request.scope, request.receive, send)


def _plain_call(body: bytes) -> JSONRPCRequest | None:
    """The body as a `tools/call` request, parsed and checked as the SDK's transport does; None for anything else
    (the SDK answers it: a parse or validation error, another method, a batch, a notification)."""
    try:
        message = jsonrpc_message_adapter.validate_python(pydantic_core.from_json(body), by_name=False)
    except (ValueError, ValidationError):
        return None
    if isinstance(message, JSONRPCRequest) and message.method == METHOD:
        return message
    return None
