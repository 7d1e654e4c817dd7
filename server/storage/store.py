"""The store: this node's writer and the reader of every shard in the log folder (OPLOG.md).

It owns this node's shard (identity.py has the node id and the one-writer lock), appends ops with flush + fsync
before acknowledging (group commit when writers wait), repairs its own torn tail, follows every shard in
`log/` (shards.py), and compacts its own shard atomically. Other nodes' shards are written by sync/replica.py
(every transport) and served to peers by sync/routes.py; nothing else writes in the log folder.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ReadOnlyStore, ShardLocked, StoreError, StoreWriteFailed
from ..core.fold import State
from ..core.hlc import Clock, wall_ms
from ..core.model import Author, CorruptLine, Op, decode_op
from ..core.search import carry_index
from . import opcache
from .files import PRIVATE_DIR, fsync_dir, private_dir, temp_beside, write_all, write_whole
from .gcpause import collector_paused
from .identity import (
    ShardClaim,
    claim_node,
    confirm_own,
    host_fingerprint,
    lock_holder,
    make_data_dir,
    previous_nodes,
    read_node,
    record_shard,
    succeed,
)
from .layout import Layout
from .ownshard import (
    DiskProblem,
    OwnShard,
    cannot_start,
    cut_torn_tail,
    disk_writable,
    lacks_space,
    log_missing,
    problem_from,
    write_refused,
)
from .shards import BadLine, ShardHealth, Shards, is_shard_file

__all__ = [
    "BadLine",
    "Decide",
    "DiskProblem",
    "Payload",
    "ReadOnlyStore",
    "ShardHealth",
    "ShardLocked",
    "Store",
    "StoreError",
    "StoreWriteFailed",
    "fsync_dir",
    "is_shard_file",
    "lock_holder",
]

log = logging.getLogger(__name__)

Payload = tuple[str, dict[str, Any]]  # (op kind, payload) as decided by the notebook/graph use-cases
Decide = Callable[[State], list[Payload]]
# (op kind, payload, when it happened in ms or None for now, who did it): an import's ops, which keep the export's
# times and authors (`Store.write_dated`)
Dated = tuple[str, dict[str, Any], int | None, Author]
DecideDated = Callable[[State], list[Dated]]

# Problems no probe can see clear (an I/O error, an unknown one): the next write simply tries. Writes wait for
# `watch` to clear the others, so a full disk refuses at once instead of failing and re-folding every time.
RETRIED_PROBLEMS = ("io_error", "write_failed")
SEARCH_INDEX = "search.bin"  # in cache/: the warm search index, for the next start (storage/searchcache.py)
CACHE_MIN_NEW_OPS = 1000  # closing saves the op cache when at least this many ops are not in it yet


MAX_INCIDENTS = 20


@dataclass(frozen=True)
class Incident:
    """Something that happened to this install's identity, for a person: when, and what it means."""

    at: int
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "message": self.message}


class Store:
    """One data dir: this node's shard (writer) plus every other shard in `log/` (followed)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        readonly: bool = False,
        now_ms: Callable[[], int] = wall_ms,
        fingerprint: Callable[[], str] = host_fingerprint,
        max_clock_offset_ms: int | None = None,
        lock_timeout: float = 0,
        log_dir: Path | Callable[[], Path] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        # A synced folder, maybe. A callable is asked again once the writer holds the lock: `hivenote sync folder`
        # may have moved the log while this process waited for it.
        self._log_dir_source = log_dir if callable(log_dir) else None
        resolved = log_dir() if callable(log_dir) else log_dir
        self.log_dir = Path(resolved) if resolved is not None else Layout(self.data_dir).log
        self.readonly = readonly
        self.now_ms = now_ms
        self.clock = Clock(now_ms) if max_clock_offset_ms is None else Clock(now_ms, max_clock_offset_ms)
        self.state = State()
        self.lock = threading.RLock()  # guards state, shard cursors and the pending queue
        self._flush_lock = threading.Lock()  # one fsync at a time; waiters pile up behind it (group commit)
        self.cache_path = Layout(self.data_dir).cache / "oplog.bin"
        self._cache_spent = False  # compacted: this process's journals must not become the op cache
        self.shards = Shards(self.log_dir, self.state, self.clock, {})
        self._pending: list[bytes] = []
        self._pending_ops: list[Op] = []
        self._enqueued = 0
        self._durable = 0
        self._failed: list[tuple[int, int, str]] = []
        self._own: OwnShard | None = None
        self._opening = False  # a writer that opened on a full disk, waiting for room to finish opening
        self._claimed = False  # the writer's claim is done: the shard lock held and the node id proven (confirm_own)
        self._seq = 0
        self._acked_seq = 0  # the last seq fsynced to the own shard
        self.problem: DiskProblem | None = None  # why writes fail right now (status, dashboard, tray)
        self.repaired_tail_bytes = 0
        self.fsyncs = 0  # group commits so far (status and tests)
        self.fingerprint = fingerprint
        self.incidents: list[Incident] = []  # what happened to this install's identity (status, tray, doctor)
        try:
            self.node = read_node(self.data_dir) if readonly else claim_node(self.data_dir, fingerprint(), now_ms())
        except OSError as exc:
            raise cannot_start(exc, self.data_dir) from exc
        self.shard_path = self.log_dir / f"{self.node}.jsonl" if self.node else None
        self._claim = ShardClaim(self.data_dir, self.node, lock_timeout)

    # -- identity and lifecycle ---------------------------------------------------------------------

    def open(self) -> Store:
        """Take the shard lock (writer), fold every shard, repair this node's torn tail. Returns self.

        A writer that finds the disk full (it records its claim on the shard in node.json at start) opens anyway,
        read-only for now, with a `disk_full` problem: reads work, writes say why they are refused, and `watch` (or
        the next write) finishes opening once there is room again."""
        full: OSError | None = None
        if not self.readonly:
            try:
                self._claim_writer()
            except BaseException as exc:
                if not (isinstance(exc, OSError) and lacks_space(exc)):
                    self._claim.release()
                    if isinstance(exc, OSError):
                        raise cannot_start(exc, Path(exc.filename).parent if exc.filename else self.data_dir) from exc
                    raise
                full = exc
        self.clock.own_nodes = {self.node, *previous_nodes(self.data_dir)}
        self._fold_all()
        self._own_readable()
        if not self.readonly:
            if full is None:
                try:
                    self._open_own()
                except OSError as exc:
                    if not lacks_space(exc):
                        self._claim.release()
                        raise cannot_start(exc, self.log_dir) from exc
                    full = exc
            if full is not None:
                self._wait_for_room(full)
            else:
                self._check_own_history()  # another file in the log already holds ops of this node it did not write?
        return self

    def _own_readable(self) -> None:
        """Another node's shard that cannot be read is skipped and reported (shards.py); this node's own cannot be: its
        history is what the notebook here is, and a writer that did not read it would fork it. So the store does not
        open: the error is the one reading it gave, which the commands and the tray turn into which file and how to
        fix it, as before that rule."""
        if self.shard_path is None:
            return
        mine = self.shards.cursors.get(self.shard_path.name)
        if mine is not None and mine.health.unreadable:
            self._claim.release()
            raise PermissionError(errno.EACCES, mine.health.unreadable, str(self.shard_path))

    def _open_own(self) -> None:
        """Open the own shard for appending (after the claim and a fold) and record the claim on it."""
        assert self.shard_path is not None
        mine = self.shards.cursors.get(self.shard_path.name)
        ends = mine is not None and len(mine.source) > mine.start
        self._seq = mine.source.seqs[-1] if mine is not None and ends else 0  # the last seq in its own file
        own = OwnShard(self.shard_path)
        try:
            record_shard(self.data_dir, self.node, self.shard_path, own.size)
        except BaseException:
            own.close()
            raise
        self._own = own

    def _wait_for_room(self, exc: OSError) -> None:
        """The disk was full as the writer opened: stay open for reading and say so (`_finish_opening` tries again).
        The shard lock stays held when it was taken, so no second writer starts meanwhile."""
        self._opening = True
        self.problem = DiskProblem(
            "disk_full",
            f"The disk holding {self.data_dir} is full, so Hivenote started read-only: reading and search work, new "
            "notes are refused and nothing already saved is lost. Free some space; Hivenote starts writing by itself.",
            self.now_ms(),
        )
        log.error("%s (%s)", self.problem.message, exc)

    def _finish_opening(self) -> bool:
        """Open the writer now if the disk has room again (called by `watch` under the flush and store locks).
        Returns whether it did."""
        if not disk_writable(self.data_dir):
            return False
        try:
            if not self._claimed or self._claim.stale():
                self._claim.release()
                self._claim_writer()
            self.state = State()  # the claim may have moved this install to a new node id: fold again
            self._fold_all()
            self._open_own()
        except ShardLocked as exc:
            self.problem = DiskProblem("lock_lost", f"{exc} It started while this one waited for room.", self.now_ms())
            return False
        except OSError as exc:
            if not lacks_space(exc):
                log.error("the writer still cannot open: %s", exc)
            return False
        self._opening = False
        self.problem = None
        log.info("the disk holding %s has room again: the notebook takes writes from now on", self.data_dir)
        return True

    def _claim_writer(self) -> None:
        self._claimed = False
        make_data_dir(self.data_dir)
        private_dir(Layout(self.data_dir).log)  # the lock stays here when log_dir is shared
        self._claim.acquire()
        if self._log_dir_source is not None:
            self.log_dir = Path(self._log_dir_source())
        self.log_dir.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)  # a synced folder keeps its own mode
        self.shard_path = self.log_dir / f"{self.node}.jsonl"
        node, why = confirm_own(self.data_dir, self.node, self.shard_path, self.fingerprint(), self.now_ms())
        if node != self.node:
            self._switch_claim(node)
            self._incident(f"{why}: this machine now writes as {node}; {self.shard_path.name} stays a read-only copy")
            self.node, self.shard_path = node, self.log_dir / f"{node}.jsonl"
        self.clock.own_nodes.add(self.node)
        self._repair_own_tail()
        self._claimed = True

    def _switch_claim(self, node: str) -> None:
        """Hold the lock of `node` (a fresh id nobody else holds) instead of the current one."""
        claim = ShardClaim(self.data_dir, node, self._claim.timeout)
        claim.acquire()
        self._claim.release()
        self._claim = claim

    def _incident(self, message: str) -> None:
        log.warning("%s", message)
        self.incidents.append(Incident(self.now_ms(), message))
        del self.incidents[:-MAX_INCIDENTS]

    def close(self) -> None:
        if self._own is not None and self._own.missing():
            with contextlib.suppress(StoreWriteFailed):
                self.watch()  # a last chance to put the own shard back before its handle closes
        if self.shards.uncached >= CACHE_MIN_NEW_OPS:
            self.checkpoint()
        with self._flush_lock, self.lock:
            if self._own is not None:
                if self._own.missing():
                    self._rescue()
                elif self.shard_path is not None:
                    with contextlib.suppress(OSError):
                        record_shard(self.data_dir, self.node, self.shard_path, self._own.size)
                self._own.close()
                self._own = None
            self._claim.release()

    @property
    def cached_ops(self) -> int:
        """Ops taken from the op cache at open instead of parsed from the log."""
        return self.shards.cached_ops

    def __enter__(self) -> Store:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _repair_own_tail(self) -> None:
        """A last line without `\\n` was never acknowledged (torn write): cut it before appending again."""
        assert self.shard_path is not None
        self.repaired_tail_bytes = cut_torn_tail(self.shard_path)
        if self.repaired_tail_bytes:
            log.warning("repaired a torn last line in %s (%d bytes)", self.shard_path.name, self.repaired_tail_bytes)

    # -- reading ------------------------------------------------------------------------------------

    def refresh(self, *, include_own: bool = False) -> int:
        """Fold whatever appeared in `log/` since the last call. Returns the number of new ops applied."""
        names = self.shards.names()
        own = self.shard_path.name if self.shard_path else None
        applied = 0
        for name in names:
            if name == own and not include_own and not self.readonly:
                continue  # we wrote everything in it
            with self.lock:
                applied += self.shards.follow(name)
        with self.lock:
            self.shards.forget_missing(names)
        if applied and not self.readonly and self._own is not None:
            self._check_own_history()
        return applied

    def _check_own_history(self) -> None:
        """Another file in the log holds ops of this node that this install did not write (a copied data dir or a
        cloned machine writing as the same node, seen through a sync tool's copy, a peer or the bucket): never
        append another `seq` of it. Both histories are folded; this install goes on under a new node id."""
        with self.lock:
            stats = self.state.nodes.get(self.node)
            fork = self.state.forks.get(self.node)
            if fork is None and (stats is None or stats.max_seq <= self._seq):
                return
        what = (
            f"two different histories of {self.node} exist from seq {fork.first_seq}"
            if fork is not None
            else f"another writer added seq {self._seq + 1}.. of {self.node}"
        )
        self.reincarnate(f"{what} (a copied data dir or a cloned machine writes as this node)")

    def reincarnate(self, why: str) -> str:
        """Stop writing as the current node id and go on as a fresh one. Nothing held is lost: the old shard stays in
        the log as a read-only copy (other machines holding another history of it keep this one as a branch), and if
        another file took its place, this install's bytes are kept beside it as `<node>~<digest>.jsonl`, folded and
        synced like any shard. Returns the new node id."""
        with self._flush_lock, self.lock:
            own, old = self._own, self.node
            if own is None or self.shard_path is None:
                raise ReadOnlyStore("only the writer has a node id to change")
            if self._durable < self._enqueued:  # ops of the old id decided but not written yet: into its shard first
                self._write_pending()
            if own.missing() and own.size:  # another file took its place: this install's bytes live on beside it
                branch = self.log_dir / f"{old}~{own.digest()[:12]}.jsonl"
                if not branch.exists():
                    own.copy_to(branch)  # through a temp file made exclusively, fsynced and renamed
            node = succeed(self.data_dir, self.fingerprint(), self.now_ms(), why)
            self.clock.own_nodes.add(node)
            self._switch_claim(node)
            own.close()
            self.node, self.shard_path = node, self.log_dir / f"{node}.jsonl"
            self._own = OwnShard(self.shard_path)
            record_shard(self.data_dir, node, self.shard_path)
            self._seq = self._acked_seq = 0
            self.shards.cursors.pop(f"{old}.jsonl", None)  # followed from now on like any other node's shard
            self._incident(f"{why}: this machine now writes as {node}; every note on both sides is kept")
            return node

    def health(self) -> dict[str, ShardHealth]:
        with self.lock:
            return self.shards.health()

    def checkpoint(self) -> None:
        """Save the op cache so the next start skips parsing what was read so far (best effort: derived data)."""
        if self._cache_spent:
            return
        with self._flush_lock, self.lock:
            try:
                opcache.save(self.cache_path, self.shards.cache_entries())
            except OSError as exc:
                log.info("op cache not saved (%s); the next start reads the log in full", exc)
                return
            self.shards.uncached = 0

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
        return self.write_dated(lambda state: [(kind, data, None, by) for kind, data in decide(state)])

    def write_dated(self, decide: DecideDated) -> list[Op]:
        """`write` of ops that each say when they happened and who did them: an import of a notebook export, whose
        notes keep their recorded times and authors. An op with a time is stamped `[time, 0]` (never ahead of this
        machine's clock), before the ops made after it, as the write it records was (OPLOG.md "One line = one op");
        one without (None) is stamped by the clock like any write."""
        if self._opening:  # opened on a full disk: room again?
            self.watch()
            if self._opening and self.problem is not None:
                raise StoreWriteFailed(f"Nothing was saved: {self.problem.message}")
        if self.readonly or self._own is None:
            if self.problem is not None:  # a reader serving in the writer's stead (the tray on an unwritable dir)
                raise ReadOnlyStore(f"Nothing was saved: {self.problem.message}")
            raise ReadOnlyStore("this store is open read-only; open it as the writer to change the notebook")
        if self._own.missing() or (self.problem is not None and self.problem.kind not in RETRIED_PROBLEMS):
            self.watch()  # puts the shard back or clears the problem, or raises: nothing is decided then
            if self.problem is not None and self.problem.kind not in RETRIED_PROBLEMS:
                raise StoreWriteFailed(f"Nothing was saved: {self.problem.message}")
        with self.lock:
            dated = decide(self.state)
            if not dated:
                return []
            ops = []
            for offset, (kind, data, when, by) in enumerate(dated, start=1):
                if when is None:
                    wall, counter = self.clock.tick()
                else:
                    wall, counter = max(0, min(when, self.now_ms())), 0
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
                self._write_pending()
            failure = self._failed_ticket(ticket)
            if failure:
                raise StoreWriteFailed(f"Nothing was saved: {failure}")

    def _write_pending(self) -> None:
        """Append and fsync every op enqueued so far (the caller holds the flush lock)."""
        with self.lock:
            batch = b"".join(self._pending)
            batch_ops = self._pending_ops
            self._pending.clear()
            self._pending_ops = []
            upto = self._enqueued
        own = self._own
        assert own is not None and self.shard_path is not None
        try:
            own.append(batch)
        except OSError as exc:
            self._roll_back(exc)
        else:
            self.fsyncs += 1
            self._durable = upto
            self._acked_seq = max(self._acked_seq, batch_ops[-1].seq) if batch_ops else self._acked_seq
            with self.lock:
                self.shards.wrote(self.shard_path.name, own.fileno(), batch, batch_ops)
            if self.problem is not None:
                log.info("writing the notebook log works again")
                self.problem = None

    def _failed_ticket(self, ticket: int) -> str | None:
        for lo, hi, reason in self._failed:
            if lo <= ticket <= hi:
                return reason
        return None

    def _roll_back(self, exc: OSError) -> None:
        """A failed write acknowledged nothing: cut the shard back and re-fold from what is durable."""
        assert self._own is not None
        self.problem = problem_from(exc, self.log_dir, self.now_ms())
        log.error("%s", self.problem.message)
        with self.lock:
            self._failed.append((self._durable + 1, self._enqueued, self.problem.message))
            self._pending.clear()
            self._pending_ops = []
            self._durable = self._enqueued
            self._own.cut_back()
            self._reload()

    def _fold_all(self) -> None:
        """Fold every shard into the state (the op cache spares re-parsing what it holds)."""
        with collector_paused():  # the fold keeps an object or more for every op
            self.shards = Shards(self.log_dir, self.state, self.clock, opcache.load(self.cache_path))
            self.refresh(include_own=True)

    def _reload(self) -> None:
        """Fold again from the files after a failed write (the state holds ops that were never acknowledged). The
        search index goes over for the notes whose ops are the same."""
        old, self.state = self.state, State()
        self._fold_all()
        stats = self.state.nodes.get(self.node)
        self._seq = max(stats.max_seq if stats else 0, self._acked_seq)  # never reuse an acknowledged seq
        with collector_paused():
            carry_index(old, self.state)

    # -- the disk under a running server ------------------------------------------------------------

    def watch(self) -> None:
        """Keep the log where it belongs while running (the follow loop calls this twice a second): lock again and
        put the own shard back from its open handle if the log folder was deleted; clear a disk problem once the
        disk takes writes again, and finish opening a writer that started on a full disk. Raises StoreWriteFailed while
        the log folder cannot be recreated."""
        if self._opening and not self.readonly:
            with self._flush_lock, self.lock:
                opened = self._opening and self._finish_opening()
            if opened:
                self._check_own_history()
            return
        if self.readonly or self._own is None:
            return
        if self.problem is None and not self._claim.stale() and not self._own.missing():
            return  # the usual case, without taking the locks writers need
        if self._own.missing() and self._own.path_holds() == "other":
            assert self.shard_path is not None
            self.reincarnate(
                f"{self.shard_path.name} was replaced by another history of {self.node} (a sync tool brought the "
                "shard of another install writing as this node: a copied data dir or a cloned machine)"
            )
            return
        with self._flush_lock, self.lock:
            own = self._own
            if own is None:
                return
            if self.log_dir == Layout(self.data_dir).log or self._claim.stale():
                with contextlib.suppress(OSError):  # deleted under us: made again for this user only (the lock's too)
                    make_data_dir(self.data_dir)
                    private_dir(Layout(self.data_dir).log)
            try:
                self._claim.renew()
            except ShardLocked as exc:
                self.problem = DiskProblem(
                    "lock_lost",
                    f"{exc} It took this data dir while its log folder was missing: quit one of them.",
                    self.now_ms(),
                )
                raise StoreWriteFailed(f"Nothing was saved: {self.problem.message}") from None
            except OSError:
                pass  # the data dir itself is gone or unwritable: the shard check below says so
            if own.missing():
                try:
                    if self.log_dir == Layout(self.data_dir).log:  # ours, even if the whole data dir was deleted
                        make_data_dir(self.data_dir)
                        private_dir(self.log_dir)
                    elif self.log_dir.parent.is_dir():  # a synced folder: not where its drive is unplugged
                        self.log_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
                    if own.path_holds() == "same":
                        own.adopt()  # a sync tool wrote the very same bytes anew: append to that file from now on
                    else:
                        own.put_back()
                    record_shard(self.data_dir, self.node, own.path, own.size)
                except OSError:
                    if self.problem is None or self.problem.kind != "log_missing":
                        self.problem = log_missing(self.log_dir, self.now_ms())
                        log.error("%s", self.problem.message)
                    raise StoreWriteFailed(f"Nothing was saved: {self.problem.message}") from None
                self.problem = None
            elif self.problem is not None and (
                self.problem.kind == "lock_lost"
                or (self.problem.kind not in RETRIED_PROBLEMS and own.writable() and disk_writable(self.log_dir))
            ):
                log.info("the log folder %s takes writes again", self.log_dir)
                self.problem = None

    def _rescue(self) -> None:
        """Closing while the log folder is still gone: the own shard's bytes go to the data dir rather than away."""
        assert self._own is not None
        rescued = Layout(self.data_dir).rescued / f"{self.node}.jsonl"
        try:
            make_data_dir(self.data_dir)
            private_dir(rescued.parent)
            self._own.copy_to(rescued)  # a temp file made exclusively, renamed: never through a link at its name
        except OSError as exc:
            log.error(
                "closing with %s missing, and it could not be saved to %s either: %s", self.shard_path, rescued, exc
            )
            return
        log.error(
            "closing with the log folder %s still missing: this machine's shard was saved to %s; put it back in the "
            "log folder (as %s) before starting Hivenote again",
            self.log_dir,
            rescued,
            rescued.name,
        )

    # -- compaction ---------------------------------------------------------------------------------

    def compact(self) -> tuple[int, int]:
        """Rewrite this node's shard keeping only ops that still decide something; returns (before, after) lines.

        Refuses (and changes nothing) unless a fresh fold of the compacted shard plus every other shard
        equals the current state.
        """
        if self.readonly or self._own is None or self.shard_path is None:
            raise ReadOnlyStore("compaction needs the writer; stop the running Hivenote or use it to compact")
        from ..core.compaction import lines_to_keep  # local: only compaction needs it

        with self._flush_lock, self.lock:
            self.refresh()
            raw = self.shard_path.read_bytes()
            lines = raw.split(b"\n")[:-1]
            kept = lines_to_keep(lines, self.state, self.node)
            blob = b"".join(line + b"\n" for line in kept)
            with contextlib.ExitStack() as cleanup:  # the temp file is removed whatever happens below
                try:  # a random name made exclusively: never through a link planted in a synced log folder
                    fd, tmp = cleanup.enter_context(temp_beside(self.shard_path))
                    write_all(fd, blob)
                    os.fsync(fd)
                except OSError as exc:
                    raise write_refused(exc, "the compacted shard", self.shard_path) from None
                check = State()
                for line in kept:
                    with contextlib.suppress(CorruptLine):
                        check.apply(decode_op(line))
                for name, cur in self.shards.cursors.items():
                    if name != self.shard_path.name:
                        with open(cur.path, "rb") as other:
                            for line in other.read(cur.offset).split(b"\n"):
                                if line.strip():
                                    with contextlib.suppress(CorruptLine):
                                        check.apply(decode_op(line))
                if check.snapshot() != self.state.snapshot():
                    raise StoreError("compaction would change the notebook; the shard was left as it was")
                self._own.close()
                os.replace(tmp, self.shard_path)
            fsync_dir(self.log_dir)
            self._own = OwnShard(self.shard_path)
            record_shard(self.data_dir, self.node, self.shard_path, self._own.size)
            self.shards.cursors.pop(self.shard_path.name, None)
            self.shards.follow(self.shard_path.name)
            self._scrub_branches()
        self._drop_derived_text()
        return len(lines), len(kept)

    def _scrub_branches(self) -> None:
        """Every branch held here (another history of a node, `<node>~<hex>.jsonl`: nobody's own shard, so never
        compacted by an owner) loses the lines of notes purged since (`without_purged`), so a purge is the end of the
        note's text in every file here; a copy held elsewhere takes the result as a compaction of its own. Under the
        store's lock, in compaction: the fold is unchanged (only ops a purge masks go)."""
        from ..core.compaction import without_purged  # local: only compaction needs it

        for path in sorted(self.log_dir.glob("*~*.jsonl")):
            if path.name.startswith(".") or not is_shard_file(path.name):
                continue
            try:
                raw = path.read_bytes()
            except OSError as exc:
                log.info("branch %s not scrubbed of purged notes now: %s", path.name, exc)
                continue
            whole = raw[: raw.rfind(b"\n") + 1]
            kept = without_purged(whole.split(b"\n")[:-1], self.state)
            if kept is None:
                continue
            try:
                write_whole(path, [b"".join(line + b"\n" for line in kept)])
            except OSError as exc:
                log.warning("branch %s still holds the text of a purged note: %s", path.name, exc)
                continue
            self.shards.cursors.pop(path.name, None)
            self.shards.follow(path.name)
            log.info("the text of purged notes dropped from the branch %s", path.name)

    def _drop_derived_text(self) -> None:
        """After a compaction: the derived files that hold note text (the op cache, every op's payload; the search
        texts, every note's text) are removed, so a purged note's text does not outlive its compaction in them (they
        were rewritten only at the next save, which may be months away). This process saves no op cache any more:
        its journals hold the shard as read before the compaction and again after it, and a cache made from them
        gave the next start notes whose fields were released values (the export failed on them). The next start
        reads the log and makes the cache anew."""
        self._cache_spent = True
        for name in (self.cache_path.name, SEARCH_INDEX):
            with contextlib.suppress(OSError):
                (Layout(self.data_dir).cache / name).unlink(missing_ok=True)
