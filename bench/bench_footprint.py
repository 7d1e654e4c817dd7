"""Footprint: resident memory of `hivenote serve` with 10k (and 100k) notes after it has answered searches, and
the CPU an idle server and an idle tray app use over a minute (targets: RSS at 10k ≤ 120 MB; idle CPU ≈ 0).

    python bench/bench_footprint.py [--notes 10000,100000] [--idle 60]

The tray is measured under a private Xvfb + session bus with a StatusNotifier host (the tests' harness), so
its icon, menu and once-a-second status ticker run as on a desktop.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from hivenote.server.tokens import Tokens

if TYPE_CHECKING:  # run as a script, this folder (and the tests' helpers) are put on sys.path
    from bench.bench_core import write_log
    from bench.proc import cpu_s, rss_mb, settle
    from tests.support.harness import start_desktop
    from tests.support.live import free_port, health
else:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench_core import write_log
    from proc import cpu_s, rss_mb, settle

    from tests.support.harness import start_desktop
    from tests.support.live import free_port, health


def wait_up(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while health(port) != 200:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)


def serve_footprint(notes: int, idle_s: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_log(data, notes)
        port = free_port()
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "serve", "--port", str(port)]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_up(port, process)
            token = Tokens(data / "tokens.json").default()
            for word in ("deploy", "postgres", "cache", "auth", "test", "drizzle", "api", "queue"):
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/notes?q={word}", headers={"Authorization": f"Bearer {token}"}
                )
                with urllib.request.urlopen(request, timeout=30) as response:
                    json.loads(response.read())
            settle(process.pid)  # the search index warms in the background (~30 s at 100k notes) first
            rss = rss_mb(process.pid)
            before = cpu_s(process.pid)
            time.sleep(idle_s)
            return rss, cpu_s(process.pid) - before
        finally:
            process.terminate()
            process.wait(30)


def tray_idle(idle_s: float) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp, start_desktop(Path(tmp)) as desktop:
        port = free_port()
        argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", f"{tmp}/data", "tray", "--port", str(port)]
        process = desktop.spawn("tray", argv)
        wait_up(port, process)
        desktop.tray_item().wait_for(lambda i: "running" in str(i.prop("Title")), what="running")
        settle(process.pid)
        rss = rss_mb(process.pid)
        before = cpu_s(process.pid)
        time.sleep(idle_s)
        used = cpu_s(process.pid) - before
        process.terminate()
        process.wait(30)
        return rss, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", default="10000,100000")
    parser.add_argument("--idle", type=float, default=60)
    args = parser.parse_args()
    print(f"{'process':<28} {'RSS MB':>8} {'idle CPU s':>11} {'idle CPU %':>11}")
    for notes in (int(n) for n in args.notes.split(",")):
        rss, used = serve_footprint(notes, args.idle)
        print(f"{f'hivenote serve, {notes:,} notes':<28} {rss:>8.0f} {used:>11.2f} {100 * used / args.idle:>10.2f}%")
    rss, used = tray_idle(args.idle)
    print(f"{'tray app, empty notebook':<28} {rss:>8.0f} {used:>11.2f} {100 * used / args.idle:>10.2f}%")


if __name__ == "__main__":
    main()
