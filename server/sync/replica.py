"""The one writer of other nodes' shard files in the log folder, for every transport.

Bytes arrive as a continuation of what is already held (`append` at the current size) or as a whole shard that
replaced an older one (`replace`, after the owner compacted). Only complete lines are written, each write is
fsynced, and a line that says another node wrote it is refused: a transport must never let one node write as
another. Lines that are not JSON are kept (the fold skips and reports them, as in the owner's own copy).
This node's own shard is never written here: a lost one is not restored under the same node id (the store moves to a
new one, and the old shard comes back as another node's); another history of it is kept beside it (`add_branch`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..core.errors import HivenoteError
from ..core.model import MAX_LINE_BYTES, PLACEHOLDER
from ..storage.files import PRIVATE_DIR, PRIVATE_FILE, tighten, write_whole
from ..storage.shards import hash_range

log = logging.getLogger(__name__)

NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has none (and links there need privileges)
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# A shard file's name without `.jsonl`: a node's own shard (`<node>`), another history of a node kept beside it
# (`<node>~<12 hex>`, written where a fork was found) or a sync tool's conflict copy (`<node>.sync-conflict-...`).
SHARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,199}$")
CONFLICT = ".sync-conflict-"


def writer_of(name: str) -> str:
    """The node whose ops a shard file named `name` holds (its lines must all say so)."""
    if "~" in name:
        return name.split("~", 1)[0]
    return name.split(CONFLICT, 1)[0] if CONFLICT in name else name


class PrefixDigests:
    """SHA-256 of a shard file's first N bytes, remembered at the offsets last asked or served, so a follower's next
    question costs only the bytes added since. Keyed by (device, inode): shard files only grow in place (anything
    else is a new file: an atomic replace), so a remembered prefix of a file stays true."""

    def __init__(self, keep: int = 256) -> None:
        self._at: dict[tuple[int, int, int], Any] = {}
        self._keep = keep
        self._lock = threading.Lock()

    def _start(self, key: tuple[int, int], offset: int) -> tuple[int, Any]:
        with self._lock:
            best = max((o for (d, i, o) in self._at if (d, i) == key and o <= offset), default=0)
            h = self._at.get((*key, best))
            return (best, h.copy()) if h is not None else (0, hashlib.sha256())

    def _remember(self, key: tuple[int, int], offset: int, h: Any) -> None:
        with self._lock:
            self._at[(*key, offset)] = h
            if len(self._at) > self._keep:
                del self._at[next(iter(self._at))]

    def hexdigest(self, fh: IO[bytes], offset: int) -> str:
        """Of the open file's first `offset` bytes."""
        st = os.fstat(fh.fileno())
        key = (st.st_dev, st.st_ino)
        start, h = self._start(key, offset)
        if hash_range(h, fh, start, offset) < offset:
            raise SyncRefused(f"the shard ended before byte {offset}")
        self._remember(key, offset, h.copy())
        return str(h.hexdigest())

    def served(self, fh: IO[bytes], offset: int, data: bytes) -> None:
        """`data` was read at `offset` after its prefix was checked: remember the prefix that ends after it."""
        st = os.fstat(fh.fileno())
        key = (st.st_dev, st.st_ino)
        with self._lock:
            h = self._at.get((*key, offset))
        if h is not None and data:
            h = h.copy()
            h.update(data)
            self._remember(key, offset + len(data), h)


class SyncRefused(HivenoteError):
    """Bytes a transport offered that would corrupt or impersonate a shard; nothing was written."""

    code = "sync_refused"


def same_node(a: str, b: str) -> bool:
    """Whether two node names are one shard file: case-insensitive file systems (macOS, Windows) hold `A.jsonl` and
    `a.jsonl` as the same file, so a peer offering `LAPTOP-7F3A` must not reach laptop-7f3a's shard."""
    return a.casefold() == b.casefold()


def check_node_name(node: str) -> None:
    """A shard file's name (a node, or a branch or conflict copy of one: SHARD_NAME)."""
    if not SHARD_NAME.fullmatch(node) or ".." in node or not NODE_NAME.fullmatch(writer_of(node)):
        raise SyncRefused(f"{node!r} is not a node name (letters, digits, '.', '_', '-'; at most 100)")


def check_lines(node: str, data: bytes) -> int:
    """Refuse lines that name another writer than the file's, or are longer than any op can be (damage); returns how
    many lines there are."""
    count, writer_ = 0, writer_of(node)
    for number, line in enumerate(data.splitlines(), 1):
        count += 1
        if len(line) > MAX_LINE_BYTES:
            raise SyncRefused(
                f"line {number} of {node}'s shard is {len(line)} bytes, longer than any op ({MAX_LINE_BYTES}): damage, "
                "not copied (nothing past it is taken)"
            )
        try:
            writer = json.loads(line).get("node")
        except (ValueError, AttributeError, RecursionError):
            continue  # unreadable: kept as the owner has it, reported by the fold
        if writer != writer_:
            raise SyncRefused(f"line {number} of {node}'s shard says it was written by {writer!r}; refused")
    return count


def overlong_at(data: bytes) -> int:
    """Where the first line of `data` longer than any op starts (-1: none is)."""
    at = 0
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        if end - at > MAX_LINE_BYTES:
            return at
        at = end + 1
    return -1


def complete_size(path: Path) -> int:
    """Bytes of `path` up to and including its last newline (0 when missing). Looks back at most one line's worth: a
    longer unfinished tail is damage (SyncRefused), never scanned backwards whole."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            step = 65536
            end, floor = size, max(0, size - MAX_LINE_BYTES - 1)
            while end > floor:
                start = max(floor, end - step)
                fh.seek(start)
                chunk = fh.read(end - start)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    return start + newline + 1
                end = start
            if floor:
                raise SyncRefused(f"{path.name} ends in more than {MAX_LINE_BYTES} bytes without a newline: damage")
            return 0
    except FileNotFoundError:
        return 0


def _lines_by_seq(data: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    for line in data.splitlines():
        with contextlib.suppress(ValueError, RecursionError, AttributeError):
            seq = json.loads(line).get("seq")
            if type(seq) is int:
                found[seq] = line
    return found


def _stands_for(newer: bytes, older: bytes) -> bool:
    """Whether a line of a newer copy of a shard is, at its position, the op a line of an older copy is: the same
    bytes, or compaction's content-free `seq.keep` stand-in for it (the same node, seq and stamp; OPLOG.md
    "Compaction"). Never the other way round: no copy turns a stand-in back into text."""
    if newer == older:
        return True
    try:
        new, old = json.loads(newer), json.loads(older)
        return bool(
            new["op"] == PLACEHOLDER and (new["node"], new["seq"], new["hlc"]) == (old["node"], old["seq"], old["hlc"])
        )
    except (ValueError, RecursionError, KeyError, TypeError):
        return False


def _covered(newer: dict[int, bytes], older: dict[int, bytes], upto: int) -> bool:
    """Whether every line of the newer copy up to seq `upto` stands for the line the older copy holds there."""
    return all(
        (old := older.get(seq)) is not None and _stands_for(line, old) for seq, line in newer.items() if seq <= upto
    )


def classify(held: bytes, got: bytes, *, own: bool = False) -> str:
    """What a whole copy `got` of a shard is to the copy `held` here (both complete lines): "replaces" (it
    continues ours, or is a compaction of it or of a continuation: every op it keeps up to our last seq is the very
    op we hold there, and it goes at least as far), "behind" (an older copy: a prefix of ours, or the shard before a
    compaction ours comes from: every op we hold up to its last seq is the very op it holds there) or "other"
    (another history of the node: two different ops at one position). `own`: this install writes the node, so
    nothing but itself replaces it (a copy that would is another history)."""
    theirs, ours = _lines_by_seq(got), _lines_by_seq(held)
    if not ours:
        return ("other" if theirs else "behind") if own else "replaces"
    last, theirs_last = max(ours), max(theirs, default=0)
    if theirs_last <= last and _covered(ours, theirs, theirs_last):
        return "behind"  # the same ops as ours, or fewer: nothing to take (a compacted copy here stays)
    if not own and theirs_last >= last and _covered(theirs, ours, last):
        return "replaces"
    return "other"


class Replicas:
    def __init__(self, log_dir: Path, own_node: str | Callable[[], str]) -> None:
        self.log_dir = log_dir
        self._own = own_node  # a callable follows the store: it moves to a new node id when its own is forked
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self.digests = PrefixDigests()

    @property
    def own_node(self) -> str:
        return self._own() if callable(self._own) else self._own

    def prefix_digest(self, node: str, offset: int) -> str:
        """SHA-256 (hex) of the first `offset` bytes held of a shard (the proof a puller sends to resume there)."""
        with open(self.path(node), "rb") as fh:
            return self.digests.hexdigest(fh, offset)

    def settle(self, node: str, data: bytes) -> str:
        """A whole copy of a shard that does not continue the one held (`classify`): a compaction of ours replaces it
        (every op it keeps up to our last seq is the very op we hold, a `seq.keep` stand-in being the op it stands
        for, and it goes at least as far); an older copy than ours (a prefix, or the shard before a compaction ours
        comes from) is a peer or bucket being behind, for this install's own node too; anything else is another
        history of the node, kept beside ours as a branch, so both are folded and nothing held here or there is lost.
        Returns what was done: "replaced", "behind" or the branch's shard name."""
        try:
            held = self.path(node).read_bytes()
        except FileNotFoundError:
            held = b""
        found = classify(
            held[: held.rfind(b"\n") + 1], data[: data.rfind(b"\n") + 1], own=same_node(node, self.own_node)
        )
        if found == "replaces":
            self.replace(node, data)
            return "replaced"
        if found == "behind":
            return "behind"
        name = self.add_branch(node, data)
        log.warning("a copy of %s's shard is another history of it: kept as %s.jsonl", node, name)
        return name

    def add_branch(self, node: str, data: bytes) -> str:
        """Keep another history of a shard beside the one held (`<node>~<12 hex>.jsonl`, named by its bytes, so
        every machine that keeps the same bytes names them alike); returns the file's shard name."""
        whole = data[: data.rfind(b"\n") + 1]
        name = f"{writer_of(node)}~{hashlib.sha256(whole).hexdigest()[:12]}"
        if self.size(name) == 0:
            self._write_whole(name, whole)
        return name

    def path(self, node: str) -> Path:
        check_node_name(node)
        return self.log_dir / f"{node}.jsonl"

    def _lock(self, node: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(node, threading.Lock())

    def size(self, node: str) -> int:
        """Bytes of complete lines held for `node`."""
        return complete_size(self.path(node))

    def read(self, node: str, offset: int = 0, limit: int | None = None) -> bytes:
        """Complete lines of a shard from `offset` (a line boundary), at most about `limit` bytes (never a
        partial line, but at least one line when one exists)."""
        path = self.path(node)
        end = complete_size(path)
        if offset < 0 or offset > end:
            raise SyncRefused(f"offset {offset} is outside {node}'s shard (0 to {end} bytes)")
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(end - offset if limit is None else min(end - offset, limit))
        if limit is not None and offset + len(data) < end:
            cut = data.rfind(b"\n") + 1
            if cut == 0:  # one line longer than limit: send it whole (no op's line is longer than MAX_LINE_BYTES)
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    data = fh.readline(MAX_LINE_BYTES + 1)
                if not data.endswith(b"\n"):
                    raise SyncRefused(f"the line at byte {offset} of {node}'s shard is longer than any op: damage")
            else:
                data = data[:cut]
        return data

    def append(self, node: str, data: bytes, offset: int) -> int:
        """Add `data` (a continuation starting at `offset`, which must be the size held) to node's replica.
        Only its complete lines are written; returns how many bytes that was."""
        if same_node(node, self.own_node):
            raise SyncRefused(f"{node} is this machine's own shard: only its writer appends to it")
        path = self.path(node)
        with self._lock(node):
            held = complete_size(path)
            if offset != held:
                raise SyncRefused(f"offset {offset} does not continue {node}'s shard, which has {held} bytes here")
            whole = data[: data.rfind(b"\n") + 1]
            if (damage := overlong_at(whole)) > 0:
                whole = whole[:damage]  # the lines before the damage; the next append (from it) is refused, saying so
            if not whole:
                return 0
            check_lines(node, whole)
            self.log_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            try:  # never through a link planted in a synced folder: the bytes would land in the file it points to
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NO_FOLLOW, PRIVATE_FILE)
            except OSError as exc:
                if path.is_symlink():
                    raise SyncRefused(f"{path} is a symbolic link, not a shard; remove it to sync {node}") from None
                raise exc
            with os.fdopen(fd, "ab") as fh:
                tighten(path, fd)  # a replica an older Hivenote made 0644
                if fh.tell() != held:
                    fh.truncate(held)  # a partial line someone left: ours continues at the boundary
                fh.write(whole)
                fh.flush()
                os.fsync(fh.fileno())
            return len(whole)

    def replace(self, node: str, data: bytes) -> None:
        """Put a whole shard in place of the replica (the owner compacted it), atomically."""
        if same_node(node, self.own_node):
            raise SyncRefused(f"{node} is this machine's own shard: only its writer replaces it")
        self._write_whole(node, data)

    def _write_whole(self, node: str, data: bytes) -> None:
        path = self.path(node)
        whole = data[: data.rfind(b"\n") + 1]
        check_lines(node, whole)
        if path.is_symlink():  # a link planted in a synced folder: not a shard, whatever it points to
            raise SyncRefused(f"{path} is a symbolic link, not a shard; remove it to sync {node}")
        self.log_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        with self._lock(node):
            # A hidden temp file (never folded) with a random name, made exclusively (0600): never written through a
            # link planted in a synced folder; removed on failure. A link at `path` itself is replaced, not followed.
            write_whole(path, [whole])
