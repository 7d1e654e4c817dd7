"""One tray app per data dir: the first launch holds `tray.lock` and listens on a loopback port for the next
launches, which ask it to show its dashboard and exit.

A data dir this account may read but not write (a read-only disk, a folder another account made) has no room for
`tray.lock`: the tray then serves it read-only, with the lock and `tray.json` in a folder of this user's own,
named after the data dir (`fallback_home`), which a later launch checks too, so there is still one tray per data dir.

The port and a random key are in `tray.json` (mode 0600); each connection proves the key both ways (an HMAC over two
fresh challenges and the message), so another local user cannot drive the tray. Anyone may connect, though: each
connection is handled on a thread of its own with a deadline, at most a few at once, and no error ends the listening;
the client gives up after a deadline too, so a stranger on the port can neither silence the tray nor hang a launch.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from filelock import FileLock, Timeout

from hivenote.server.core.errors import HivenoteError
from hivenote.server.storage import statefile
from hivenote.server.storage.files import private_dir
from hivenote.server.storage.identity import make_data_dir

from .problems import cannot_write

log = logging.getLogger(__name__)

ANSWER_WAIT_S = 10.0  # the client's deadline for the whole exchange (connect, challenge, answer)
HANDSHAKE_S = 5.0  # the listener's deadline for a connection to prove the key and say its message
MAX_CONNECTIONS = 8  # handled at once; past that a newcomer is closed at once (the owner's launch tries again)
ACCEPT_RETRY_S = 0.5  # after accept() itself failed (out of file descriptors): try again, never stop listening
NONCE = 32
MAX_MESSAGE = 256
LOCK = "tray.lock"
RECORD = "tray.json"


class InstanceUnreachable(HivenoteError):
    code = "instance"


def fallback_home(
    data_dir: Path, environ: Mapping[str, str] = os.environ, platform: str = sys.platform, home: Path | None = None
) -> Path:
    """Where the tray of a data dir it cannot write keeps its lock and tray.json: in this user's runtime folder
    ($XDG_RUNTIME_DIR, this login's and this user's only), else in this user's cache folder; one folder per data dir
    (a digest of its absolute path)."""
    home = home or Path.home()
    if platform == "win32":
        base = Path(environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
    elif platform == "darwin":
        base = home / "Library" / "Caches"
    else:
        base = Path(environ.get("XDG_RUNTIME_DIR") or environ.get("XDG_CACHE_HOME") or home / ".cache")
    digest = hashlib.sha256(str(data_dir.expanduser().absolute()).encode()).hexdigest()[:16]
    return base / "hivenote" / "trays" / digest


class Instance:
    def __init__(self, data_dir: Path, *, fallback: Path | None = None) -> None:
        self.data_dir = data_dir
        self.fallback = fallback or fallback_home(data_dir)
        self.lock = FileLock(data_dir / LOCK, timeout=0)
        self.record = data_dir / RECORD
        self.read_only = False  # the data dir had no room for the lock: it lives in `fallback`
        self._listener: socket.socket | None = None
        self._key, self._port = b"", 0
        self._thread: threading.Thread | None = None
        self._worker: threading.Thread | None = None
        self._closing = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._messages: queue.Queue[str | None] = queue.Queue()

    def acquire(self, on_message: Callable[[str], None]) -> bool:
        """Become the running instance (True), or find that another one is (False). Messages from later
        launches are passed to `on_message` on a background thread. Raises the OSError of a data dir that cannot
        be made, or read."""
        make_data_dir(self.data_dir)
        try:
            self.lock.acquire()
        except Timeout:
            return False
        except OSError as exc:
            if not cannot_write(exc):
                raise
            os.listdir(self.data_dir)  # nothing to serve read-only either: raises the reason
            self._use_fallback()
            try:
                self.lock.acquire()
            except Timeout:
                return False
            self.read_only = True
        else:
            if self._fallback_held():  # a read-only tray started while the data dir was not writable runs
                self.lock.release()
                self._use_fallback()
                return False
        key = self._key = secrets.token_bytes(32)
        self._listener = socket.create_server(("127.0.0.1", 0))
        port = self._port = self._listener.getsockname()[1]
        statefile.write_json(self.record, {"pid": os.getpid(), "port": port, "key": key.hex()})  # 0600: the key
        self._closing.clear()
        self._thread = threading.Thread(target=self._serve, name="hivenote-instance", daemon=True)
        self._thread.start()
        self._worker = threading.Thread(
            target=self._deliver, args=(on_message,), name="hivenote-instance-messages", daemon=True
        )
        self._worker.start()
        return True

    def _use_fallback(self) -> None:
        self.fallback.parent.mkdir(parents=True, exist_ok=True)
        private_dir(self.fallback)  # 0700: tray.json holds the key
        self.lock = FileLock(self.fallback / LOCK, timeout=0)
        self.record = self.fallback / RECORD

    def _fallback_held(self) -> bool:
        path = self.fallback / LOCK
        if not path.exists():
            return False
        probe = FileLock(path, timeout=0)
        try:
            probe.acquire()
        except Timeout:
            return True
        except OSError:
            return False
        probe.release()
        return False

    def _serve(self) -> None:
        """Accept until release(): each connection on a thread of its own, so one that says nothing (or says
        anything at all) holds up no one else, and no error of a stranger's ends the listening."""
        listener = self._listener
        assert listener is not None
        while not self._closing.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # out of file descriptors, a connection reset before it was taken: not the end
                self._closing.wait(ACCEPT_RETRY_S)
                continue
            if self._closing.is_set() or not self._slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._handle, args=(conn,), name="hivenote-instance-conn", daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                message = _answer(conn, self._key)
                if message is not None:
                    self._messages.put(message)
        except OSError:  # reset, timed out, closed: that connection only
            pass
        finally:
            self._slots.release()

    def _deliver(self, on_message: Callable[[str], None]) -> None:
        """Messages one at a time, in the order they came, apart from the connections (showing the dashboard may
        first start the server, which takes a while)."""
        while (message := self._messages.get()) is not None:
            try:
                on_message(message)
            except Exception:  # one message's failure must not leave the next launch unheard
                log.exception("the tray could not act on %r from another launch", message)

    def send(self, message: str) -> None:
        """Ask the running instance to do something ("show"); raises InstanceUnreachable if it cannot be asked."""
        try:
            record = json.loads(self.record.read_text(encoding="utf-8"))
            _ask(int(record["port"]), bytes.fromhex(record["key"]), message)
        except (OSError, ValueError, KeyError) as exc:
            raise InstanceUnreachable(
                f"another Hivenote holds {self.lock.lock_file} but cannot be reached ({exc}). "
                "If it hangs, end it (its pid is in tray.json) and start Hivenote again."
            ) from None

    def release(self) -> None:
        if self._listener is None:
            return
        self._closing.set()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self._port), timeout=1):
            pass  # wakes the accept() in _serve, which then sees the flag
        if self._thread is not None:
            self._thread.join(5)
        self._messages.put(None)
        self._listener.close()
        self._listener = None
        self.record.unlink(missing_ok=True)
        self.lock.release()


# -- the exchange: challenge, proof and message; proof and "ok" ---------------------------------------------------
# listener -> client: its challenge (NONCE bytes)
# client -> listener: its challenge, HMAC(key, "client" + both challenges + message), length (2 bytes), message
# listener -> client: HMAC(key, "listener" + both challenges), then b"ok" once the message is taken


def _proof(key: bytes, who: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"hivenote-tray\n" + who + b"".join(parts), hashlib.sha256).digest()


def _read(conn: socket.socket, size: int, deadline: float) -> bytes:
    """Exactly `size` bytes, all of them by `deadline` (time.monotonic): a peer sending a byte at a time gets no
    longer than one that sends nothing (TimeoutError)."""
    data = b""
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        conn.settimeout(left)
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the other end closed the connection")
        data += chunk
    return data


def _answer(conn: socket.socket, key: bytes) -> str | None:
    """The listener's side of one connection: the message, or None when the caller did not prove the key."""
    deadline = time.monotonic() + HANDSHAKE_S
    ours = secrets.token_bytes(NONCE)
    conn.sendall(ours)
    theirs, proof = _read(conn, NONCE, deadline), _read(conn, 32, deadline)
    size = int.from_bytes(_read(conn, 2, deadline), "big")
    if size > MAX_MESSAGE:
        return None
    message = _read(conn, size, deadline)
    if not hmac.compare_digest(proof, _proof(key, b"client", ours, theirs, message)):
        return None
    conn.sendall(_proof(key, b"listener", ours, theirs) + b"ok")
    return message.decode("utf-8", errors="replace")


def _ask(port: int, key: bytes, message: str) -> None:
    """The client's side: raises OSError (a timeout, a refusal) or InstanceUnreachable; never waits past the
    deadline, whatever holds the port."""
    data = message.encode()
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"message over {MAX_MESSAGE} bytes")
    deadline = time.monotonic() + ANSWER_WAIT_S
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WAIT_S) as conn:
        theirs, ours = _read(conn, NONCE, deadline), secrets.token_bytes(NONCE)
        proof = _proof(key, b"client", theirs, ours, data)
        conn.sendall(ours + proof + len(data).to_bytes(2, "big") + data)
        try:
            answer = _read(conn, 32 + 2, deadline)
        except ConnectionError:
            raise InstanceUnreachable("the program on the tray's port refused the key") from None
        if not hmac.compare_digest(answer[:32], _proof(key, b"listener", theirs, ours)) or answer[32:] != b"ok":
            raise InstanceUnreachable("the program on the tray's port is not this Hivenote")
