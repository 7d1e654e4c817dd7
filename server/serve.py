"""Running the app with uvicorn, embeddable: the socket is bound before the server starts (so "port in use" is
an error the caller sees, not a silent thread exit), `started` says when it answers, `stop()` ends it."""

from __future__ import annotations

import errno
import socket
import threading
from typing import Any

import uvicorn

from .errors import HivenoteError
from .settings import Settings


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


class ServerThread:
    """A uvicorn server for `app` on an already bound socket, in a thread it can stop and join."""

    def __init__(self, app: Any, settings: Settings, sock: socket.socket) -> None:
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=3)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._run, name="hivenote-server", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except BaseException as exc:  # surfaced to whoever waits on the thread
            self.error = exc

    def start(self) -> None:
        self.thread.start()

    @property
    def started(self) -> bool:
        return bool(self.server.started)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
