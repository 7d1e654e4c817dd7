"""Files in the log folder that a sync tool, another account or a fault put there (issue 33 items 5 and 6): one that
cannot be read, one of 8 GiB without a newline. Each is skipped and reported, as a bad line is; the other shards are
read, offered to peers and counted, and the server keeps answering, within its memory, and stops when asked."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.privileges import without_root_powers
from tests.support.proc import rss_mb
from tests.support.serving import get, notes, op_line, serving
from tests.support.wait import eventually, wait_until


def test_an_unreadable_file_in_the_log_folder_is_skipped_and_reported_and_stops_no_other_shard(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log_dir = data_dir / "log"
    log_dir.mkdir(parents=True)
    unreadable = log_dir / "aaa-0001.jsonl"  # sorted before the good one
    unreadable.write_bytes(op_line("aaa-0001", 1, "behind a closed door"))
    unreadable.chmod(0)
    (log_dir / "zzz-0002.jsonl").write_bytes(op_line("zzz-0002", 1, "after it") + op_line("zzz-0002", 2, "and more"))
    # Without DAC override, so the mode 000 file is unreadable even though the tests run as root.
    with serving(data_dir, without_root_powers()) as (_, port, token):
        wait_until(lambda: notes(port, token) == 2, what=lambda: str(get(port, token, "/api/status")))
        status, listing = get(port, token, "/sync/shards")
        assert status == 200, listing
        assert "zzz-0002" in listing["shards"] and "aaa-0001" not in listing["shards"]
        assert "cannot be read" in listing["skipped"]["aaa-0001"]
        shards = get(port, token, "/api/status")[1]["shards"]
        assert "ermission" in shards["aaa-0001.jsonl"]["unreadable"], shards
        assert shards["zzz-0002.jsonl"]["unreadable"] is None and shards["zzz-0002.jsonl"]["ops"] == 2
        status, answer = get(port, token, "/sync/shards/aaa-0001")
        assert status == 503 and answer["error"]["code"] == "unreadable"
        unreadable.chmod(0o600)  # readable again: read, as any shard
        wait_until(lambda: notes(port, token) == 3, what=lambda: str(get(port, token, "/api/status")))
        assert get(port, token, "/api/status")[1]["shards"]["aaa-0001.jsonl"]["unreadable"] is None


def test_an_8_gib_file_without_a_newline_neither_stalls_nor_bloats_the_server(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    log_dir = data_dir / "log"
    log_dir.mkdir(parents=True)
    (log_dir / "zzz-0002.jsonl").write_bytes(op_line("zzz-0002", 1, "a good shard"))
    (log_dir / "aaa-0001.jsonl").write_bytes(op_line("aaa-0001", 1, "before the damage"))
    with (log_dir / "aaa-0001.jsonl").open("r+b") as fh:
        fh.truncate(8 << 30)  # sparse: no disk
    with serving(data_dir) as (process, port, token):
        idle = rss_mb(process.pid)
        started = time.monotonic()
        while time.monotonic() - started < 10:  # for 10 s, while it works through the damage
            for path in ("/api/health", "/sync/shards"):
                asked = time.monotonic()
                status, answer = get(port, token, path, timeout=5)
                assert status == 200, (path, answer)
                assert time.monotonic() - asked < 2, f"{path} took {time.monotonic() - asked:.1f} s"
            assert rss_mb(process.pid) < max(2 * idle, idle + 200), (idle, rss_mb(process.pid))
        listing = get(port, token, "/sync/shards")[1]
        assert "zzz-0002" in listing["shards"] and "without a newline" in listing["skipped"]["aaa-0001"]
        assert notes(port, token) == 2  # the line before the damage and the other shard
        problems = get(port, token, "/api/status")[1]["shards"]["aaa-0001.jsonl"]["problems"]
        assert any("longer than any op" in p["reason"] for p in problems), problems
        process.send_signal(signal.SIGTERM)
        assert eventually(lambda: process.poll() is not None, 15), "still running 15 s after SIGTERM"
    assert os.path.getsize(log_dir / "aaa-0001.jsonl") == 8 << 30  # never deleted or cut
