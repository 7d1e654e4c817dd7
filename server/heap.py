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

glibc also moves its threshold for mapping a big block on its own (a block of more than 128 KiB is mapped, and handed
back when freed, until the first such block is freed: from then on blocks up to that size come from the heap, where a
small block allocated after them keeps their pages). A server's passes over a big notebook allocate such blocks for
the moment (the list's order, a question's matches: 100k-entry lists and sets), so each left its pages behind: in one
process at 100k notes, a list and two questions in words left 23 MB held, 10 MB with the threshold fixed. The
threshold is fixed (`return_big_blocks`), so a freed big block goes back to the system at once.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable

ARENAS = 2  # the main heap and one for every other thread
MAP_ABOVE = 256 << 10  # a block this big or bigger is mapped apart, and handed back when freed
_M_ARENA_MAX = -8  # mallopt's parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3


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


def return_big_blocks(size: int = MAP_ABOVE) -> bool:
    """Map every block of `size` bytes or more apart from the heap for the rest of this process's life (glibc then
    stops moving the threshold), so freeing one hands its pages back at once. `MALLOC_MMAP_THRESHOLD_` in the
    environment wins. True when the threshold is in force."""
    libc = _libc()
    if libc is None or os.environ.get("MALLOC_MMAP_THRESHOLD_"):
        return False
    return bool(libc.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(size)))


def tune_heap() -> None:
    """What a long-running Hivenote process asks of glibc, before any thread starts: `limit_arenas` and
    `return_big_blocks`."""
    limit_arenas()
    return_big_blocks()


def malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim` (hands freed heap pages of every arena back to the system), or None."""
    libc = _libc()
    return None if libc is None else libc.malloc_trim
