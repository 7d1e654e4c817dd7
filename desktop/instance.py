"""One tray app per data dir: the first launch holds `tray.lock` and listens on a loopback port for the next
launches, which ask it to show its dashboard and exit.

A data dir this account may read but not write (a read-only disk, a folder another account made) has no room for
`tray.lock`: the tray then serves it read-only, with the lock and `tray.json` in a folder of this user's own,
named after the data dir (`fallback_home`), which a later launch checks too, so there is still one tray per data dir.

The port and a random key are in `tray.json` (mode 0600); the connection is authenticated with that key
(multiprocessing.connection's HMAC challenge), so another local user cannot drive the tray.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sys
import threading
from collections.abc import Callable, Mapping
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener
from pathlib import Path

from filelock import FileLock, Timeout

from hivenote.server.core.errors import HivenoteError
from hivenote.server.storage import statefile
from hivenote.server.storage.files import private_dir
from hivenote.server.storage.identity import make_data_dir

from .problems import cannot_write

ANSWER_WAIT_S = 10.0
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
        self._listener: Listener | None = None
        self._key, self._port = b"", 0
        self._thread: threading.Thread | None = None

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
        self._listener = Listener(("127.0.0.1", 0), authkey=key)
        port = self._port = self._listener.address[1]
        statefile.write_json(self.record, {"pid": os.getpid(), "port": port, "key": key.hex()})  # 0600: the key
        self._thread = threading.Thread(target=self._serve, args=(on_message,), name="hivenote-instance", daemon=True)
        self._thread.start()
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

    def _serve(self, on_message: Callable[[str], None]) -> None:
        listener = self._listener
        assert listener is not None
        while True:
            try:
                conn = listener.accept()
            except (AuthenticationError, EOFError, ConnectionError):
                continue  # a stranger or a dropped connection: keep listening
            except OSError:
                return  # closed by release()
            with conn:
                try:
                    message = conn.recv()
                    if message != "release":
                        on_message(str(message))
                    conn.send("ok")
                    if message == "release":
                        return
                except (EOFError, OSError):
                    continue

    def send(self, message: str) -> None:
        """Ask the running instance to do something ("show"); raises InstanceUnreachable if it cannot be asked."""
        try:
            record = json.loads(self.record.read_text(encoding="utf-8"))
            _ask(int(record["port"]), bytes.fromhex(record["key"]), message)
        except (OSError, ValueError, KeyError, EOFError, AuthenticationError) as exc:
            raise InstanceUnreachable(
                f"another Hivenote holds {self.lock.lock_file} but cannot be reached ({exc}). "
                "If it hangs, end it (its pid is in tray.json) and start Hivenote again."
            ) from None

    def release(self) -> None:
        if self._listener is None:
            return
        with contextlib.suppress(OSError, EOFError, AuthenticationError, InstanceUnreachable):
            _ask(self._port, self._key, "release")  # wakes the accept() in _serve
        if self._thread is not None:
            self._thread.join(5)
        self._listener.close()
        self._listener = None
        self.record.unlink(missing_ok=True)
        self.lock.release()


def _ask(port: int, key: bytes, message: str) -> None:
    with Client(("127.0.0.1", port), authkey=key) as conn:
        conn.send(message)
        if not conn.poll(ANSWER_WAIT_S):
            raise InstanceUnreachable("the running Hivenote did not answer; it may be busy, try again")
        conn.recv()
