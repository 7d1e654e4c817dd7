"""The one writer of other nodes' shard files in the log folder, for every transport.

Bytes arrive as a continuation of what is already held (`append` at the current size) or as a whole shard that
replaced an older one (`replace`, after the owner compacted). Only complete lines are written, each write is
fsynced, and a line that says another node wrote it is refused: a transport must never let one node write as
another. Lines that are not JSON are kept (the fold skips and reports them, as in the owner's own copy).
This node's own shard is never written here: a lost one is not restored under the same node id (the store moves to a
new one, and the old shard comes back as another node's); another history of it is kept beside it (`add_branch`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
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
PIECE_BYTES = 1 << 20  # a whole copy is read back from its spool file this much at a time (plus at most one line)
SORTLESS_BYTES = 64 << 20  # copies whose seqs are out of order are compared in memory only up to this size


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


def check_lines(node: str, data: bytes, first: int = 1) -> int:
    """Refuse lines that name another writer than the file's, or are longer than any op can be (damage); returns how
    many lines there are (`first`: the number of the first one, for the message)."""
    count, writer_ = 0, writer_of(node)
    for number, line in enumerate(data.splitlines(), first):
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


def pieces(fh: IO[bytes], end: int | None = None, *, strict: bool = True, start: int = 0) -> Iterator[bytes]:
    """The complete lines of an open file from byte `start` (a line's start) up to byte `end` (its end: None), a
    piece of about PIECE_BYTES at a time, so no copy is ever held whole; an unfinished tail is left out. A line longer
    than any op is damage: `strict` refuses it (SyncRefused), otherwise it is skipped (a copy held here, compared)."""
    fh.seek(start)
    left = None if end is None else max(0, end - start)
    buf, at, skipping, ended = b"", start, False, left == 0  # `buf` starts at byte `at`
    while True:
        if not ended:
            block = fh.read(PIECE_BYTES if left is None else min(PIECE_BYTES, left))
            left = None if left is None else left - len(block)
            ended = not block or left == 0
            if skipping:  # inside an overlong line: up to its newline
                newline = block.find(b"\n") + 1
                if not newline:
                    at += len(block)
                    if ended:
                        return
                    continue
                skipping, at, block = False, at + newline, block[newline:]
            buf += block
        cut = buf.rfind(b"\n") + 1
        damage = overlong_at(buf[:cut])
        if damage < 0 and len(buf) - cut > MAX_LINE_BYTES:  # no op is this long, ended or not
            damage = cut
        if damage < 0:
            if cut:
                yield buf[:cut]
            at, buf = at + cut, buf[cut:]
            if ended:
                return
            continue
        if strict:
            raise SyncRefused(
                f"the line at byte {at + damage} is longer than any op ({MAX_LINE_BYTES} bytes): damage, not copied"
            )
        if damage:
            yield buf[:damage]
        newline = buf.find(b"\n", damage) + 1
        if newline:  # what follows the overlong line is looked at again
            at, buf = at + newline, buf[newline:]
        else:
            skipping, at, buf = True, at + len(buf), b""
            if ended:
                return


def _numbered(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(seq, line) of the readable lines that say their seq."""
    for line in lines:
        try:
            seq = json.loads(line).get("seq")
        except (ValueError, RecursionError, AttributeError):
            continue
        if type(seq) is int:
            yield seq, line


def _survey(lines: Iterable[bytes]) -> tuple[int, int, bool, int]:
    """(readable lines, last seq, whether the seqs never go down, bytes): one walk, nothing held."""
    count, last, ordered, size, previous = 0, 0, True, 0, None
    for seq, line in _numbered(lines):
        count, last, size = count + 1, max(last, seq), size + len(line)
        ordered = ordered and (previous is None or seq >= previous)
        previous = seq
    return count, last, ordered, size


def _last_per_seq(lines: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """(seq, line) in order, the last line of each seq (as a reader keeps it); the seqs must never go down."""
    held: tuple[int, bytes] | None = None
    for seq, line in _numbered(lines):
        if held is not None and seq != held[0]:
            yield held
        held = (seq, line)
    if held is not None:
        yield held


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


def _covered(newer: Iterable[tuple[int, bytes]], older: Iterable[tuple[int, bytes]], upto: int) -> bool:
    """Whether every line of the newer copy up to seq `upto` stands for the line the older copy holds there (both
    walked once, in seq order, side by side)."""
    olds = iter(older)
    old = next(olds, None)
    for seq, line in newer:
        if seq > upto:
            return True
        while old is not None and old[0] < seq:
            old = next(olds, None)
        if old is None or old[0] != seq or not _stands_for(line, old[1]):
            return False
    return True


Lines = Callable[[], Iterable[bytes]]  # each call walks a copy's complete lines again from its start


def classify_lines(held: Lines, got: Lines, *, own: bool = False) -> str:
    """What a whole copy `got` of a shard is to the copy `held` here (both complete lines, each walked line by line
    from a file read in pieces: a few walks, never a copy held whole): "replaces" (it continues ours, or is a
    compaction of it or of a continuation: every op it keeps up to our last seq is the very op we hold there, and it
    goes at least as far), "behind" (an older copy: a prefix of ours, or the shard before a compaction ours comes
    from: every op we hold up to its last seq is the very op it holds there) or "other" (another history of the node:
    two different ops at one position). `own`: this install writes the node, so nothing but itself replaces it (a
    copy that would is another history). Seqs that go down somewhere (no shard Hivenote writes has them) are compared
    in memory up to SORTLESS_BYTES; a bigger such copy is another history."""
    ours_count, last, ours_ordered, ours_size = _survey(held())
    theirs_count, theirs_last, theirs_ordered, theirs_size = _survey(got())
    if not ours_count:
        return ("other" if theirs_count else "behind") if own else "replaces"
    if ours_ordered and theirs_ordered:

        def covered(newer: Lines, older: Lines, upto: int) -> bool:
            return _covered(_last_per_seq(newer()), _last_per_seq(older()), upto)

    elif ours_size + theirs_size <= SORTLESS_BYTES:

        def covered(newer: Lines, older: Lines, upto: int) -> bool:
            olds = dict(_numbered(older()))
            news = sorted(dict(_numbered(newer())).items())
            return _covered(news, sorted(olds.items()), upto)

    else:
        return "other"
    if theirs_last <= last and covered(held, got, theirs_last):
        return "behind"  # the same ops as ours, or fewer: nothing to take (a compacted copy here stays)
    if not own and theirs_last >= last and covered(got, held, last):
        return "replaces"
    return "other"


def same_bytes(a: IO[bytes], b: IO[bytes], size: int) -> bool:
    """Whether two open files hold the same first `size` bytes (both at least that long), read a piece at a time."""
    a.seek(0)
    b.seek(0)
    while size > 0:
        want = min(PIECE_BYTES, size)
        x, y = a.read(want), b.read(want)
        if x != y or len(x) < want:
            return False
        size -= want
    return True


def spool_in(folder: Path | None) -> IO[bytes]:
    """An anonymous temp file (see `Replicas.spool`) in `folder` (made 0700 when missing; None: the system's temp
    folder)."""
    if folder is not None:
        folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    return tempfile.TemporaryFile(dir=folder, prefix=".", suffix=".tmp")


def branch_name(node: str, sha256_hex: str) -> str:
    """The shard name of another history of `node`, named by the SHA-256 of its bytes: every machine that keeps the
    same bytes names them alike, in the log folder or a synced one."""
    return f"{writer_of(node)}~{sha256_hex[:12]}"


def starts_with(whole: Iterable[bytes], prefix: Iterable[bytes]) -> bool:
    """Whether the bytes `prefix` yields (pieces of any size) are the first bytes of those `whole` yields, both walked
    once, side by side, a piece at a time: neither is ever held whole."""
    wholes, ahead = iter(whole), memoryview(b"")
    for piece in prefix:
        want = memoryview(piece)
        while want:
            if not ahead:
                ahead = memoryview(next(wholes, b""))
                if not ahead:
                    return False
            n = min(len(ahead), len(want))
            if ahead[:n] != want[:n]:
                return False
            ahead, want = ahead[n:], want[n:]
    return True


class Copy:
    """One open shard file up to byte `end`, read a piece at a time: its complete lines, a line longer than any op
    (damage) skipped; or no file at all (nothing held yet). For files another machine or a sync tool writes (the
    synced folder), compared and copied without ever holding one whole."""

    def __init__(self, fh: IO[bytes] | None, end: int) -> None:
        self.fh, self.end = fh, end

    def pieces(self, start: int = 0) -> Iterator[bytes]:
        if self.fh is not None:
            yield from pieces(self.fh, self.end, strict=False, start=start)

    def lines(self) -> Iterator[bytes]:
        for piece in self.pieces():
            yield from piece.splitlines()

    def size(self) -> int:
        return sum(len(piece) for piece in self.pieces())

    def digest(self) -> str:
        h = hashlib.sha256()
        for piece in self.pieces():
            h.update(piece)
        return h.hexdigest()


def lines_of(fh: IO[bytes], end: int | None, *, strict: bool) -> Lines:
    def walk() -> Iterator[bytes]:
        for piece in pieces(fh, end, strict=strict):
            yield from piece.splitlines()

    return walk


class Replicas:
    def __init__(self, log_dir: Path, own_node: str | Callable[[], str], spool_dir: Path | None = None) -> None:
        """`spool_dir`: where `spool` makes its anonymous files, never the log folder (a sync tool watches that): the
        data dir's own `cache` folder for a server or a command; None is the system's temp folder (tools, tests)."""
        self.log_dir, self.spool_dir = log_dir, spool_dir
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

    def spool(self) -> IO[bytes]:
        """A file a whole copy of a shard is written to as it arrives, so no transport holds one in memory
        (`settle_copy` takes it from there): in `spool_dir`, outside the log folder, so no sync tool ever sees it;
        without a name where the OS allows (Linux's O_TMPFILE; elsewhere a hidden 0600 file unlinked at once, or on
        Windows one deleted when closed), gone when closed."""
        return spool_in(self.spool_dir)

    def settle_copy(self, node: str, copy: IO[bytes]) -> str:
        """A whole copy of a shard that does not continue the one held (`classify_lines`): a compaction of ours replaces
        it (every op it keeps up to our last seq is the very op we hold, a `seq.keep` stand-in being the op it stands
        for, and it goes at least as far); an older copy than ours (a prefix, or the shard before a compaction ours
        comes from) is a peer or bucket being behind, for this install's own node too; anything else is another
        history of the node, kept beside ours as a branch, so both are folded and nothing held here or there is lost.
        Returns what was done: "replaced", "behind" or the branch's shard name. `copy` (an open file: `spool`) is
        read in pieces, a few times, never whole; a line in it longer than any op is damage (SyncRefused)."""
        end = copy.seek(0, os.SEEK_END)
        got = lines_of(copy, end, strict=True)
        try:
            held_fh: IO[bytes] = open(self.path(node), "rb")  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            found = classify_lines(lambda: (), got, own=same_node(node, self.own_node))
        else:
            with held_fh:  # read up to its size now: what is appended meanwhile comes by the next continuation
                held = lines_of(held_fh, held_fh.seek(0, os.SEEK_END), strict=False)
                found = classify_lines(held, got, own=same_node(node, self.own_node))
        if found == "replaces":
            self.replace_copy(node, copy)
            return "replaced"
        if found == "behind":
            return "behind"
        name = self.add_branch_copy(node, copy)
        log.warning("a copy of %s's shard is another history of it: kept as %s.jsonl", node, name)
        return name

    def add_branch_copy(self, node: str, copy: IO[bytes]) -> str:
        """Keep another history of a shard beside the one held (`<node>~<12 hex>.jsonl`, named by its bytes, so
        every machine that keeps the same bytes names them alike); returns the file's shard name."""
        end, named = copy.seek(0, os.SEEK_END), hashlib.sha256()
        for piece in pieces(copy, end):
            named.update(piece)
        name = branch_name(node, named.hexdigest())
        if self.size(name) == 0:
            self._write_copy(name, copy)
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

    def replace_copy(self, node: str, copy: IO[bytes]) -> None:
        """Put a whole shard (an open file, read in pieces) in place of the replica (the owner compacted it),
        atomically; never this machine's own shard."""
        if same_node(node, self.own_node):
            raise SyncRefused(f"{node} is this machine's own shard: only its writer replaces it")
        self._write_copy(node, copy)

    def _write_copy(self, node: str, copy: IO[bytes]) -> None:
        """Put the complete lines of `copy` in place of node's file, atomically, read and checked piece by piece."""
        path = self.path(node)
        end = copy.seek(0, os.SEEK_END)
        counted = 1
        for piece in pieces(copy, end):  # refused before anything is written, as a copy in memory was
            counted += check_lines(node, piece, counted)
        if path.is_symlink():  # a link planted in a synced folder: not a shard, whatever it points to
            raise SyncRefused(f"{path} is a symbolic link, not a shard; remove it to sync {node}")
        self.log_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        with self._lock(node):
            # A hidden temp file (never folded) with a random name, made exclusively (0600): never written through a
            # link planted in a synced folder; removed on failure. A link at `path` itself is replaced, not followed.
            write_whole(path, pieces(copy, end))
