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

from ..core.errors import ShardLocked
from .files import private_dir
from .layout import Layout
from .statefile import write_json

log = logging.getLogger(__name__)

MAX_PREVIOUS = 32  # earlier node ids of this install kept in node.json (for status; their shards stay readable)


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
    node = read_record(data_dir).get("node")
    return node if isinstance(node, str) else ""


def previous_nodes(data_dir: Path) -> list[str]:
    """Earlier node ids of this install (their shards stay in the log as read-only copies)."""
    previous = read_record(data_dir).get("previous")
    return [p for p in previous if isinstance(p, str)] if isinstance(previous, list) else []


def read_record(data_dir: Path) -> dict[str, Any]:
    """`node.json` as a dict ({} when missing or unreadable)."""
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(Layout(data_dir).node_record.read_text(encoding="utf-8"))
        if isinstance(info, dict) and isinstance(info.get("node"), str) and info["node"]:
            return info
    return {}


def write_record(data_dir: Path, info: dict[str, Any]) -> None:
    """Write `node.json` durably and atomically (statefile: a unique temp file, fsynced, renamed, the folder
    fsynced): the machine's identity must never be half written or lost to a crash."""
    make_data_dir(data_dir)
    write_json(Layout(data_dir).node_record, info)


def claim_node(data_dir: Path, fingerprint: str, now_ms: int) -> str:
    """This machine's node id for the data dir, minting (and recording) a new one on first use or when
    `node.json` was copied from another machine, so two machines never append to the same shard. The writer
    confirms it under the shard lock (`confirm_own`) before its first append."""
    info = read_record(data_dir)
    if info and info.get("host") == fingerprint:
        return str(info["node"])
    if info:
        log.warning("node.json was copied from another machine (%s); minting a new node id", info["node"])
    return _mint(data_dir, info, fingerprint, now_ms, "")


def _mint(data_dir: Path, info: dict[str, Any], fingerprint: str, now_ms: int, why: str) -> str:
    node = new_node_name()
    previous = [str(p) for p in info.get("previous", []) if isinstance(p, str)][-(MAX_PREVIOUS - 1) :]
    if info.get("node"):
        previous.append(str(info["node"]))
    record: dict[str, Any] = {"node": node, "host": fingerprint, "created": now_ms, "claim": None}
    if previous:
        record["previous"] = previous
    if why:
        record["why"] = why
    write_record(data_dir, record)
    return node


def succeed(data_dir: Path, fingerprint: str, now_ms: int, why: str) -> str:
    """A fresh node id for this install, recorded in node.json with the current one kept in `previous`."""
    return _mint(data_dir, read_record(data_dir), fingerprint, now_ms, why)


def _ino(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def confirm_own(data_dir: Path, node: str, shard: Path, fingerprint: str, now_ms: int) -> tuple[str, str]:
    """Whether this install may go on appending to `shard` as `node` (called under the shard's lock, before the
    first append). It may only if it can prove the shard is the very file it last appended to, in the very data
    dir it claimed the node in: the inode numbers `record_shard` wrote in node.json. A copied or restored data dir,
    a lost shard, one brought back from elsewhere (a backup, a peer, a sync tool) or a node.json from another
    machine cannot prove it: then a new node id is minted, so no `(node, seq)` is ever written twice, and the old
    shard stays a read-only copy like any other machine's. Returns (node to write as, why it changed or "")."""
    info = read_record(data_dir)
    claim = info.get("claim")
    size = shard.stat().st_size if _ino(shard) is not None else 0
    if info.get("node") != node:
        why = "node.json names another node"
    elif info.get("host") != fingerprint:
        why = "node.json came from another machine"
    elif not isinstance(claim, dict):
        why = "" if size == 0 else "this data dir was last written by an older Hivenote that kept no claim"
    elif claim.get("dir") != _ino(data_dir):
        why = "this data dir is a copy (or a restore) of the one the node id was claimed in"
    elif claim.get("shard") is None:
        why = "" if size == 0 else f"{shard.name} appeared although this install never wrote it"
    elif _ino(shard) is None:
        why = f"{shard.name} is missing (deleted or lost)"
    elif claim.get("shard") != _ino(shard):
        why = f"{shard.name} is not the file this install wrote (restored from a backup or brought back by a sync tool)"
    elif size < int(claim.get("size") or 0):
        why = f"{shard.name} is shorter than what this install wrote in it (restored from an older copy)"
    else:
        why = ""
    if not why:
        return node, ""
    fresh = _mint(data_dir, info, fingerprint, now_ms, why)
    log.warning("%s: writing as a new node id %s from now on (%s stays a read-only copy)", why, fresh, node)
    return fresh, why


def record_shard(data_dir: Path, node: str, shard: Path, size: int = 0) -> None:
    """Remember which file this install appends to (after creating, compacting or putting back its shard) and, on
    a clean close, how long it was (a shard never shrinks but by this install's own compaction)."""
    info = read_record(data_dir) or {"node": node}
    claim = {"dir": _ino(data_dir), "shard": _ino(shard), "size": size}
    if info.get("node") == node and info.get("claim") == claim:
        return
    info.update(node=node, claim=claim)
    info.pop("why", None)
    write_record(data_dir, info)


def make_data_dir(data_dir: Path) -> None:
    """Create the data folder for this user's eyes only (0700): it holds every note, the tokens and the peer book
    (other accounts on a shared machine must not read them). An existing folder open to other accounts (made by
    hand, or by an older Hivenote under umask 022) is closed the same way, and the log says so; the folders above it
    are not Hivenote's to close."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    private_dir(data_dir)


class ShardClaim:
    """The OS lock on `log/<node>.lock`, with the holder's pid written in it for the next one to name."""

    def __init__(self, data_dir: Path, node: str, timeout: float = 0) -> None:
        self.data_dir = data_dir
        self.path = Layout(data_dir).lock(node)
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
    lock_path = Layout(Path(data_dir)).lock(node)
    if not node or not lock_path.exists():
        return None
    probe = filelock.FileLock(lock_path)
    try:
        probe.acquire(timeout=0)
    except PermissionError:  # a log folder this user may not write: none of this user's processes writes it either
        return None
    except filelock.Timeout:
        with contextlib.suppress(OSError, ValueError):
            return int(lock_path.read_text(encoding="utf-8").strip() or "0")
        return 0
    probe.release()
    return None
