"""What this machine holds of a synced log folder, kept where no sync tool reaches: `<data dir>/sync/held/<name>.jsonl`,
a private copy of the complete lines of every shard it has seen in the folder (OPLOG.md "Layout").

A sync tool carries a deletion, a truncation or an older copy put in place to every machine as faithfully as a new
line: without a copy of its own, one `rm` of a stopped machine's shard deleted that machine's history everywhere. So
the rule every machine keeps is: **as long as one machine holds an acknowledged op, nothing done to a file in the
folder loses it.** Each step compares every shard in the folder with the copy held here (`replica.classify_lines`):
- new or grown (a continuation of the copy held): the copy held takes the new complete lines;
- compacted by its owner (`classify_lines` says it replaces ours): the copy held is replaced, so a purged text does not
  outlive the compaction here either;
- missing, or behind the copy held (truncated, an older copy or a backup put in its place): put back from the copy
  held, once it has stayed so for `PUT_BACK_AFTER_S` (a running owner puts its own shard back from its open file
  first, and a sync tool's replace is over by then);
- another history of the node (two different ops at one position): the copy held is kept beside it as a branch,
  `<node>~<12 hex of its bytes>.jsonl`, as every transport does, and the copy held follows the folder's.
This machine's own shard is the store's (it puts it back from its open file, or moves to a new node id): it is only
copied here. Conflict copies are FolderWatch's to tidy (into a branch or away) and are not held.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ..storage.files import private_dir, write_whole
from ..storage.layout import Layout
from ..storage.shards import NO_FOLDER, is_shard_file
from .folderwatch import conflict_of
from .replica import Copy, SyncRefused, branch_name, classify_lines, complete_size, same_bytes

log = logging.getLogger(__name__)

HELD = "held"  # under <data dir>/sync/
PUT_BACK_AFTER_S = 3.0  # how long a shard stays missing or behind before this machine puts it back


class HeldCopies:
    """The copies held of one synced folder's shards; `step()` is cheap while nothing changed (a listing, a stat)."""

    def __init__(
        self,
        folder: Path,
        data_dir: Path,
        own: Callable[[], str],
        clock: Callable[[], float] = time.monotonic,
        put_back_after_s: float = PUT_BACK_AFTER_S,
    ) -> None:
        self.folder, self.dir, self.own, self.clock = folder, Layout(data_dir).sync / HELD, own, clock
        self.put_back_after_s = put_back_after_s
        self._seen: dict[str, tuple[int, int, int, int]] = {}  # name -> the folder file's stat when it matched ours
        self._since: dict[str, float] = {}  # name -> when it was first seen missing or behind
        self.done: list[str] = []  # what was put back or kept, for the status (latest last)
        self._made = False

    def _folder_names(self) -> set[str] | None:
        try:
            return {
                e.name
                for e in os.scandir(self.folder)
                if e.is_file(follow_symlinks=False) and is_shard_file(e.name) and conflict_of(e.name) is None
            }
        except NO_FOLDER:
            return None  # the folder itself is gone (unmounted): nothing is put back into nowhere

    def _held_names(self) -> set[str]:
        try:
            return {e.name for e in os.scandir(self.dir) if e.is_file() and is_shard_file(e.name)}
        except NO_FOLDER:
            return set()

    def step(self) -> list[str]:
        """Bring the copies held up to date and put back what the folder lost; returns what was put back or kept."""
        names = self._folder_names()
        if names is None:
            return []
        if not self._made:
            private_dir(self.dir.parent)
            private_dir(self.dir)
            self._made = True
        own = f"{self.own()}.jsonl"
        did: list[str] = []
        for name in sorted(names | self._held_names()):
            try:
                what = self._one(name, name in names, name == own)
            except (OSError, SyncRefused) as exc:  # a file that went away or cannot be read now: looked at again
                log.info("could not compare %s with the copy held: %s", name, exc)
                continue
            if what:
                did.append(what)
        self.done = (self.done + did)[-20:]
        return did

    def _stat(self, path: Path) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _one(self, name: str, present: bool, own: bool) -> str:
        """Both files are read a piece at a time (`replica.pieces`, compared by `same_bytes` and `classify_lines`),
        never whole: a shard of any size another machine puts in the folder costs a piece of memory. A line longer
        than any op in it is damage, skipped (the fold skips and reports it too): never held."""
        path, mine = self.folder / name, self.dir / name
        seen = self._stat(path) if present else None
        if seen is not None and seen == self._seen.get(name):
            self._since.pop(name, None)
            return ""  # unchanged since it last matched the copy held
        with contextlib.ExitStack() as stack:
            held_fh: IO[bytes] | None = None
            with contextlib.suppress(FileNotFoundError):
                held_fh = stack.enter_context(open(mine, "rb"))
            held_end = complete_size(mine) if held_fh is not None else 0
            held = Copy(held_fh, held_end)
            if seen is None:
                if not held_end or own:
                    return ""
                return self._lost(name, held, "was deleted")
            theirs_fh = stack.enter_context(open(path, "rb"))
            theirs = Copy(theirs_fh, os.fstat(theirs_fh.fileno()).st_size)
            if held_fh is None or same_bytes(held_fh, theirs_fh, held_end):  # it continues ours (byte for byte)
                self._hold(name, theirs, held_end)
                return self._matched(name, seen)
            found = classify_lines(held.lines, theirs.lines)
            if found == "replaces":  # compacted by its owner (or a copy held that was behind it)
                write_whole(mine, theirs.pieces())
                return self._matched(name, seen)
            if own:
                return ""  # the store's: it puts it back from its open file, or moves to a new node id
            if found == "behind":
                return self._lost(name, held, f"holds only {theirs.size()} of the {held_end} bytes held here")
            return self._forked(name, held, theirs, seen)

    def _matched(self, name: str, seen: tuple[int, int, int, int] | None) -> str:
        if seen is not None:
            self._seen[name] = seen
        self._since.pop(name, None)
        return ""

    def _hold(self, name: str, theirs: Copy, start: int) -> None:
        """The folder's copy continues ours: the copy held takes its new complete lines (appended, fsynced)."""
        mine, more = self.dir / name, theirs.pieces(start)
        first = next(more, b"")
        if not first:
            return  # nothing new
        if start == 0:
            write_whole(mine, itertools.chain([first], more))
            return
        fd = os.open(mine, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "ab") as fh:
            if fh.tell() != start:
                fh.truncate(start)
            fh.write(first)
            for piece in more:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())

    def _lost(self, name: str, held: Copy, how: str) -> str:
        """Missing or behind in the folder: put back from the copy held once it stayed so for a while."""
        now = self.clock()
        since = self._since.setdefault(name, now)
        if now - since < self.put_back_after_s:
            return ""
        write_whole(self.folder / name, held.pieces())
        self._since.pop(name, None)
        self._seen[name] = self._stat(self.folder / name) or (0, 0, 0, 0)
        log.warning(
            "%s in the synced folder %s: put back from the copy this machine holds (%d bytes)", name, how, held.end
        )
        return f"{name} {how}: put back ({held.end} bytes)"

    def _forked(self, name: str, held: Copy, theirs: Copy, seen: tuple[int, int, int, int]) -> str:
        """Another history in place of the copy held: ours is kept beside it as a branch, and held follows theirs."""
        now = self.clock()
        since = self._since.setdefault(name, now)
        if now - since < self.put_back_after_s:
            return ""
        branch = f"{branch_name(name.removesuffix('.jsonl'), held.digest())}.jsonl"
        if not (self.folder / branch).exists():
            write_whole(self.folder / branch, held.pieces())  # held here too from the next step, like any new shard
        write_whole(self.dir / name, theirs.pieces())
        self._matched(name, seen)
        log.warning("%s in the synced folder is another history than the copy held here: ours kept as %s", name, branch)
        return f"{name} is another history: the copy held here kept as {branch}"
