"""SIGTERM and Ctrl-C stop Hivenote's processes, whatever their main thread holds at that moment (stop_signals.py),
and a crash below Python leaves every thread's stack in the log (logs.report_crashes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hivenote.server.stop_signals import on_stop_signal
from tests.support.live import health
from tests.support.peer_nodes import Node
from tests.support.wait import wait_until


def test_a_stop_signal_arriving_while_the_main_thread_holds_what_stopping_needs_still_stops() -> None:
    # A handler runs in the main thread between two bytecodes: here, inside `with held`. A stop that needs `held`
    # (as Event.set needs the lock Event.wait holds for a moment) would wait for itself if it ran in the handler.
    held = threading.Lock()
    got: list[bool] = []
    done = threading.Event()

    def stop() -> None:
        acquired = held.acquire(timeout=5)
        if acquired:
            held.release()
        got.append(acquired)
        done.set()

    undo = on_stop_signal(stop)
    try:
        with held:
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)  # Ctrl-C too, and no KeyboardInterrupt
            assert got == []  # not called in the handler, which held the lock with us
        assert done.wait(10)
        wait_until(lambda: len(got) == 2, 10, lambda: f"two stops: {got}")
    finally:
        undo()
    assert got == [True, True]


def test_the_undo_puts_back_the_handlers_and_wakeup_socket_there_were() -> None:
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    undo = on_stop_signal(lambda: None)
    undo()
    assert {signum: signal.getsignal(signum) for signum in before} == before
    assert signal.set_wakeup_fd(-1) == -1  # none was set before, and none is left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_hivenote_serve_stops_cleanly_on_sigterm_and_on_ctrl_c(tmp_path: Path, sig: signal.Signals) -> None:
    node = Node(tmp_path / "data")
    node.start()
    try:
        node.wait_ready()
    except BaseException:
        node.stop(signal.SIGKILL)
        raise
    assert node.stop(sig) == 0, node.log_tail()
    assert health(node.port) is None
    assert "Traceback" not in node.log_tail()


def test_a_crash_below_python_leaves_every_threads_stack_in_the_log() -> None:
    crash = (
        "import ctypes, threading\n"
        "from hivenote.server.logs import report_crashes\n"
        "report_crashes()\n"
        "threading.Thread(target=threading.Event().wait, name='other', daemon=True).start()\n"
        "ctypes.string_at(0)\n"
    )
    ended = subprocess.run(
        [sys.executable, "-c", crash],
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        env={**os.environ, "LC_ALL": "C"},
    )
    assert ended.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in ended.stderr
    assert ended.stderr.count("most recent call first") >= 2, ended.stderr  # the crashing thread and the other one
