"""SIGTERM and Ctrl-C, turned into a call made on a thread of its own (`hivenote serve`, the tray app).

A Python signal handler runs in the main thread between two of its bytecodes, wherever that thread is. A handler that
takes a lock deadlocks when the main thread holds that lock at that moment: `stop.set()` as a handler, with the main
thread inside `stop.wait(0.25)` (an Event's lock is held for a moment on every wakeup), hung `hivenote serve` on
SIGTERM about once in sixty stops until it was killed. So the handler here does nothing at all: the interpreter's C
handler writes the signal's number to a socket (`signal.set_wakeup_fd`), and a thread waiting on the socket's other end
makes the call, where taking any lock is as safe as anywhere else.
"""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _nothing(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: the wakeup socket carries the signal (a callable handler is what makes the
    interpreter write to it; SIG_IGN would drop the signal before it)."""


def on_stop_signal(stop: Callable[[], None]) -> Callable[[], None]:
    """Call `stop` (on the thread `hivenote-signals`) each time SIGTERM or SIGINT arrives, from now until the returned
    undo is called (which puts back the handlers and wakeup socket there were). Only the main thread can do this."""
    reader, writer = socket.socketpair()
    writer.setblocking(False)  # the interpreter's write must never block inside a signal handler
    previous_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    previous = {signum: signal.signal(signum, _nothing) for signum in STOP_SIGNALS}
    wanted = {int(signum) for signum in STOP_SIGNALS}

    def watch() -> None:
        while True:
            try:
                received = reader.recv(64)
            except OSError:  # shut down under the wait (Windows says so with an error)
                return
            if not received:  # the undo shut the socket down
                return
            for signum in received:  # one byte per signal
                if signum in wanted:
                    stop()

    watcher = threading.Thread(target=watch, name="hivenote-signals", daemon=True)
    watcher.start()

    def undo() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_fd)
        reader.shutdown(socket.SHUT_RDWR)  # ends the watcher's recv
        watcher.join()
        reader.close()
        writer.close()

    return undo
