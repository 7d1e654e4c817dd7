"""Where a Hivenote process's log lines go (`hivenote serve`, the tray app): standard error, one plain line each.

Hivenote's own messages are shown from INFO up, so a warning ("cannot write: the disk is full") is followed by the line
saying it passed ("the disk ... has room again"); other libraries' from WARNING up. Without this, the MCP SDK set the
process's logging as a side effect of building its server (`MCPServer` calls `logging.basicConfig` with rich's
handler at WARNING): Hivenote's INFO lines were dropped, and a logged exception loaded rich's traceback renderer and
pygments (~1.5 MB) to print it. `basicConfig` does nothing once the root logger has a handler, so this runs first.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging() -> None:
    """Log to standard error: Hivenote's loggers from INFO, the rest from WARNING. Nothing changes when the root logger
    already has a handler (a program embedding Hivenote, or a test runner, decided)."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(__name__.partition(".")[0]).setLevel(logging.INFO)


def report_crashes() -> None:
    """A crash below Python (a native library's segfault, an abort) prints every thread's stack to standard error, the
    process's log, instead of ending it without a word. Nothing happens where there is no standard error (pythonw)."""
    if sys.stderr is None:
        return
    with contextlib.suppress(AttributeError, ValueError, io.UnsupportedOperation):  # a stream without a file
        faulthandler.enable(sys.stderr)
