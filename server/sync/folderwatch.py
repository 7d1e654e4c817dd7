"""The synced folder's health, told honestly: a sync tool gives no answer back, so each machine leaves a receipt in
the folder (`hivenote-receipts/<node>.json`: how much of every shard it holds, and when) and reads the others'.

- What this machine wrote is confirmed when another machine's receipt holds all of it. When nothing confirms it
  for a minute (settings.extra["folder_quiet_s"]), the folder transport fails with what that means: the sync tool
  is not running, or the other machines sync another folder, or there are none yet.
- A sync tool's conflict copies (`<node>.sync-conflict-....jsonl`, `<node> (... conflicted copy ...).jsonl`) are
  read like any shard; then tidied: one that the node's shard (or a branch of it) already holds is deleted (an older
  copy, or the shard as it was before a compaction: `replica.classify_lines`); one ahead of the node's shard here (a
  continuation or a compaction of it, delivered before the shard's own lines, or the shard not here yet) is the same
  history and stays until the shard holds all of it; another history (two different ops at one position) becomes
  `<node>~<12 hex of its bytes>.jsonl` (named by its bytes, so every machine tidies it alike).
- The receipt that answers a write measures the other machine's clock (its `at` against the round trip), so a machine
  whose clock is wrong is told on itself with a synced folder too, as with peers and a bucket.
Receipts live in a subfolder: the fold reads only `*.jsonl` files at the top of the log folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.hlc import wall_ms
from ..storage.files import write_whole
from ..storage.shards import NO_FOLDER, is_shard_file
from ..storage.statefile import write_json
from .replica import CONFLICT, Copy, SyncRefused, classify_lines, complete_size, starts_with, writer_of

log = logging.getLogger(__name__)

RECEIPTS = "hivenote-receipts"
QUIET_MS = 60_000
ROUND_TRIP_MS = 30_000  # a write answered by a receipt within this measures the other machine's clock
# A receipt holds a node name, a time and one size per shard file in the folder (about 60 bytes each): 1 MiB is some
# 15,000 shards, more than any folder of machines makes. A bigger one is not a receipt Hivenote wrote: refused and
# reported without being read, so a file anyone who can write the folder puts there costs no memory.
RECEIPT_MAX_BYTES = 1 << 20
DROPBOX = " ("  # "laptop-7f3a (Ann's conflicted copy 2026-12-01).jsonl"


def conflict_of(name: str) -> str | None:
    """The node whose shard a sync tool's conflict copy `name` copies, or None when it is not one."""
    stem = name.removesuffix(".jsonl")
    if CONFLICT in stem:
        return writer_of(stem)
    if DROPBOX in stem and "conflicted copy" in stem:
        return stem.split(DROPBOX, 1)[0]
    return None


@dataclass
class Health:
    failing: bool
    message: str
    detail: dict[str, Any] = field(default_factory=dict)


class FolderWatch:
    """One machine's view of the synced log folder; `step()` is cheap (a directory listing and small files)."""

    def __init__(
        self, log_dir: Path, node: Callable[[], str], now_ms: Callable[[], int] = wall_ms, quiet_ms: int = QUIET_MS
    ) -> None:
        self.log_dir, self.node, self.now_ms, self.quiet_ms = log_dir, node, now_ms, quiet_ms
        self.own_grew_at: int | None = None  # wall ms this machine's shard last grew
        self._own_size = -1
        self._receipt: dict[str, int] | None = None
        self.tidied: list[str] = []
        # Each other machine's clock minus ours, measured by the receipt that first held what this machine wrote
        # (`_measure`); the store's clock takes them as peers' and the bucket's HTTP Date.
        self.offsets: dict[str, int] = {}
        self._answered: dict[str, int] = {}  # node -> how much of our shard its receipt held when last read
        self.refused: dict[str, str] = {}  # a receipt or a shard file not read now -> why (the status's detail)

    def _sizes(self) -> dict[str, int]:
        try:
            names = [e.name for e in os.scandir(self.log_dir) if e.is_file() and is_shard_file(e.name)]
        except NO_FOLDER:
            return {}
        sizes = {}
        for name in sorted(names):
            try:
                sizes[name] = complete_size(self.log_dir / name)
            except SyncRefused as exc:  # an unfinished line longer than any op at its end: damage, never scanned
                self._refuse(name, f"{exc}; this machine's receipt leaves it out until it ends in a newline")
            else:
                self.refused.pop(name, None)
        return sizes

    def _refuse(self, name: str, why: str) -> None:
        if self.refused.get(name) != why:
            log.warning("%s in the synced folder %s: %s", name, self.log_dir, why)
        self.refused[name] = why

    def step(self) -> Health:
        now, node = self.now_ms(), self.node()
        self._tidy()
        sizes = self._sizes()
        own = f"{node}.jsonl"
        if sizes.get(own, 0) != self._own_size:
            if sizes.get(own, 0) > max(self._own_size, 0):  # grew, or held writes when first looked at
                self.own_grew_at = now
            self._own_size = sizes.get(own, 0)
        self._leave_receipt(node, sizes, now)
        others = self._receipts(node)
        detail: dict[str, Any] = {
            "machines": {r["node"]: r["at"] for r in others},
            "tidied": list(self.tidied),
        }
        if self.refused:
            detail["refused"] = [f"{name}: {why}" for name, why in sorted(self.refused.items())]
        held = sizes.get(own, 0)
        self._measure(others, own, held, now)
        confirmed = [r["node"] for r in others if int(r["seen"].get(own, 0)) >= held]
        detail["confirmed_by"] = confirmed
        waiting = self.own_grew_at is not None and now - self.own_grew_at > self.quiet_ms
        if held and waiting and not confirmed:
            seconds = (now - self.own_grew_at) // 1000 if self.own_grew_at else 0
            if not others:
                why = (
                    f"no other machine has read {self.log_dir} yet: this machine wrote {seconds} s ago and no "
                    "receipt came back. Check that the sync tool runs here and on the other machines, and that "
                    "they sync this very folder (hivenote sync status on each shows its folder)"
                )
            else:
                last = max(others, key=lambda r: r["at"])
                why = (
                    f"no other machine has received what this machine wrote {seconds} s ago (the latest receipt, "
                    f"from {last['node']}, is {max(0, now - last['at']) // 1000} s old). Check that the sync tool runs "
                    "here and on the other machines"
                )
            return Health(True, why, detail)
        return Health(False, "", detail)

    # -- receipts -----------------------------------------------------------------------------------

    def _measure(self, others: list[dict[str, Any]], own: str, held: int, now: int) -> None:
        """A receipt that holds, for the first time, all this machine wrote was written between that write and now:
        its `at` (by the other machine's clock) minus the middle of that round trip (by ours) is how far its clock is
        from ours, within half the round trip. A round trip over ROUND_TRIP_MS (a sync tool paused) is not taken."""
        for receipt in others:
            node = receipt["node"]
            with contextlib.suppress(TypeError, ValueError):
                holds = int(receipt["seen"].get(own, 0))
                before, self._answered[node] = self._answered.get(node), holds
                grew = self.own_grew_at
                if before is None or holds <= before or holds < held or grew is None or now - grew > ROUND_TRIP_MS:
                    continue
                self.offsets[node] = receipt["at"] - (grew + now) // 2

    def _leave_receipt(self, node: str, sizes: dict[str, int], now: int) -> None:
        if sizes == self._receipt:
            return
        folder = self.log_dir / RECEIPTS
        with contextlib.suppress(OSError):
            folder.mkdir(mode=0o700, exist_ok=True)
            write_json(folder / f"{node}.json", {"v": 1, "node": node, "at": now, "seen": sizes}, mode=0o600)
            self._receipt = dict(sizes)

    def _receipts(self, node: str) -> list[dict[str, Any]]:
        found = []
        try:
            paths = sorted((self.log_dir / RECEIPTS).glob("*.json"))
        except OSError:
            return []
        for path in paths:
            with contextlib.suppress(OSError, ValueError, RecursionError):
                # Never waits on a pipe put there, and never reads more than a receipt can be, whatever the file.
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
                with os.fdopen(fd, "rb") as fh:
                    st = os.fstat(fd)
                    data = fh.read(RECEIPT_MAX_BYTES + 1) if stat.S_ISREG(st.st_mode) else b""
                shown = f"{RECEIPTS}/{path.name}"
                if len(data) > RECEIPT_MAX_BYTES:
                    self._refuse(
                        shown,
                        f"a receipt of {st.st_size} bytes, larger than any receipt can be ({RECEIPT_MAX_BYTES}): "
                        "not read. Delete it: Hivenote never writes one this big, and the machine it names leaves a "
                        "new one when what it holds changes",
                    )
                    continue
                self.refused.pop(shown, None)
                raw = json.loads(data)
                if (
                    isinstance(raw, dict)
                    and isinstance(raw.get("node"), str)
                    and raw["node"] != node
                    and path.stem == raw["node"]
                    and type(raw.get("at")) is int
                    and isinstance(raw.get("seen"), dict)
                ):
                    found.append(raw)
        return found

    # -- conflict copies ----------------------------------------------------------------------------

    def _tidy(self) -> None:
        try:
            names = sorted(e.name for e in os.scandir(self.log_dir) if e.is_file() and is_shard_file(e.name))
        except NO_FOLDER:
            return
        for name in names:
            base = conflict_of(name)
            if base is None or base == self.node():
                continue  # the own shard's conflict copies are the store's to judge (a fork of this node)
            with contextlib.suppress(OSError):
                self._tidy_one(name, base, names)

    def _tidy_one(self, name: str, base: str, names: list[str]) -> None:
        """Every file is read a piece at a time (`replica.Copy`), never whole: a conflict copy of any size costs a
        piece of memory; a line longer than any op in it is damage, skipped (and not kept in a branch)."""
        path = self.log_dir / name
        with contextlib.ExitStack() as stack:
            data = opened(stack, path)
            holders = [f"{base}.jsonl"] + [n for n in names if n.startswith(f"{base}~")]
            ahead = False
            for holder in holders:
                try:
                    held = opened(stack, self.log_dir / holder)
                except FileNotFoundError:
                    held = Copy(None, 0)  # the shard itself has not reached this folder yet
                except OSError:
                    continue
                found = (
                    "behind" if starts_with(held.pieces(), data.pieces()) else classify_lines(held.lines, data.lines)
                )
                if found == "behind":
                    path.unlink()  # every op of it is there (an older copy, or the shard before a compaction)
                    self.tidied.append(f"{name}: already in {holder}, deleted")
                    return
                ahead = ahead or (holder == holders[0] and found == "replaces")
            if ahead:
                # The same history as the node's shard, further along (a continuation or a compaction of one): the
                # sync tool brought the copy before the shard's own lines. Read like any shard, deleted once the shard
                # holds all of it; never another history (issue 32: it became a branch on every machine).
                return
            branch = self.log_dir / f"{base}~{data.digest()[:12]}.jsonl"
            if not branch.exists():
                write_whole(branch, data.pieces())
        path.unlink()
        self.tidied.append(f"{name}: another history of {base}, kept as {branch.name}")


def opened(stack: contextlib.ExitStack[Any], path: Path) -> Copy:
    """`path` opened for reading until `stack` closes, as a Copy up to its size now."""
    fh = stack.enter_context(open(path, "rb"))  # noqa: SIM115 (closed by the stack)
    return Copy(fh, os.fstat(fh.fileno()).st_size)
