"""Crash survival: 20 rounds of `kill -9` on a real `hivenote serve` while 8 writers remember notes through REST.
After every restart each write a client saw acknowledged is there, the log folds without an unreadable line, and
a torn last line (a write cut by the kill) has been repaired by the owner.

A kill -9 leaves the page cache alone, so this proves "written before acknowledged" and recovery, not fsync itself
(fsync-before-ack is checked in tests/server/test_store.py)."""

from __future__ import annotations

import functools
import http.client
import json
import random
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from tests.support.live import free_port
from tests.support.system import SERVE, needs
from tests.support.wait import wait_started, wait_until

ROUNDS = 20
WRITERS = 8
WAIT_S = 60


@needs(SERVE)
def start(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data_dir), "serve", "--port", str(port)]
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)

    def answers() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
            return True

    wait_started(process, answers, WAIT_S, log)
    return process


def reached(acked: list[str], target: int) -> bool:
    return len(acked) >= target


def writer(port: int, token: str, name: str, acked: list[str], stop: threading.Event) -> None:
    """Remember notes until the server dies; keep the ids the server acknowledged (201 with the note)."""
    i = 0
    while not stop.is_set():
        body = json.dumps({"kind": "fact", "title": f"{name} {i}", "body": "x" * random.randrange(10, 400)}).encode()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/notes", body, headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                acked.append(json.loads(response.read())["note"]["id"])
        except (OSError, http.client.HTTPException):
            return  # killed under us (refused, reset, cut mid-answer): this write was not acknowledged
        i += 1


def test_every_acknowledged_write_survives_kill_9(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    rng = random.Random(5)
    acked: list[str] = []
    torn_repaired = 0
    for round_ in range(ROUNDS):
        port = free_port()
        process = start(data_dir, port, log)
        token = Tokens(data_dir / "tokens.json").default()
        stop = threading.Event()
        before = len(acked)
        threads = [
            threading.Thread(target=writer, args=(port, token, f"r{round_}w{w}", acked, stop)) for w in range(WRITERS)
        ]
        for thread in threads:
            thread.start()
        target = before + rng.randrange(5, 80)
        # Killed at a random point in the stream of acknowledged writes.
        wait_until(functools.partial(reached, acked, target), WAIT_S, "the writers stalled", interval=0.001)
        process.send_signal(signal.SIGKILL)
        process.wait()
        stop.set()
        for thread in threads:
            thread.join(WAIT_S)

        with Store(data_dir) as store:  # the owner opens it as the next start would: repairs a torn tail
            torn_repaired += bool(store.repaired_tail_bytes)
            health = store.health()
            assert all(h.bad == 0 for h in health.values()), health
            with store.reading() as state:
                present = set(state.notes)
        missing = [note_id for note_id in acked if note_id not in present]
        assert not missing, f"round {round_}: {len(missing)} acknowledged writes lost"
    assert len(acked) > ROUNDS * 5
    print(f"{len(acked)} acknowledged writes over {ROUNDS} kills; {torn_repaired} torn tails repaired")
