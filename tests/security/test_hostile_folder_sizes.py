"""What a file another machine (or anyone who can write the synced folder) puts there can make a real `hivenote serve`
hold (issue 33, findings 4 and 6, for the synced-folder transport): a shard of hundreds of MB, a conflict copy of one
and a receipt of one are read a piece at a time or refused, never held whole; a line longer than any op is damage,
skipped. The peak of the server's resident memory (VmHWM, reset once the server idles) stays under twice its idle
RSS, and /api/health keeps answering."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import health
from tests.support.proc import peak_mb, reset_peak, rss_mb, settle
from tests.support.serving import get, op_line, serving
from tests.support.wait import wait_until

HUGE = 400 << 20  # far more than the server holds idle
EVIL = "evil-0009"


def write_damage(path: Path, head: bytes, size: int, *, newlines: bool) -> None:
    """`head`, then `size` bytes of lines of 2 MiB each (longer than any op: damage) or of one endless line (none),
    written a piece at a time so this process holds none of it whole."""
    with path.open("wb") as fh:
        fh.write(head)
        block = (b"x" * ((2 << 20) - 1) + b"\n") if newlines else b"x" * (2 << 20)
        left = size
        while left > 0:
            fh.write(block[:left])
            left -= len(block)


@contextlib.contextmanager
def synced(tmp_path: Path) -> Iterator[tuple[Path, Path, int, int, str]]:
    """A real `hivenote serve` whose log is the folder `Sync` (a synced folder), idle, its peak RSS reset: (folder,
    data dir, pid, port, token)."""
    data_dir, folder = tmp_path / "data", tmp_path / "Sync"
    folder.mkdir()
    data_dir.mkdir()
    (data_dir / "settings.json").write_text(json.dumps({"log_dir": str(folder)}), encoding="utf-8")
    with serving(data_dir) as (process, port, token):
        settle(process.pid)
        reset_peak(process.pid)
        yield folder, data_dir, process.pid, port, token


def folder_status(port: int, token: str) -> str:
    transports = get(port, token, "/api/status")[1]["sync"]["transports"]
    return json.dumps([t for t in transports if t.get("kind") == "folder"])


@pytest.mark.parametrize(
    ("newlines", "sparse"), [(True, 0), (False, 0), (False, 8 << 30)], ids=["lines-of-damage", "no-newline", "8-gib"]
)
def test_a_huge_shard_in_the_synced_folder_is_held_a_piece_at_a_time(
    tmp_path: Path, newlines: bool, sparse: int
) -> None:
    """`sparse`: the attack run's file, 8 GiB of zeros without a newline after the first line (a sparse file)."""
    with synced(tmp_path) as (folder, data_dir, pid, port, token):
        idle = rss_mb(pid)
        first = op_line(EVIL, 1, "the bait")
        if sparse:
            with (folder / f"{EVIL}.jsonl").open("wb") as fh:
                fh.write(first)
                fh.truncate(sparse)
        else:
            write_damage(folder / f"{EVIL}.jsonl", first, HUGE, newlines=newlines)
        held = data_dir / "sync" / "held" / f"{EVIL}.jsonl"
        wait_until(held.exists, 120, what=lambda: folder_status(port, token))  # written whole, renamed into place
        peak = peak_mb(pid)
        size = sparse or HUGE
        print(f"held copy of a {size >> 20} MB shard (newlines={newlines}): idle {idle:.0f} MB, peak {peak:.0f} MB")
        assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"
        assert health(port) == 200
        assert held.read_bytes() == first  # the damage is not held
        if not newlines:  # left out of this machine's receipt, and said
            wait_until(
                lambda: "without a newline" in folder_status(port, token), 60, what=lambda: folder_status(port, token)
            )


def test_a_huge_conflict_copy_is_tidied_a_piece_at_a_time(tmp_path: Path) -> None:
    with synced(tmp_path) as (folder, _, pid, port, token):
        idle = rss_mb(pid)
        first = op_line(EVIL, 1, "the bait")
        (folder / f"{EVIL}.jsonl").write_bytes(first)
        copy = folder / f"{EVIL}.sync-conflict-20261207-120000-ABCDEFG.jsonl"
        write_damage(copy, first, HUGE, newlines=True)
        wait_until(lambda: not copy.exists(), 120, what=lambda: folder_status(port, token))  # already held: deleted
        assert health(port) == 200
        peak = peak_mb(pid)
        print(f"a {HUGE >> 20} MB conflict copy tidied: idle {idle:.0f} MB, peak {peak:.0f} MB")
        assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"


def test_a_huge_receipt_is_refused_and_reported_without_being_read(tmp_path: Path) -> None:
    with synced(tmp_path) as (folder, _, pid, port, token):
        idle = rss_mb(pid)
        receipts = folder / "hivenote-receipts"
        receipts.mkdir(exist_ok=True)
        with (receipts / f"{EVIL}.json").open("wb") as fh:
            fh.write(b'{"v": 1, "node": "%s", "at": 1, "seen": {"x": 1}, "pad": "' % EVIL.encode())
            for _ in range(HUGE >> 20):
                fh.write(b"y" * (1 << 20))
            fh.write(b'"}')
        wait_until(lambda: EVIL in folder_status(port, token), 120, what=lambda: folder_status(port, token))
        assert health(port) == 200
        peak = peak_mb(pid)
        print(f"a {HUGE >> 20} MB receipt: idle {idle:.0f} MB, peak {peak:.0f} MB")
        assert peak < 2 * idle, f"RSS went from {idle:.0f} MB to {peak:.0f} MB"
        status = folder_status(port, token)
        assert "receipt" in status and "larger than" in status, status
