"""One tray app per data dir: the first launch holds the lock and listens; later ones reach it with the key from
tray.json (0600); a stranger without the key is refused and does not stop it from listening."""

from __future__ import annotations

import json
import queue
import stat
import subprocess
import sys
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client
from pathlib import Path

import pytest

from hivenote.desktop.instance import Instance, InstanceUnreachable


def test_first_is_the_instance_and_the_next_one_reaches_it(tmp_path: Path) -> None:
    received: queue.Queue[str] = queue.Queue()
    first = Instance(tmp_path)
    assert first.acquire(received.put)
    try:
        record = tmp_path / "tray.json"
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        second = Instance(tmp_path)
        assert not second.acquire(lambda _: None)
        second.send("show")
        assert received.get(timeout=10) == "show"
        # a stranger who can reach the port but not read the key
        port = json.loads(record.read_text(encoding="utf-8"))["port"]
        with pytest.raises(AuthenticationError), Client(("127.0.0.1", port), authkey=b"guess"):
            pass
        second.send("quit")  # still listening
        assert received.get(timeout=10) == "quit"
    finally:
        first.release()
    assert not (tmp_path / "tray.json").exists()
    third = Instance(tmp_path)
    assert third.acquire(lambda _: None)  # the lock was released
    third.release()


def test_another_process_holds_the_lock(tmp_path: Path) -> None:
    """The lock is an OS file lock: another process holding it makes this one the second launch."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from hivenote.desktop.instance import Instance; "
            "i = Instance(Path(sys.argv[1])); assert i.acquire(lambda m: print(m, flush=True)); "  # flushed: a pipe
            "print('held', flush=True); sys.stdin.read(); i.release()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not Instance(tmp_path).acquire(lambda _: None)
        Instance(tmp_path).send("hello")
        assert holder.stdout.readline().strip() == "hello"  # its callback printed the message
    finally:
        holder.communicate(timeout=10)  # closes its stdin (it releases and exits) and our pipes
    assert holder.returncode == 0
    after = Instance(tmp_path)
    assert after.acquire(lambda _: None)
    after.release()


def test_a_held_lock_with_no_record_says_what_to_do(tmp_path: Path) -> None:
    first = Instance(tmp_path)
    assert first.acquire(lambda _: None)
    try:
        (tmp_path / "tray.json").unlink()
        with pytest.raises(InstanceUnreachable, match="cannot be reached"):
            Instance(tmp_path).send("show")
    finally:
        first.release()
