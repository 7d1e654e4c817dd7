"""The store: the only code that touches the log folder (OPLOG.md).

It owns this node's identity and shard (an OS lock keeps one writer per shard), appends ops with flush + fsync
before acknowledging (group commit when writers wait), follows every shard in `log/` by offset, repairs its own
torn tail, reports unreadable lines without ever deleting them, and compacts its own shard atomically.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
import platform
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock

from . import opcache
from .errors import HivenoteError
from .fold import State
from .hlc import Clock
from .model import Author, CorruptLine, Op, UnknownOp, decode_op

log = logging.getLogger(__name__)

Payload = tuple[str, dict[str, Any]]  # (op kind, payload) as decided by the notebook/graph use-cases
Decide = Callable[[State], list[Payload]]

MAX_REPORTED_BAD_LINES = 50  # per shard; the count keeps going
CACHE_MIN_NEW_OPS = 1000  # closing saves the op cache when at least this many ops are not in it yet
READ_BLOCK = 4 << 20  # shards are read in blocks so a cold start never holds a whole log in memory twice


class StoreError(HivenoteError):
    """Base of everything the store raises on purpose."""

    code = "store"


class ShardLocked(StoreError):
    """Another process already writes this data dir's shard."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid else "pid unknown"
        super().__init__(
            f"Hivenote is already running for this data dir ({who}): {data_dir}. "
            "Use that instance, stop it first, or pass a different --data-dir."
        )


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened read-only."""


class StoreWriteFailed(StoreError):
    """Writing the log failed (disk full, read-only file system, folder gone); nothing was acknowledged."""


@dataclass
class BadLine:
    line: int
    reason: str


@dataclass
class ShardHealth:
    """What reading one shard file found: counts and the first few unreadable lines (never deleted)."""

    ops: int = 0
    bad: int = 0
    unknown: int = 0
    bad_lines: list[BadLine] = field(default_factory=list)
    torn_tail_bytes: int = 0


@dataclass
class _Cursor:
    path: Path
    ino: int = -1
    dev: int = -1
    offset: int = 0
    line_no: int = 0
    tail_sig: bytes = b""
    health: ShardHealth = field(default_factory=ShardHealth)
    ops: list[Op] = field(default_factory=list)  # every valid op read from it, for the op cache


def host_fingerprint() -> str:
    """A stable id of this machine, so a `node.json` copied to another machine is noticed."""
    parts = [socket.gethostname(), platform.system(), f"{uuid.getnode():x}"]
    for candidate in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            parts.append(Path(candidate).read_text(encoding="utf-8").strip())
            break
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _node_name() -> str:
    host = "".join(c if c.isalnum() or c == "-" else "-" for c in socket.gethostname().split(".")[0].lower())
    return f"{host.strip('-')[:32] or 'node'}-{secrets.token_hex(2)}"


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def is_shard_file(name: str) -> bool:
    """Files in log/ that hold ops: `<node>.jsonl` and sync-conflict copies; never temp or hidden files."""
    return name.endswith(".jsonl") and not name.startswith(".") and ".tmp" not in name


class Store:
    """One data dir: this node's shard (writer) plus every other shard in `log/` (followed)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        readonly: bool = False,
        now_ms: Callable[[], int] = _wall_ms,
        fingerprint: Callable[[], str] = host_fingerprint,
        max_clock_offset_ms: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.log_dir = self.data_dir / "log"
        self.readonly = readonly
        self.now_ms = now_ms
        self.clock = Clock(now_ms) if max_clock_offset_ms is None else Clock(now_ms, max_clock_offset_ms)
        self.state = State()
        self.lock = threading.RLock()  # guards state, cursors and the pending queue
        self._flush_lock = threading.Lock()  # one fsync at a time; waiters pile up behind it (group commit)
        self._cursors: dict[str, _Cursor] = {}
        self._pending: list[bytes] = []
        self._pending_ops: list[Op] = []
        self._enqueued = 0
        self._durable = 0
        self._failed: list[tuple[int, int, str]] = []
        self._fh: Any = None
        self._size = 0
        self._seq = 0
        self._filelock: filelock.BaseFileLock | None = None
        self.repaired_tail_bytes = 0
        self.fsyncs = 0  # group commits so far (status and tests)
        self.cache_path = self.data_dir / "cache" / "oplog.bin"
        self._cache: dict[str, opcache.ShardEntry] = {}
        self._uncached = 0  # ops read or written that the cache file does not hold yet
        self.cached_ops = 0  # ops taken from the cache at open instead of parsed from the log
        self.node = self._load_node(fingerprint) if not readonly else self._peek_node()
        self.shard_path = self.log_dir / f"{self.node}.jsonl" if self.node else None

    # -- identity and lifecycle ---------------------------------------------------------------------

    def _peek_node(self) -> str:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return str(json.loads((self.data_dir / "node.json").read_text(encoding="utf-8"))["node"])
        return ""

    def _load_node(self, fingerprint: Callable[[], str]) -> str:
        path = self.data_dir / "node.json"
        here = fingerprint()
        info: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            info = json.loads(path.read_text(encoding="utf-8"))
        node = info.get("node") if isinstance(info, dict) else None
        if isinstance(node, str) and node and info.get("host") == here:
            return node
        if isinstance(node, str) and node:
            log.warning("node.json was copied from another machine (%s); minting a new node id", node)
        node = _node_name()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        record = {"node": node, "host": here, "created": self.now_ms()}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return node

    def open(self) -> Store:
        """Take the shard lock (writer), fold every shard, repair this node's torn tail. Returns self."""
        if not self.readonly:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._acquire_lock()
            try:
                self._repair_own_tail()
            except BaseException:
                self._release_lock()
                raise
        # The first fold allocates an object or more per op and keeps them all: generational GC passes over
        # that growing heap are pure overhead, so they wait until it is built.
        pause_gc = gc.isenabled()
        gc.disable()
        try:
            self._cache = opcache.load(self.cache_path)
            self.refresh(include_own=True)
        finally:
            self._cache = {}  # used once, at start
            if pause_gc:
                gc.enable()
        if not self.readonly:
            assert self.shard_path is not None
            stats = self.state.nodes.get(self.node)
            self._seq = stats.max_seq if stats else 0
            self._fh = open(self.shard_path, "ab")  # noqa: SIM115 - held for the store's lifetime
            self._size = self._fh.tell()
        return self

    def close(self) -> None:
        if self._uncached >= CACHE_MIN_NEW_OPS:
            self.checkpoint()
        with self._flush_lock, self.lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            self._release_lock()

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _acquire_lock(self) -> None:
        lock_path = self.log_dir / f"{self.node}.lock"
        lock = filelock.FileLock(lock_path)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            pid: int | None = None
            with contextlib.suppress(OSError, ValueError):
                pid = int(lock_path.read_text(encoding="utf-8").strip() or "0") or None
            raise ShardLocked(self.data_dir, pid) from None
        self._filelock = lock
        with open(lock_path, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")

    def _release_lock(self) -> None:
        if self._filelock is not None:
            self._filelock.release()
            self._filelock = None

    def _repair_own_tail(self) -> None:
        """A last line without `\\n` was never acknowledged (torn write): cut it before appending again."""
        assert self.shard_path is not None
        try:
            fh = open(self.shard_path, "r+b")  # noqa: SIM115
        except FileNotFoundError:
            return
        with fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            # Scan back for the last newline in blocks.
            pos = size
            keep = 0
            while pos > 0:
                start = max(0, pos - 65536)
                fh.seek(start)
                block = fh.read(pos - start)
                idx = block.rfind(b"\n")
                if idx >= 0:
                    keep = start + idx + 1
                    break
                pos = start
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
            self.repaired_tail_bytes = size - keep
            log.warning("repaired a torn last line in %s (%d bytes)", self.shard_path.name, size - keep)

    # -- reading ------------------------------------------------------------------------------------

    def refresh(self, *, include_own: bool = False) -> int:
        """Fold whatever appeared in `log/` since the last call. Returns the number of new ops applied."""
        try:
            names = sorted(e.name for e in os.scandir(self.log_dir) if e.is_file() and is_shard_file(e.name))
        except FileNotFoundError:
            names = []
        own = self.shard_path.name if self.shard_path else None
        applied = 0
        for name in names:
            if name == own and not include_own and not self.readonly:
                continue  # we wrote everything in it
            applied += self._follow(name)
        with self.lock:
            for gone in set(self._cursors) - set(names):
                del self._cursors[gone]
        return applied

    def _follow(self, name: str) -> int:
        path = self.log_dir / name
        try:
            fh = open(path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            return 0
        with fh:
            st = os.fstat(fh.fileno())
            with self.lock:
                cur = self._cursors.get(name)
                if cur is None:
                    cur = self._cursors[name] = _Cursor(path)
                start = cur.offset
                if (st.st_ino, st.st_dev) != (cur.ino, cur.dev) or st.st_size < start:
                    start = self._resume_point(fh, cur, st.st_size)
                if start == 0:
                    cur.line_no = 0
                    cur.health = ShardHealth()
                    cur.ops = []
                    start = self._from_cache(fh, cur, st.st_size)
                cur.ino, cur.dev = st.st_ino, st.st_dev
                if st.st_size == start:
                    cur.offset = start
                    return 0
                fh.seek(start)
                applied = 0
                pos, end, carry = start, st.st_size, b""
                while pos < end:
                    chunk = fh.read(min(READ_BLOCK, end - pos))
                    if not chunk:  # shrank while we read: the next refresh re-reads it
                        break
                    pos += len(chunk)
                    block = carry + chunk
                    cut = block.rfind(b"\n") + 1
                    if cut:
                        applied += self._apply_lines(block[:cut], cur)
                    carry = block[cut:]
                cur.health.torn_tail_bytes = len(carry)
                cur.offset = pos - len(carry)
                cur.tail_sig = self._tail_sig(fh, cur.offset)
                return applied

    @staticmethod
    def _tail_sig(fh: Any, offset: int) -> bytes:
        fh.seek(max(0, offset - 64))
        sig: bytes = fh.read(min(64, offset))
        return sig

    def _resume_point(self, fh: Any, cur: _Cursor, size: int) -> int:
        """A replaced file (sync tools rename a fresh copy in) continues at our offset if its bytes there match."""
        if cur.offset == 0 or size < cur.offset:
            return 0
        return cur.offset if self._tail_sig(fh, cur.offset) == cur.tail_sig else 0

    def _apply_lines(self, data: bytes, cur: _Cursor) -> int:
        try:
            lines: list[str | bytes] = list(data.decode("utf-8").split("\n")[:-1])
        except UnicodeDecodeError:  # some line is not UTF-8: decode line by line so only it is reported
            lines = list(data.split(b"\n")[:-1])
        # A cold start allocates one op per line and keeps them all: generational GC passes over that
        # growing heap are pure overhead, so pause them for big reads.
        pause_gc = len(data) > 1 << 20 and gc.isenabled()
        if pause_gc:
            gc.disable()
        try:
            return self._apply_decoded(lines, cur)
        finally:
            if pause_gc:
                gc.enable()

    def _from_cache(self, fh: Any, cur: _Cursor, size: int) -> int:
        """Apply the cached ops of this shard if the file still holds the bytes they were read from;
        returns the offset to go on reading from."""
        entry = self._cache.get(cur.path.name)
        if entry is None or size < entry.offset:
            return 0
        fh.seek(0)
        if (
            fh.read(min(opcache.HEAD, entry.offset)) != entry.head_sig
            or self._tail_sig(fh, entry.offset) != entry.tail_sig
        ):
            return 0
        apply = self.state.apply
        latest: dict[str, tuple[int, int]] = {}  # the clock only needs each node's latest stamp
        for op in entry.ops:
            apply(op)
            if (op.wall, op.counter) > latest.get(op.node, (-1, -1)):
                latest[op.node] = (op.wall, op.counter)
        for node, (wall, counter) in latest.items():
            self.clock.observe(wall, counter, node)
        self.cached_ops += len(entry.ops)
        ops, bad, unknown, bad_lines = entry.health
        cur.health = ShardHealth(ops, bad, unknown, [BadLine(line, reason) for line, reason in bad_lines])
        cur.ops, cur.line_no, cur.offset, cur.tail_sig = entry.ops, entry.line_no, entry.offset, entry.tail_sig
        return entry.offset

    def checkpoint(self) -> None:
        """Save the op cache so the next start skips parsing what was read so far (best effort: derived data)."""
        with self._flush_lock, self.lock:
            entries = []
            for name, cur in self._cursors.items():
                if cur.offset == 0:
                    continue
                try:
                    with open(cur.path, "rb") as fh:
                        head = fh.read(min(opcache.HEAD, cur.offset))
                except OSError:
                    continue
                h = cur.health
                health = (h.ops, h.bad, h.unknown, [(b.line, b.reason) for b in h.bad_lines])
                entries.append(opcache.ShardEntry(name, cur.offset, cur.line_no, head, cur.tail_sig, health, cur.ops))
            try:
                opcache.save(self.cache_path, entries)
            except OSError as exc:
                log.info("op cache not saved (%s); the next start reads the log in full", exc)
                return
            self._uncached = 0

    def _apply_decoded(self, lines: list[str | bytes], cur: _Cursor) -> int:
        applied = 0
        health = cur.health
        parsed = cur.ops
        apply, observe = self.state.apply, self.clock.observe
        for line in lines:
            cur.line_no += 1
            if not line or line.isspace():
                continue
            try:
                op = decode_op(line)
            except UnknownOp as exc:
                health.unknown += 1
                self._report(health, cur, str(exc))
                continue
            except CorruptLine as exc:
                health.bad += 1
                self._report(health, cur, str(exc))
                continue
            health.ops += 1
            parsed.append(op)
            observe(op.wall, op.counter, op.node)
            if apply(op):
                applied += 1
        self._uncached += len(lines)
        return applied

    @staticmethod
    def _report(health: ShardHealth, cur: _Cursor, reason: str) -> None:
        if len(health.bad_lines) < MAX_REPORTED_BAD_LINES:
            health.bad_lines.append(BadLine(cur.line_no, reason))
        log.warning("%s line %d skipped: %s", cur.path.name, cur.line_no, reason)

    def health(self) -> dict[str, ShardHealth]:
        with self.lock:
            return {name: cur.health for name, cur in sorted(self._cursors.items())}

    @contextlib.contextmanager
    def reading(self) -> Iterator[State]:
        """Hold the state still while reading it (writers and followers wait)."""
        with self.lock:
            yield self.state

    # -- writing ------------------------------------------------------------------------------------

    def write(self, decide: Decide, by: Author) -> list[Op]:
        """Decide ops against the current state and append them; returns once they are on disk (fsynced).

        `decide` runs under the store lock, so what it checks cannot change before its ops are applied; it
        may raise to write nothing. Ops are applied to the state at once (later deciders see them) and
        acknowledged after the fsync of the group they were written with.
        """
        if self.readonly or self._fh is None:
            raise ReadOnlyStore("this store is open read-only; open it as the writer to change the notebook")
        with self.lock:
            payloads = decide(self.state)
            if not payloads:
                return []
            ops = []
            for offset, (kind, data) in enumerate(payloads, start=1):
                wall, counter = self.clock.tick()
                ops.append(Op(self.node, self._seq + offset, wall, counter, kind, data, by))
            blob = b"".join(op.encode() for op in ops)  # raises before anything changes
            self._seq += len(ops)
            self._pending.append(blob)
            self._pending_ops.extend(ops)
            for op in ops:
                self.state.apply(op)
            self._enqueued += 1
            ticket = self._enqueued
        self._flush(ticket)
        return ops

    def _flush(self, ticket: int) -> None:
        with self._flush_lock:
            if self._durable < ticket and not self._failed_ticket(ticket):
                with self.lock:
                    batch = b"".join(self._pending)
                    batch_ops = self._pending_ops
                    self._pending.clear()
                    self._pending_ops = []
                    upto = self._enqueued
                try:
                    self._fh.write(batch)
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                except (OSError, ValueError) as exc:
                    self._roll_back(exc)
                else:
                    self.fsyncs += 1
                    self._size += len(batch)
                    self._durable = upto
                    self._advance_own_cursor(batch, batch_ops)
            failure = self._failed_ticket(ticket)
            if failure:
                raise StoreWriteFailed(
                    f"could not write the notebook log ({failure}); nothing was saved. "
                    "Free disk space or fix the data folder's permissions, then try again."
                )

    def _failed_ticket(self, ticket: int) -> str | None:
        for lo, hi, reason in self._failed:
            if lo <= ticket <= hi:
                return reason
        return None

    def _roll_back(self, exc: BaseException) -> None:
        """A failed write acknowledged nothing: cut the shard back and re-fold from what is durable."""
        with self.lock:
            self._failed.append((self._durable + 1, self._enqueued, str(exc)))
            self._pending.clear()
            self._pending_ops = []
            self._durable = self._enqueued
            with contextlib.suppress(OSError, ValueError):
                self._fh.close()
            with contextlib.suppress(OSError):
                os.truncate(self.shard_path, self._size)  # type: ignore[arg-type]
            self._reload()
            with contextlib.suppress(OSError):
                self._fh = open(self.shard_path, "ab")  # type: ignore[arg-type]  # noqa: SIM115
                self._size = self._fh.tell()

    def _reload(self) -> None:
        self.state = State()
        self._cursors.clear()
        self.refresh(include_own=True)
        stats = self.state.nodes.get(self.node)
        self._seq = stats.max_seq if stats else 0

    def _advance_own_cursor(self, batch: bytes, ops: list[Op]) -> None:
        """We wrote these bytes ourselves: move our cursor past them without reading them back."""
        assert self.shard_path is not None
        with self.lock:
            cur = self._cursors.get(self.shard_path.name)
            if cur is None:
                # First write to a fresh shard: start following it.
                st = os.fstat(self._fh.fileno())
                cur = self._cursors[self.shard_path.name] = _Cursor(self.shard_path, st.st_ino, st.st_dev)
            cur.offset = self._size
            cur.health.ops += len(ops)
            cur.line_no += len(ops)  # one line each
            cur.tail_sig = (cur.tail_sig + batch)[-64:] if len(batch) < 64 else batch[-64:]
            cur.ops.extend(ops)
            self._uncached += len(ops)

    # -- compaction ---------------------------------------------------------------------------------

    def compact(self) -> tuple[int, int]:
        """Rewrite this node's shard keeping only ops that still decide something; returns (before, after) lines.

        Refuses (and changes nothing) unless a fresh fold of the compacted shard plus every other shard
        equals the current state.
        """
        if self.readonly or self._fh is None or self.shard_path is None:
            raise ReadOnlyStore("compaction needs the writer; stop the running Hivenote or use it to compact")
        from .compaction import lines_to_keep  # local: only compaction needs it

        with self._flush_lock, self.lock:
            self.refresh()
            raw = self.shard_path.read_bytes()
            lines = raw.split(b"\n")[:-1]
            kept = lines_to_keep(lines, self.state, self.node)
            tmp = self.shard_path.with_name(f".{self.shard_path.name}.compact.tmp")
            blob = b"".join(line + b"\n" for line in kept)
            with open(tmp, "wb") as fh:
                fh.write(blob)
                fh.flush()
                os.fsync(fh.fileno())
            check = State()
            for line in kept:
                with contextlib.suppress(CorruptLine):
                    check.apply(decode_op(line))
            for name, cur in self._cursors.items():
                if name != self.shard_path.name:
                    with open(cur.path, "rb") as other:
                        for line in other.read(cur.offset).split(b"\n"):
                            if line.strip():
                                with contextlib.suppress(CorruptLine):
                                    check.apply(decode_op(line))
            if check.snapshot() != self.state.snapshot():
                tmp.unlink()
                raise StoreError("compaction would change the notebook; the shard was left as it was")
            self._fh.close()
            os.replace(tmp, self.shard_path)
            _fsync_dir(self.log_dir)
            self._fh = open(self.shard_path, "ab")  # noqa: SIM115
            self._size = self._fh.tell()
            self._cursors.pop(self.shard_path.name, None)
            self._follow(self.shard_path.name)
            return len(lines), len(kept)


def lock_holder(data_dir: Path) -> int | None:
    """The pid of the process writing this data dir's shard, or None when no process holds it (0: unknown pid)."""
    try:
        node = json.loads((Path(data_dir) / "node.json").read_text(encoding="utf-8"))["node"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    lock_path = Path(data_dir) / "log" / f"{node}.lock"
    if not lock_path.exists():
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


def _fsync_dir(path: Path) -> None:
    if os.name == "nt":  # directories cannot be opened for fsync on Windows; rename is durable there
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
