"""This install's identity and its claim on its shard: `node.json` (node id + host fingerprint) and the OS
file lock that keeps exactly one writer per shard (OPLOG.md, "Node identity")."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import secrets
import socket
import uuid
from pathlib import Path
from typing import Any

import filelock

from .errors import ShardLocked

log = logging.getLogger(__name__)


def host_fingerprint() -> str:
    """A stable id of this machine, so a `node.json` copied to another machine is noticed."""
    parts = [socket.gethostname(), platform.system(), f"{uuid.getnode():x}"]
    for candidate in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            parts.append(Path(candidate).read_text(encoding="utf-8").strip())
            break
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def new_node_name() -> str:
    """`<hostname>-<4 random hex>`: readable in provenance, unique without coordination."""
    # ASCII only: node names travel in file names, URLs and object keys (a host named "café" becomes "caf-")
    name = socket.gethostname().split(".")[0].lower()
    host = "".join(c if (c.isascii() and c.isalnum()) or c == "-" else "-" for c in name)
    return f"{host.strip('-')[:32] or 'node'}-{secrets.token_hex(2)}"


def read_node(data_dir: Path) -> str:
    """The node id recorded in this data dir, or "" when nothing was ever written here."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return str(json.loads((data_dir / "node.json").read_text(encoding="utf-8"))["node"])
    return ""


def claim_node(data_dir: Path, fingerprint: str, now_ms: int) -> str:
    """This machine's node id for the data dir, minting (and recording) a new one on first use or when
    `node.json` was copied from another machine, so two machines never append to the same shard."""
    path = data_dir / "node.json"
    info: Any = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(path.read_text(encoding="utf-8"))
    node = info.get("node") if isinstance(info, dict) else None
    if isinstance(node, str) and node and info.get("host") == fingerprint:
        return node
    if isinstance(node, str) and node:
        log.warning("node.json was copied from another machine (%s); minting a new node id", node)
    node = new_node_name()
    make_data_dir(data_dir)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"node": node, "host": fingerprint, "created": now_ms}, indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())  # the machine's identity: an empty file after a crash would mint another
    os.replace(tmp, path)
    return node


def make_data_dir(data_dir: Path) -> None:
    """Create the data folder for this user's eyes only: it holds every note, the tokens and the peer book (other
    accounts on a shared machine must not read them). An existing folder keeps the mode it has."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)


class ShardClaim:
    """The OS lock on `log/<node>.lock`, with the holder's pid written in it for the next one to name."""

    def __init__(self, data_dir: Path, node: str, timeout: float = 0) -> None:
        self.data_dir = data_dir
        self.path = data_dir / "log" / f"{node}.lock"
        self.timeout = timeout  # how long to wait for a short-lived holder (another CLI command)
        self._lock: filelock.BaseFileLock | None = None
        self._held: tuple[int, int] | None = None  # (inode, device) of the lock file we hold

    def acquire(self) -> None:
        lock = filelock.FileLock(self.path)
        try:
            lock.acquire(timeout=self.timeout)
        except filelock.Timeout:
            pid: int | None = None
            with contextlib.suppress(OSError, ValueError):
                pid = int(self.path.read_text(encoding="utf-8").strip() or "0") or None
            raise ShardLocked(self.data_dir, pid) from None
        self._lock = lock
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
        self._held = _file_id(self.path)

    def stale(self) -> bool:
        """Whether the lock file we hold is no longer the one at its path (deleted or replaced)."""
        return self._lock is not None and _file_id(self.path) != self._held

    def renew(self) -> None:
        """Lock again if the lock file was deleted or replaced (the log folder removed under a running server), so
        no second process can claim this data dir meanwhile. Raises ShardLocked if one already did."""
        if not self.stale():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old, self._lock = self._lock, None
        assert old is not None  # stale() says a lock is held
        try:
            self.acquire()
        except ShardLocked:
            self._lock = old
            raise
        old.release()

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_dev


def lock_holder(data_dir: Path) -> int | None:
    """The pid of the process writing this data dir's shard, or None when no process holds it (0: unknown pid)."""
    node = read_node(Path(data_dir))
    lock_path = Path(data_dir) / "log" / f"{node}.lock"
    if not node or not lock_path.exists():
        return None
    probe = filelock.FileLock(lock_path)
    try:
        probe.acquire(timeout=0)
    except filelock.Timeout:
        with contextlib.suppress(OSError, ValueError):
            return int(lock_path.read_text(encoding="utf-8").strip() or "0")
        return 0
    probe.release()
    return None
