"""The stdio process's side of handing a session to the server (handoff.py has the server's side and says why):
where the server of a data dir listens, who is at the other end of the socket, and `hand_over`, which passes this
process's stdin and stdout to the server and waits until the session ends or comes back. Standard library only:
`hivenote stdio` imports no server code to try it.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import json
import os
import socket
import stat
import struct
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

if sys.platform != "win32":
    import fcntl

VERSION: Final = 1  # of the messages on the socket
# A socket's path must fit its address: 104 bytes on macOS, 108 on Linux, the closing NUL included.
MAX_SOCKET_PATH: Final = 103
READ_SIZE: Final = 1 << 16
ADMIT_TIMEOUT_S: Final = 5.0  # from connecting to the request with its descriptors


def available() -> bool:
    """Whether this system can pass descriptors over a Unix domain socket (not on Windows)."""
    return sys.platform != "win32" and hasattr(socket, "AF_UNIX") and hasattr(socket, "send_fds")


# -- where: a path only this user can reach -------------------------------------------------------------------------


def socket_path(data_dir: Path) -> Path | None:
    """Where the server of `data_dir` listens: in a directory of this user's alone (`private_dir`), named after the
    data dir; None when there is none or the path does not fit a socket address (the bridge is used then). Not in
    the data dir: a live socket there is a file that copies, backups and sync tools of the data dir trip over. The
    server says where in server.json; the client reads it there."""
    private = private_dir()
    if private is None:
        return None
    digest = hashlib.sha256(os.fsencode(Path(os.path.abspath(data_dir)).resolve())).hexdigest()[:16]
    path = private / f"hivenote-{digest}.sock"
    return path if _fits(path) else None


def _fits(path: Path) -> bool:
    return len(os.fsencode(path)) <= MAX_SOCKET_PATH


def private_dir() -> Path | None:
    """A directory only this user can enter: $XDG_RUNTIME_DIR (systemd makes it 0700, per user) when it is one, else
    `<temp dir>/hivenote-<uid>`, made 0700 (macOS' temp dir is already per user). One that exists is used only if it
    is a real directory (not a link) of this user that no one else may enter, so no one can put a socket there."""
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _private(Path(runtime), uid):
        return Path(runtime)
    own = Path(tempfile.gettempdir()) / f"hivenote-{uid}"
    with contextlib.suppress(FileExistsError, OSError):
        own.mkdir(mode=0o700)
    return own if _private(own, uid) else None


def _private(path: Path, uid: int) -> bool:
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == uid and not found.st_mode & 0o077


# -- who: the peer's uid, from the kernel -------------------------------------------------------------------------

_XUCRED: Final = struct.Struct("=II")  # macOS/BSD `struct xucred`: cr_version, cr_uid (then groups)
_XUCRED_SIZE: Final = 76
_SOL_LOCAL: Final = 0
_LOCAL_PEERCRED: Final = getattr(socket, "LOCAL_PEERCRED", 0x001)
_UCRED: Final = struct.Struct("=iII")  # Linux `struct ucred`: pid, uid, gid


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a connected Unix domain socket, as the kernel recorded it when
    that process connected (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS and the BSDs); None where neither
    exists or the kernel does not say."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            _, uid, _ = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
            return int(uid)
        if sys.platform == "darwin" or "bsd" in sys.platform:
            raw = sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERCRED, _XUCRED_SIZE)
            _, uid = _XUCRED.unpack_from(raw)
            return int(uid)
    except (OSError, struct.error):
        return None
    return None


def same_user(sock: socket.socket) -> bool:
    return peer_uid(sock) == os.getuid()


# -- the messages on the socket, one JSON object a line ---------------------------------------------------------


def json_line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def pipe_problem(fd: int, *, writing: bool) -> str | None:
    """Why `fd` cannot carry a session (None when it can): a pipe or a socket, open the right way."""
    try:
        mode = os.fstat(fd).st_mode
        access = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError as exc:
        return f"descriptor {fd}: {exc.strerror}"
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):  # a file or a terminal: the bridge reads those
        return "stdin and stdout must be pipes or sockets"
    if access != os.O_RDWR and access != (os.O_WRONLY if writing else os.O_RDONLY):
        return f"{'stdout' if writing else 'stdin'} is not open for {'writing' if writing else 'reading'}"
    return None


# -- the stdio process's side ---------------------------------------------------------------------------------------


@dataclass
class HandOver:
    """How a handed-over session ended, for the stdio process. `ended`: the client closed stdin and every answer was
    written; the stdio process exits. Else the bridge takes over (`stdio.Bridge.resume`): it writes `unwritten` to
    stdout first, reads `pending` before stdin, and opens the session again on the next server with `initialize`.

    `crashed`: the server ended without handing back (kill -9, a crash). Then nothing is known of what it had read
    and not answered: those requests get no answer (the client's own timeout applies), a line it had read part of
    arrives at the bridge cut (the client gets a parse error for it), and an answer it was writing when it died may
    be left cut on stdout. Later lines are served by the bridge as usual."""

    ended: bool = False
    crashed: bool = False
    initialize: bytes | None = None
    protocol: str | None = None
    subscriptions: list[bytes] = field(default_factory=list)
    pending: bytes = b""
    unwritten: bytes = b""


def hand_over(path: str | None, endpoint: str, stdin: int = 0, stdout: int = 1) -> HandOver | None:
    """Hand this process's stdin and stdout to the server listening at `path` and wait until the session ends or
    comes back; None, with nothing read from stdin, when the server does not take it (the bridge serves then)."""
    if path is None or not available():
        return None
    for fd, writing in ((stdin, False), (stdout, True)):
        if pipe_problem(fd, writing=writing) is not None:
            return None
    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with control:
        control.settimeout(ADMIT_TIMEOUT_S)
        try:
            control.connect(path)
        except OSError:  # no server there (it stopped, or died and left its socket)
            return None
        if not same_user(control):  # whatever listens there is not this user's: it gets no descriptors
            return None
        request = json_line({"hivenote": "handoff", "version": VERSION, "endpoint": endpoint})
        try:
            socket.send_fds(control, [request], [stdin, stdout])
        except OSError:
            return None
        # From here the server may hold the descriptors: it answers, or its end closes (it died) before it reads any.
        control.settimeout(None)
        lines = _messages(control)
        first = next(lines, None)
        if first is None or first.get("accepted") is not True:
            if first is not None:
                sys.stderr.write(f"hivenote: the server did not take the session ({first.get('refused')}); ")
                sys.stderr.write("using the HTTP bridge\n")
            return None
        outcome = HandOver(crashed=True)
        for message in lines:
            if isinstance(message.get("state"), dict):
                _take_state(outcome, message["state"])
            elif message.get("end") is not None:
                return HandOver(ended=True)
            elif isinstance(message.get("handback"), dict):
                back = message["handback"]
                _take_state(outcome, back)
                outcome.crashed = False
                outcome.pending = base64.b64decode(back.get("pending") or "")
                outcome.unwritten = base64.b64decode(back.get("unwritten") or "")
                return outcome
        return outcome


def _take_state(outcome: HandOver, state: dict[str, Any]) -> None:
    initialize = state.get("initialize")
    outcome.initialize = initialize.encode() if isinstance(initialize, str) else None
    protocol = state.get("protocol")
    outcome.protocol = protocol if isinstance(protocol, str) else None
    outcome.subscriptions = [s.encode() for s in state.get("subscriptions") or [] if isinstance(s, str)]


def _messages(control: socket.socket) -> Iterator[dict[str, Any]]:
    """The server's messages on the socket, one JSON object a line, until it closes."""
    buffer = b""
    while True:
        try:
            data = control.recv(READ_SIZE)
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                return
            raise
        if not data:
            return
        buffer += data
        *whole, buffer = buffer.split(b"\n")
        for raw in whole:
            with contextlib.suppress(ValueError):
                message = json.loads(raw)
                if isinstance(message, dict):
                    yield message
