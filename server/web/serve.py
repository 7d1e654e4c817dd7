"""Running the app with uvicorn, embeddable: the socket is bound before the server starts (so "port in use" is
an error the caller sees, not a silent thread exit), `started` says when it answers, `stop()` ends it.

Every uvicorn server Hivenote runs (`hivenote serve`, the tray's, the tests') is configured here, once:
- no proxy header changes who the peer is: Hivenote is never behind a proxy it knows, and the dashboard's session
  decides on the socket's own address and owner;
- a connection flood cannot take the server down: connections are bounded (the oldest one waiting for a request
  makes room for a new one), a request head must arrive within `HEAD_TIMEOUT_S` and its body within
  `BODY_TIMEOUT_S`, an idle kept-alive connection closes after `KEEP_ALIVE_S`, and the soft limit on open files is
  raised to the hard one;
- one credential cannot hold the server: each connection is charged to the credential its request showed, within
  that credential's budgets (budgets.py: connections, streams and bodies at once; a share of the bound each);
- a request still being answered when a stop's graceful wait ends is cancelled with one warning line in the log, not
  uvicorn's traceback of an application error (`_CancelledAtStop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import os
import socket
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..core.errors import HivenoteError
from ..responses import error_body
from ..settings import Settings
from . import budgets
from .budgets import Budget, Refusal

log = logging.getLogger(__name__)

HEAD_TIMEOUT_S = 10.0  # from connecting (or the end of the last answer's keep-alive) to a whole request head
BODY_TIMEOUT_S = 30.0  # from a request head to the end of its body (1 MiB at 35 KB/s)
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this long
MAX_CONNECTIONS = 1000  # at most this many open connections (fewer when the open-file limit is lower)
FD_RESERVE = 256  # open files kept for everything else (shards, logs, modules loaded late, the tray's window, sync)
# Connections the kernel queues before they are accepted; asyncio also accepts up to this many in one go before any
# of them can be closed, so the bound on connections leaves room for two such batches.
BACKLOG = 128
OPEN_FILES_WANTED = 65536


class PortInUse(HivenoteError):
    code = "port_in_use"

    def __init__(self, host: str, port: int) -> None:
        super().__init__(
            f"port {port} on {host} is already in use (another Hivenote, or another program). Stop it, or pass "
            "--port with a free port (connect snippets must then use that port too)."
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off only for sockets it knows are TCP, and with Nagle on every
    # response written as headers-then-body waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortInUse(host, port) from None
        raise HivenoteError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def raise_open_file_limit() -> int:
    """Raise this process's soft limit on open files to the hard limit (at most OPEN_FILES_WANTED); returns the soft
    limit now in force (OPEN_FILES_WANTED where the system has no such limit)."""
    if sys.platform == "win32":
        return OPEN_FILES_WANTED
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES_WANTED if hard == resource.RLIM_INFINITY else min(hard, OPEN_FILES_WANTED)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (OSError, ValueError) as exc:  # a sandbox may refuse; the bound on connections still holds
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, wanted, exc)
    return OPEN_FILES_WANTED if soft == resource.RLIM_INFINITY else int(soft)


def connection_bound(open_files: int) -> int:
    """How many connections may be open at once under a limit of `open_files`."""
    return max(32, min(MAX_CONNECTIONS, open_files - FD_RESERVE - 2 * BACKLOG))


def connection_slack(open_files: int) -> int:
    """How many more may be open for a moment, while their request heads arrive and say who they are for: as many
    as the bound where open files allow (a burst of a thousand connections from one token is then charged and
    refused, not met by closing whoever comes next, the owner included), at least `budgets.SLACK`."""
    bound = connection_bound(open_files)
    return max(budgets.SLACK, min(bound, open_files - FD_RESERVE - 2 * BACKLOG - bound))


_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d"
    b"\r\n\r\n%s"
)
_ENDED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s"
)


_WAITING = ("head", "idle", "drain")  # holding nothing but a socket: anybody's to reclaim
_BUSY = ("body", "app")  # in a request, charged to its credential
_UNKNOWN = object()  # no request head yet: no credential shown


class Ledger:
    """What the connections of one server hold, per credential, kept up to date as each one changes (so a request
    costs the same whatever the number of connections): connections in a request, streams and bodies arriving among
    them, and those waiting for a request, oldest first (the ones that showed no credential apart)."""

    def __init__(self) -> None:
        self.busy: Counter[object] = Counter()
        self.streams: Counter[object] = Counter()
        self.bodies: Counter[object] = Counter()
        self.body_bytes: Counter[object] = Counter()
        self.waiting_anonymous: dict[BoundedH11Protocol, None] = {}  # insertion order: oldest first
        self.waiting_known: dict[BoundedH11Protocol, None] = {}
        self.turns: dict[object, asyncio.Semaphore] = {}  # per credential: requests answered at once

    def account(self, c: BoundedH11Protocol, sign: int) -> None:
        """Add (1) or take out (-1) what connection `c` holds in its present state."""
        if c._phase in _WAITING:
            waiting = self.waiting_anonymous if c.credential in (_UNKNOWN, None) else self.waiting_known
            if sign > 0:
                waiting[c] = None
            else:
                waiting.pop(c, None)
        elif c._phase in _BUSY and c.credential is not _UNKNOWN:
            who = c.credential
            _add(self.busy, who, sign)
            if c.streaming:
                _add(self.streams, who, sign)
            if c._phase == "body":
                _add(self.bodies, who, sign)
                _add(self.body_bytes, who, sign * c.body_size)

    def oldest_waiting(self, besides: BoundedH11Protocol) -> BoundedH11Protocol | None:
        """The connection that has waited longest for a request (those that showed no credential first), other than
        `besides`; connections already being closed are dropped from the front as they are met."""
        for waiting in (self.waiting_anonymous, self.waiting_known):
            found, closing = None, []
            for c in waiting:
                if c.transport.is_closing():
                    closing.append(c)  # connection_lost takes the rest of it out
                elif c is not besides:
                    found = c
                    break
            for c in closing:
                del waiting[c]
            if found is not None:
                return found
        return None


def _add(counter: Counter[object], key: object, amount: int) -> None:
    counter[key] += amount
    if not counter[key]:
        del counter[key]


class BoundedH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with deadlines for a request's head and body (uvicorn times out only an idle
    kept-alive connection, after a first answer), a bound on open connections that closes the oldest one waiting for
    a request, so a flood of idle connections cannot keep real clients out, and each request charged to the
    credential it showed (`charge`, called by the guard), so one credential cannot hold them all (budgets.py)."""

    max_connections = MAX_CONNECTIONS
    slack = budgets.SLACK
    ledger = Ledger()  # one per server: uvicorn_config makes a subclass with its own

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        cork_turns(transport, self.loop)
        self._deadline: asyncio.TimerHandle | None = None
        self._cycle_seen: Any = None
        # head: waiting for a request head; body: for its body; app: answering; idle: done, kept alive; drain:
        # answered before its body arrived (a 401, a 413), the rest of the body still coming; gone: closed
        self._phase = "head"
        self._since = self.loop.time()
        self._received = False
        self.credential: object = _UNKNOWN  # who the last request said it was (budgets.py): a person, "" or None
        self.streaming = False  # the request under way is an event stream
        self.body_size = 0  # the body under way's declared size (or its route's limit)
        self.ledger.account(self, 1)
        self._arm(HEAD_TIMEOUT_S)
        if len(self.connections) > self.max_connections:
            self._make_room()

    def _change(self, **state: Any) -> None:
        """Set attributes of this connection's state (phase, credential, streaming, body_size), kept in the ledger."""
        if self._phase == "gone":
            return
        self.ledger.account(self, -1)
        for name, value in state.items():
            setattr(self, name, value)
        self.ledger.account(self, 1)

    def _reclaim_waiting(self) -> bool:
        """Close the connection that has waited longest for a request, those that showed no credential first."""
        victim = self.ledger.oldest_waiting(besides=self)
        if victim is None:
            return False
        log.debug("too many open connections (%d): closing one waiting for a request", len(self.connections))
        victim.transport.close()
        return True

    def _make_room(self) -> None:
        """A new connection past the bound (who it is for is not known yet): it takes the place of one waiting for a
        request, or waits in the slack for its head; past the slack too, it is closed."""
        if not self._reclaim_waiting() and len(self.connections) > self.max_connections + self.slack:
            log.debug("too many open connections (%d): closing the new one", len(self.connections))
            self.transport.close()

    def charge(self, person: str | None, budget: Budget, *, stream: bool, size: int) -> Refusal | None:
        """This connection's request showed `person` (budgets.Charged): refused when that credential already holds
        its share of connections, streams or bodies; past the server's bound, it takes a connection from whoever
        holds the most, or is refused when nobody holds more than it does."""
        self._change(credential=person, streaming=stream, body_size=size if self._phase == "body" else 0)
        refusal = self._charge(person, budget, stream=stream, size=size)
        if refusal is None:
            return None
        self._change(streaming=False)  # refused: it holds no stream
        return dataclasses.replace(refusal, close=self._phase != "body")

    @contextlib.asynccontextmanager
    async def turn(self, person: str | None, budget: Budget) -> AsyncIterator[None]:
        """budgets.Charged.turn: the requests a credential has answered at once are bounded, so its requests cannot
        fill the worker threads and the store's lock ahead of everyone else's (a search, an export each take them
        a while); the rest wait here, first come, first served."""
        turns = self.ledger.turns
        gate = turns.get(person)
        if gate is None:
            gate = turns[person] = asyncio.Semaphore(budget.answering)
        async with gate:
            yield

    def _charge(self, person: str | None, budget: Budget, *, stream: bool, size: int) -> Refusal | None:
        led, bound = self.ledger, self.max_connections
        connections, streams = budget.shares(bound)
        mine = led.busy[person] - 1  # besides this one
        if mine >= connections:
            return budgets.too_many_connections(budget, mine, bound)
        if stream and (held := led.streams[person] - 1) >= streams:
            return budgets.too_many_streams(budget, held)
        if self._phase == "body":
            bodies = led.bodies[person] - 1
            if bodies >= budget.bodies or (bodies and led.body_bytes[person] > budget.body_bytes):
                return budgets.too_many_bodies(budget, bodies, led.body_bytes[person])
        over = len(self.connections) > bound and not self._reclaim_waiting()
        if over and (person is None or not self._reclaim_from_the_largest(person)):
            return budgets.server_busy(bound)
        return None

    def _reclaim_from_the_largest(self, person: str) -> bool:
        """Past the bound with no connection waiting: end the oldest body still arriving, else the oldest stream, of
        the credential holding the most connections, when it holds more than `person` does."""
        largest = max(self.ledger.busy.items(), key=lambda item: item[1], default=None)
        if largest is None or largest[1] <= self.ledger.busy[person]:
            return False
        theirs = [
            c
            for c in self.connections
            if isinstance(c, BoundedH11Protocol) and c.credential == largest[0] and not c.transport.is_closing()
        ]
        for candidates in ([c for c in theirs if c._phase == "body"], [c for c in theirs if c.streaming]):
            if candidates:
                victim = min(candidates, key=lambda c: c._since)
                log.info("all connections in use: ending one of the caller holding the most (%d)", largest[1])
                if victim._phase == "body" and not victim.cycle.response_started:
                    refusal = budgets.ended_for_room(self.max_connections, largest[1])
                    body = error_body(refusal.code, refusal.message)
                    victim.transport.write(_ENDED % (len(body), body))
                victim.transport.close()
                return True
        return False

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expire, seconds)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self, seconds: float) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "head" and self._received:  # part of a head: say why before closing
            said = f"The request was not sent whole within {int(seconds)} s; the connection is closed. Send the whole "
            body = error_body("timeout", said + "request at once.")
            self.transport.write(_TIMED_OUT % (len(body), body))
        self.transport.close()

    def _follow(self) -> None:
        cycle = self.cycle
        if cycle is not None and cycle is not self._cycle_seen:  # a new request head arrived
            self._cycle_seen = cycle
            self._change(_phase="body", _since=self.loop.time(), credential=_UNKNOWN, streaming=False, body_size=0)
            extensions: dict[str, Any] = dict(cycle.scope.get("extensions") or {})
            extensions[budgets.CONNECTION] = self
            cycle.scope["extensions"] = extensions
            self._arm(BODY_TIMEOUT_S)
        if self._phase == "body" and cycle is not None and (not cycle.more_body or cycle.response_complete):
            self._change(_phase="app")
            self._disarm()

    def data_received(self, data: bytes) -> None:
        self._received = True
        super().data_received(data)
        if self._phase == "idle" and self.cycle is self._cycle_seen:  # part of the next head
            self._change(_phase="head", _since=self.loop.time())
            self._arm(HEAD_TIMEOUT_S)
        self._follow()

    def on_response_complete(self) -> None:
        if self.conn.their_state is not h11.DONE and self._phase == "body":
            # answered before the body arrived (a 401, a 413): the body deadline still runs
            self._change(_phase="drain", streaming=False)
        else:
            self._change(_phase="idle", _since=self.loop.time(), streaming=False)
            self._disarm()  # uvicorn's keep-alive timer runs now
        super().on_response_complete()
        self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._change(_phase="gone")
        super().connection_lost(exc)


class _Corked:
    """What a connection writes in one turn of the event loop, sent by the kernel as one: uvicorn writes an
    answer's head when the answer starts and its body right after, two TCP segments, and a client reading the head
    wakes a second time for the body (472 of 500 small MCP answers arrived split on a loaded box). The socket is
    corked at a turn's first write and uncorked at the next turn, so a head is never held back longer (a stream's
    head goes out alone, at once)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = transport.get_extra_info("socket")
        self.loop = loop
        self.write = transport.write
        self.corked = False

    def __call__(self, data: bytes | bytearray | memoryview) -> None:
        if not self.corked and self._set(1):
            self.corked = True
            self.loop.call_soon(self._uncork)
        self.write(data)

    def _uncork(self) -> None:
        self.corked = False
        self._set(0)

    def _set(self, on: int) -> bool:
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, on)
        except OSError:  # closed under us: nothing is held back any more
            return False
        return True


_TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)  # Linux; elsewhere answers go as uvicorn writes them


def cork_turns(transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
    """Have `transport` (a TCP connection's) send each event loop turn's writes together (`_Corked`)."""
    sock = transport.get_extra_info("socket")
    if _TCP_CORK is not None and sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        transport.write = _Corked(transport, loop)  # type: ignore[method-assign]


class _CancelledAtStop(logging.Filter):
    """uvicorn logs a request its graceful shutdown had to cancel (still running `timeout_graceful_shutdown` seconds
    after the server was asked to stop: a peer's listing on a loaded machine, a body still arriving) as "Exception in
    ASGI application" with the cancellation's traceback, as if the app had failed. It is the stop doing what it says:
    one warning line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, asyncio.CancelledError) and str(record.msg).startswith("Exception in ASGI application"):
            record.msg, record.args, record.exc_info, record.exc_text = _CANCELLED_AT_STOP, (), None, None
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


_CANCELLED_AT_STOP = "a request still being answered when the server stopped was cancelled (its client gets a 500)"
_cancelled_at_stop = _CancelledAtStop()


def uvicorn_config(app: Any, *, open_files: int | None = None) -> uvicorn.Config:
    """The one uvicorn configuration: no proxy headers, bounded connections, timeouts (see the module's doc)."""
    files = open_files if open_files is not None else OPEN_FILES_WANTED
    bound, slack = connection_bound(files), connection_slack(files)
    protocol = type("BoundedH11", (BoundedH11Protocol,), {"max_connections": bound, "slack": slack, "ledger": Ledger()})
    uvicorn_log = logging.getLogger("uvicorn.error")
    if _cancelled_at_stop not in uvicorn_log.filters:
        uvicorn_log.addFilter(_cancelled_at_stop)
    return uvicorn.Config(
        app,
        http=protocol,
        # No WebSocket: Hivenote serves none, and an upgraded connection would leave this protocol's deadlines and
        # budgets (uvicorn would otherwise upgrade whenever a WebSocket library happens to be installed).
        ws="none",
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=3,
        proxy_headers=False,  # no X-Forwarded-For / -Proto changes who the peer is
        forwarded_allow_ips="",
        # requests at once (each open connection can hold one, plus the slack and some being closed)
        limit_concurrency=bound + slack + 64,
        backlog=BACKLOG,
        timeout_keep_alive=KEEP_ALIVE_S,
    )


def _report_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's error handler, which must never raise: out of file descriptors, accept() fails, and so may
    the log handler that reports it (it imports a module to format the traceback). asyncio lets an error raised
    here end the loop, and with it the server; this one writes a line to stderr instead (no new file needed)."""
    try:
        loop.default_exception_handler(context)
    except Exception:
        with contextlib.suppress(Exception):
            line = f"hivenote: {context.get('message', 'event loop error')}: {context.get('exception')!r}\n"
            os.write(2, line.encode())


class ServerThread:
    """A uvicorn server for `app` on an already bound socket, in a thread it can stop and join."""

    def __init__(self, app: Any, settings: Settings, sock: socket.socket) -> None:
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(app, open_files=raise_open_file_limit()))
        self.thread = threading.Thread(target=self._run, name="hivenote-server", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced to whoever waits on the thread
            self.error = exc

    async def _serve(self) -> None:
        asyncio.get_running_loop().set_exception_handler(_report_loop_error)
        await self.server.serve(sockets=[self.sock])

    def start(self) -> None:
        self.thread.start()

    @property
    def started(self) -> bool:
        return bool(self.server.started)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


class ServerDied(HivenoteError):
    code = "server_died"


def run_until_stopped(server: ServerThread, stop: threading.Event) -> None:
    """Wait until `stop` is set (SIGTERM) or the server ends. A server that ends without being asked to has failed,
    whatever uvicorn returned: ServerDied says why (with the traceback in the log), so `hivenote serve` exits
    non-zero and a service manager restarts it."""
    while server.thread.is_alive() and not stop.wait(0.25):
        pass
    if stop.is_set():
        return
    cause = server.error
    if cause is not None:
        log.error("the Hivenote server failed", exc_info=cause)
    reason = f"{type(cause).__name__}: {cause}" if cause is not None else "its event loop ended without being asked to"
    raise ServerDied(
        f"the server stopped by itself ({reason}). Nothing acknowledged is lost; start it again (a systemd unit "
        "restarts it), and report this with the log if it happens again."
    )
