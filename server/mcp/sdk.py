"""The one place that reads the MCP SDK beyond its public interface: the session manager's table of live sessions,
its lifespan state and how it ends a session; a transport's own checks, JSON answer and idle countdown; the
connection a request came on; the low-level server under an `MCPServer`.

Each is read from mcp 2.3 (pyproject pins the minor release CI tests). `check` looks for every one at start, so a
release that moved any of them stops the server with a message saying which, instead of failing at a request."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any, Final

import anyio
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCError, JSONRPCResponse
from starlette.requests import Request
from starlette.types import ASGIApp

TESTED: Final = "2.3"  # the minor release everything here is read from

_MANAGER: Final = ("_server_instances", "_session_owners", "_task_group", "_lifespan_state", "_discard_session")
_TRANSPORT: Final = (
    "_idle_timeout",
    "_requests_in_flight",
    "_security",
    "_check_content_type",
    "_create_json_response",
)
_SERVER: Final = ("_lowlevel_server",)


class SdkMismatch(RuntimeError):
    """The installed MCP SDK is not the one Hivenote reads (some internal it uses is gone)."""


def missing(manager: StreamableHTTPSessionManager, server: MCPServer | None = None) -> list[str]:
    """What this module reads that the installed SDK lacks, for one session manager (and the server that made it)."""
    transport = StreamableHTTPServerTransport(mcp_session_id=None, idle_timeout=1.0)
    gone = [f"StreamableHTTPSessionManager.{name}" for name in _MANAGER if not hasattr(manager, name)]
    gone += [f"StreamableHTTPServerTransport.{name}" for name in _TRANSPORT if not hasattr(transport, name)]
    if server is not None:
        gone += [f"MCPServer.{name}" for name in _SERVER if not hasattr(server, name)]
    return gone


def check(manager: StreamableHTTPSessionManager, server: MCPServer | None = None) -> None:
    """Raise SdkMismatch, naming what is missing and what to install, unless everything read here is there."""
    gone = missing(manager, server)
    if gone:
        from importlib.metadata import version

        raise SdkMismatch(
            f"this MCP SDK (mcp {version('mcp')}) lacks what Hivenote reads of mcp {TESTED}: {', '.join(gone)}. "
            f"Install the tested release: pip install 'mcp>={TESTED},<{_next_minor(TESTED)}'"
        )


def _next_minor(release: str) -> str:
    major, minor = release.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


# -- the session manager ---------------------------------------------------------------------------------------


def live_sessions(manager: StreamableHTTPSessionManager) -> dict[str, StreamableHTTPServerTransport]:
    """The manager's own table of live sessions by id (an ended session leaves it)."""
    table: dict[str, StreamableHTTPServerTransport] = manager._server_instances
    return table


def session_owned(manager: StreamableHTTPSessionManager, session_id: str) -> bool:
    """Whether the SDK bound the session to a credential of its own auth (Hivenote's guard does not use it)."""
    return manager._session_owners.get(session_id) is not None


def running(manager: StreamableHTTPSessionManager) -> bool:
    """Whether the manager's `run()` is under way (it has a task group to run sessions in)."""
    return manager._task_group is not None


def lifespan_state(manager: StreamableHTTPSessionManager) -> Any:
    """What the server's lifespan yielded, as the manager hands it to each session's runner."""
    return manager._lifespan_state


async def end_session(
    manager: StreamableHTTPSessionManager, session_id: str, transport: StreamableHTTPServerTransport
) -> None:
    """End a live session as the manager ends an idle one."""
    await manager._discard_session(session_id, transport)


# -- a session's transport ---------------------------------------------------------------------------------------


async def refuses(transport: StreamableHTTPServerTransport, request: Request) -> bool:
    """Whether the transport would refuse this POST for its Content-Type or its DNS-rebinding protection."""
    if not transport._check_content_type(request):
        return True
    return await transport._security.validate_request(request, is_post=True) is not None


def json_answer(transport: StreamableHTTPServerTransport, answer: JSONRPCResponse | JSONRPCError) -> ASGIApp:
    """The transport's own HTTP response carrying one JSON-RPC answer (its headers, its session id)."""
    response: ASGIApp = transport._create_json_response(answer)
    return response


@contextlib.contextmanager
def busy(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """The session counts as busy meanwhile: its idle countdown stopped, then started again when no request is in
    flight, as for any request the SDK serves."""
    idle = transport.idle_scope if transport._idle_timeout is not None else None
    if idle is not None:
        transport._requests_in_flight += 1
        idle.deadline = math.inf
    try:
        yield
    finally:
        if idle is not None and transport._idle_timeout is not None:
            transport._requests_in_flight -= 1
            if not transport._requests_in_flight:
                idle.deadline = anyio.current_time() + transport._idle_timeout


# -- requests and servers ----------------------------------------------------------------------------------------


def connection_of(session: object) -> Connection | None:
    """The client connection a request came on. Lowlevel handlers get a `ServerRequestContext`, whose per-request
    session holds the connection (the SDK's `Context.connection` is not handed to them), and only it knows when the
    connection ends."""
    connection = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def lowlevel(server: MCPServer) -> Server[Any]:
    """The low-level `Server` an `MCPServer` runs its tools on (what a session's runner is made with)."""
    inner: Server[Any] = server._lowlevel_server
    return inner
