"""The C heap of a long-running Hivenote process (`hivenote serve`, the tray app): glibc's allocator, on Linux.

glibc gives each thread that allocates while another holds the heap an arena of its own, up to eight per core,
and keeps what each arena once held: freed, but fragmented across arenas and not handed back. A server's threads
come and go (each start's event loop, the worker threads that fold, follow the log folder and build the meaning
index, the tokenizer's pool), so its C heap grows with every start and every burst of work in a new thread. With
meaning search on, the embedded server grew ~0.35 MB per Stop/Start in a start/stop loop, and its RSS was 30-37 MB
higher from the first start; with the arenas capped at two, both went: the same loop stayed as flat as with meaning
off.

Python's own small objects do not use these arenas (its allocator maps its own) and the GIL runs Python on one thread
at a time, so the cap is not expected to cost speed; that was not measured apart.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable

ARENAS = 2  # the main heap and one for every other thread
_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """glibc, or None (another C library, another system: nothing here applies)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc's own symbol: musl has mallopt but no arenas to cap)
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(count: int = ARENAS) -> bool:
    """Cap glibc's arenas for the rest of this process's life (before its threads start: a thread keeps the arena
    it first took). `MALLOC_ARENA_MAX` in the environment wins: someone chose it. True when the cap is in force."""
    libc = _libc()
    if libc is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(libc.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(count)))


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` (hands freed heap pages of every arena back to the system), or None."""
    libc = _libc()
    return None if libc is None else libc.malloc_trim
