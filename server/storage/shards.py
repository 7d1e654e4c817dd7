"""Following the log folder: every shard read by offset into the state (a file replaced by a sync tool resumes
only where every byte before the offset still matches, else it is re-read whole), what each read found (ops,
unreadable lines, torn tail), and the op cache that lets a restart skip re-parsing. Callers hold the store lock.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..core.fold import State
from ..core.hlc import Clock
from ..core.model import MAX_LINE_BYTES, CorruptLine, Journal, Op, UnknownOp, decode_op, line_digest
from . import opcache
from .gcpause import collector_paused

log = logging.getLogger(__name__)

MAX_REPORTED_BAD_LINES = 50  # per shard; the count keeps going
READ_BLOCK = 4 << 20  # shards are read in blocks so a cold start never holds a whole log in memory twice
_PAYLOAD_FREE = frozenset(("note.trash", "note.restore", "note.purge"))  # a payload that is only the note id
MISSING_GRACE_S = 5.0  # how long a shard may be missing before it is forgotten (replaced by a sync tool)
SKIP_PER_CALL = 64 << 20  # bytes of a line longer than any op skipped per call: the rest on the next ones


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
    unreadable: str = ""  # why the file cannot be read now (its mode, an I/O error): skipped until it can


class ShardFile(Journal):
    """One shard file's ops by row (`Journal`: what the op cache saves, and what a note's history refers to when the
    fold let go of an op), and where released ops read their lines back (`Op.data` of such an op). The line at the
    recorded offset is used only if its digest is the op's; a file rewritten since (compaction, a sync tool's copy)
    is searched line by line for it."""

    __slots__ = ("path",)

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def line(self, at: int, digest: int) -> bytes | None:
        try:
            with open(self.path, "rb") as fh:
                if at >= 0:
                    fh.seek(at)
                    line = fh.readline(MAX_LINE_BYTES + 1)  # never more: a longer line is damage, not an op
                    if line.endswith(b"\n") and line_digest(line[:-1]) == digest:
                        return line[:-1]
                fh.seek(0)
                # Rewritten since: look for the very line (rare; compaction keeps lines as they are), a bounded piece
                # at a time (a line longer than any op comes in pieces, none of which is the op's).
                for line in iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""):
                    if line.endswith(b"\n") and line_digest(line[:-1]) == digest:
                        return line[:-1]
        except OSError:
            pass
        return None


@dataclass
class Cursor:
    """How far one shard file has been read."""

    path: Path
    ino: int = -1
    dev: int = -1
    offset: int = 0
    line_no: int = 0
    prefix: Any = field(default_factory=hashlib.sha256)  # SHA-256 of every byte before `offset`; None: not kept
    skipping: bool = False  # `offset` is inside a line longer than any op (damage), skipped up to its newline
    health: ShardHealth = field(default_factory=ShardHealth)
    start: int = 0  # the row of `source` its current read starts at (rows before it: an earlier read of the file)
    missing_since: float | None = None  # monotonic time it was first seen missing
    source: ShardFile = field(init=False)

    def __post_init__(self) -> None:
        self.source = ShardFile(self.path)


# What scanning a folder of shards raises when there is none: it is gone, or a file took its place (a synced folder
# unmounted, or replaced). Either reads as a folder holding no shard.
NO_FOLDER = (FileNotFoundError, NotADirectoryError)


def is_shard_file(name: str) -> bool:
    """Files in log/ that hold ops: `<node>.jsonl` and sync-conflict copies; never temp or hidden files."""
    return name.endswith(".jsonl") and not name.startswith(".") and ".tmp" not in name


def hash_prefix(fh: IO[bytes], offset: int) -> Any:
    """SHA-256 of a file's first `offset` bytes (fewer if it is shorter), as a hash object that can go on."""
    h = hashlib.sha256()
    hash_range(h, fh, 0, offset)
    return h


def hash_range(h: Any, fh: IO[bytes], start: int, end: int) -> int:
    """Feed bytes `start`..`end` of an open file to the hash object `h`; returns where the bytes ended (`end`, or
    less when the file is shorter)."""
    fh.seek(start)
    while start < end:
        chunk = fh.read(min(READ_BLOCK, end - start))
        if not chunk:
            break
        h.update(chunk)
        start += len(chunk)
    return start


class Shards:
    """The cursors over every shard in `log_dir`, folding what they read into `state` and `clock`."""

    def __init__(self, log_dir: Path, state: State, clock: Clock, cache: dict[str, opcache.ShardEntry]) -> None:
        self.log_dir = log_dir
        self.state = state
        self.clock = clock
        self.cursors: dict[str, Cursor] = {}
        self._cache = cache  # entries not yet used; each is used at most once, on a shard's first read
        self.uncached = 0  # ops read or written that the cache file does not hold yet
        self.cached_ops = 0  # ops taken from the cache instead of parsed

    def names(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.log_dir) if e.is_file() and is_shard_file(e.name))
        except NO_FOLDER:
            return []

    def forget_missing(self, names: list[str]) -> None:
        """Drop the cursors of shards gone for a while. Sync tools replace a file by deleting it and renaming
        the new copy in, so a shard missing for a moment keeps its cursor (and is resumed, not re-read)."""
        now = time.monotonic()
        present = set(names)
        for name, cur in list(self.cursors.items()):
            if name in present:
                cur.missing_since = None
            elif cur.missing_since is None:
                cur.missing_since = now
            elif now - cur.missing_since > MISSING_GRACE_S:
                del self.cursors[name]

    def health(self) -> dict[str, ShardHealth]:
        return {name: cur.health for name, cur in sorted(self.cursors.items())}

    def follow(self, name: str) -> int:
        """Fold what this shard gained since the last call. Returns the number of new ops applied."""
        try:
            fh = open(self.log_dir / name, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return 0
        except OSError as exc:  # its mode, or an I/O error: this file only, never the shards after it
            self._unreadable(name, exc)
            return 0
        with fh:
            try:
                return self._follow_open(name, fh)
            except OSError as exc:
                self._unreadable(name, exc)
                return 0

    def _unreadable(self, name: str, exc: OSError) -> None:
        """A file in the log folder that cannot be read now: skipped and reported (status, doctor), as bad lines are;
        read once it can be."""
        cur = self.cursors.get(name)
        if cur is None:
            cur = self.cursors[name] = Cursor(self.log_dir / name)
        reason = exc.strerror or str(exc)
        if cur.health.unreadable != reason:
            log.warning("%s cannot be read (%s): skipped until it can; the other shards are read", name, reason)
        cur.health.unreadable = reason

    def _follow_open(self, name: str, fh: BinaryIO) -> int:
        st = os.fstat(fh.fileno())
        cur = self.cursors.get(name)
        if cur is None:
            cur = self.cursors[name] = Cursor(self.log_dir / name)
        cur.health.unreadable = ""
        start = cur.offset
        if (st.st_ino, st.st_dev, st.st_size) == (cur.ino, cur.dev, start):
            return 0  # unchanged since the last call: the server asks twice a second, so say so cheaply
        if (st.st_ino, st.st_dev) != (cur.ino, cur.dev) or st.st_size < start:
            # Replaced (sync tools rename a fresh copy in) or shrunk (compaction): resume only if every byte
            # before our offset is still the same (a digest of the whole prefix, never a few bytes of it: a
            # compacted or forked shard can end a line at the same offset with the same last bytes), else read
            # it all again (ops are idempotent, so that is always safe).
            start = 0
            if 0 < cur.offset <= st.st_size and cur.prefix is not None:  # None: skipped damage, not proven
                again = hash_prefix(fh, cur.offset)
                if again.digest() == cur.prefix.digest():
                    start = cur.offset
        if start == 0:
            cur.line_no, cur.health, cur.prefix, cur.skipping = 0, ShardHealth(), hashlib.sha256(), False
            cur.source.unhold(cur.start, len(cur.source))
            cur.start = len(cur.source)
            start = self._from_cache(fh, cur, st.st_size)
        cur.ino, cur.dev = st.st_ino, st.st_dev
        applied = skipped = 0
        pos, carry = start, b""
        fh.seek(start)
        while pos < st.st_size:
            chunk = fh.read(min(READ_BLOCK, st.st_size - pos))
            if not chunk:  # shrank while we read: the next call re-reads it
                break
            block_at = pos - len(carry)  # where `block` starts in the file
            pos += len(chunk)
            if cur.skipping:  # inside a line longer than any op: up to its newline, a bounded amount per call
                end = chunk.find(b"\n") + 1
                if not end:
                    skipped += len(chunk)
                    if skipped >= SKIP_PER_CALL:
                        break
                    continue
                cur.skipping, chunk, block_at = False, chunk[end:], pos - len(chunk) + end
            block = carry + chunk
            cut = block.rfind(b"\n") + 1
            if cut:
                if cur.prefix is not None:
                    cur.prefix.update(block[:cut])
                applied += self._apply_lines(block[:cut], cur, block_at)
            carry = block[cut:]
            if len(carry) > MAX_LINE_BYTES:  # no op is this long, ended or not: damage, never held whole
                cur.line_no += 1
                cur.health.bad += 1
                self._report(cur, f"longer than any op ({MAX_LINE_BYTES} bytes): damage, skipped")
                # What is skipped is not hashed: a replaced file is read again whole instead of resumed.
                cur.skipping, cur.prefix, carry = True, None, b""
        cur.health.torn_tail_bytes = len(carry)  # a write in progress, or torn: read once it ends
        cur.offset = pos - len(carry)
        return applied

    def wrote(self, name: str, fd: int, batch: bytes, ops: list[Op]) -> None:
        """Our own appends to shard `name`: move its cursor past them without reading them back."""
        cur = self.cursors.get(name)
        if cur is None:  # first write to a fresh shard
            st = os.fstat(fd)
            cur = self.cursors[name] = Cursor(self.log_dir / name, st.st_ino, st.st_dev)
        at, source = cur.offset, cur.source
        placed = self.state.placed
        for op, line in zip(ops, batch.split(b"\n"), strict=False):  # one line each, in order
            source.add(op, at)
            at += len(line) + 1
            if op.kind in _PAYLOAD_FREE:
                op.release()
            placed(op)  # the note's history keeps its row from now on, not the op
        cur.offset += len(batch)
        cur.health.ops += len(ops)
        cur.line_no += len(ops)  # one line each
        cur.prefix.update(batch)
        self.uncached += len(ops)

    # -- reading lines ------------------------------------------------------------------------------

    def _apply_lines(self, data: bytes, cur: Cursor, at: int) -> int:
        """Fold the whole lines in `data`, which starts at byte `at` of the shard (each op learns where its line is,
        so the fold may let go of its payload and read it back)."""
        lines = data.split(b"\n")[:-1]
        with collector_paused(when=len(data) > 1 << 20):  # a big read keeps objects for every op it folds
            return self._apply_decoded(lines, cur, at)

    def _apply_decoded(self, lines: list[bytes], cur: Cursor, at: int) -> int:
        applied = 0
        health, source = cur.health, cur.source
        apply, observe = self.state.apply, self.clock.observe
        for line in lines:
            cur.line_no += 1
            line_at = at
            at += len(line) + 1
            if not line or (line[0] != 0x7B and line.decode("utf-8", "replace").isspace()):  # blank (str's sense)
                continue
            try:
                op = decode_op(line)
            except UnknownOp as exc:
                health.unknown += 1
                self._report(cur, str(exc))
                continue
            except CorruptLine as exc:
                health.bad += 1
                self._report(cur, str(exc))
                continue
            health.ops += 1
            source.add(op, line_at)
            observe(op.wall, op.counter, op.node)
            if apply(op):
                applied += 1
            else:
                op.release()  # folded before (a shard read again, a copy): its row need not keep the payload
        self.uncached += len(lines)
        return applied

    @staticmethod
    def _report(cur: Cursor, reason: str) -> None:
        if len(cur.health.bad_lines) < MAX_REPORTED_BAD_LINES:
            cur.health.bad_lines.append(BadLine(cur.line_no, reason))
        log.warning("%s line %d skipped: %s", cur.path.name, cur.line_no, reason)

    # -- the op cache -------------------------------------------------------------------------------

    def _from_cache(self, fh: BinaryIO, cur: Cursor, size: int) -> int:
        """Apply the cached ops of this shard if the file still holds the bytes they were read from;
        returns the offset to go on reading from."""
        entry = self._cache.pop(cur.path.name, None)
        if entry is None or size < entry.offset:
            return 0
        prefix = hash_prefix(fh, entry.offset)  # hashing is some ten times quicker than parsing the same bytes
        if prefix.digest() != entry.digest:
            return 0
        source = cur.source
        if len(source):
            return 0  # rows from an earlier read: the cache fills an empty journal only
        opcache.fill(entry, source)
        _, latest = self.state.apply_rows(source)  # the clock only needs each node's latest stamp
        for node, (wall, counter) in latest.items():
            self.clock.observe(wall, counter, node)
        self.cached_ops += len(source)
        ops, bad, unknown, bad_lines = entry.health
        cur.health = ShardHealth(ops, bad, unknown, [BadLine(line, reason) for line, reason in bad_lines])
        cur.line_no, cur.offset, cur.prefix = entry.line_no, entry.offset, prefix
        return entry.offset

    def cache_entries(self) -> list[opcache.ShardEntry]:
        entries = []
        for name, cur in self.cursors.items():
            # A wide journal (a stamp beyond 64 bits), or one past skipped damage (no prefix): read from its log.
            if cur.offset == 0 or cur.source.wide or cur.prefix is None:
                continue
            h = cur.health
            health = (h.ops, h.bad, h.unknown, [(b.line, b.reason) for b in h.bad_lines])
            source = cur.source
            payloads = source.held[cur.start :]
            entry = opcache.ShardEntry(name, cur.offset, cur.line_no, cur.prefix.digest(), health)
            entry.columns, entry.tables, entry.payloads = source.columns_of(cur.start), source.tables(), payloads
            entries.append(entry)
        return entries
