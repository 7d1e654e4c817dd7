"""One tray app per data dir: the first launch holds the lock and listens; later ones reach it with the key from
tray.json (0600); a stranger without the key is refused and does not stop it from listening."""

from __future__ import annotations

import json
import queue
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from hivenote.desktop import instance
from hivenote.desktop.instance import Instance, InstanceUnreachable, _ask
from tests.support.privileges import as_nobody


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
        with pytest.raises(InstanceUnreachable, match="refused the key"):
            _ask(port, b"guess", "quit")
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


# -- strangers on the port (issue 33 item 2) ------------------------------------------------------------------------

SYSTEM_PYTHON = "/usr/bin/python3"  # not a venv under /root, which another account cannot enter
DEADLINE_S = 30.0


def _within(call: Callable[[], object], what: str, deadline: float = DEADLINE_S) -> BaseException | None:
    """`call()` on a thread of its own: None when it returned, its error when it raised; fails the test when it is
    still waiting at the deadline (a launch, `hivenote quit` or the tray's own Quit would hang there)."""
    outcome: queue.Queue[BaseException | None] = queue.Queue()

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            outcome.put(exc)
        else:
            outcome.put(None)

    threading.Thread(target=run, name=what, daemon=True).start()
    try:
        return outcome.get(timeout=deadline)
    except queue.Empty:
        raise AssertionError(f"{what} still waits after {deadline} s") from None


def _port(data_dir: Path) -> int:
    return int(json.loads((data_dir / "tray.json").read_text(encoding="utf-8"))["port"])


def test_four_bytes_from_another_account_do_not_stop_the_tray_listening(tmp_path: Path) -> None:
    """A length prefix past what the handshake reads (here 4096, as `nobody`) raised OSError on the only accept
    thread, which took it for "closed" and stopped: every later launch and `hivenote quit` hung."""
    received: queue.Queue[str] = queue.Queue()
    first = Instance(tmp_path)
    assert first.acquire(received.put)
    try:
        attack = (
            "import socket, sys\n"
            "with socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10) as s:\n"
            "    s.sendall(b'\\x00\\x00\\x10\\x00')\n"
            "    s.recv(1024)\n"
        )
        command = [*as_nobody(), SYSTEM_PYTHON, "-I", "-c", attack, str(_port(tmp_path))]
        subprocess.run(command, capture_output=True, timeout=30, check=False)
        assert _within(lambda: Instance(tmp_path).send("show"), "a second launch") is None
        assert received.get(timeout=10) == "show"
    finally:
        assert _within(first.release, "the tray's Quit") is None


def test_an_idle_connection_does_not_keep_the_next_launch_waiting(tmp_path: Path) -> None:
    """The handshake ran on the accept thread with no deadline: one connection that sends nothing blocked it."""
    received: queue.Queue[str] = queue.Queue()
    first = Instance(tmp_path)
    assert first.acquire(received.put)
    try:
        with socket.create_connection(("127.0.0.1", _port(tmp_path)), timeout=10):
            assert _within(lambda: Instance(tmp_path).send("show"), "a second launch") is None
            assert received.get(timeout=10) == "show"
    finally:
        assert _within(first.release, "the tray's Quit") is None


def test_a_listener_that_never_answers_is_reported_not_waited_on_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client side: whatever holds the recorded port (a hung tray, a stranger's program) may never answer."""
    monkeypatch.setattr(instance, "ANSWER_WAIT_S", 1.0)  # the deadline's length is not what is tested
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        (tmp_path / "tray.json").write_text(json.dumps({"pid": 1, "port": port, "key": "00" * 32}), encoding="utf-8")
        error = _within(lambda: Instance(tmp_path).send("quit"), "hivenote quit")
        assert isinstance(error, InstanceUnreachable), error
        with silent.accept()[0]:  # it connected, and then waited only so long
            pass
