"""The one way Hivenote writes a file whole, and the modes of what it writes: every state file, shard rewrite,
replica, cache and desktop entry goes through `write_whole` (or `temp_beside` when it streams a copy).

Files and folders here are this user's only (SECURITY.md, "Files on disk"): folders the store makes are 0700
(`private_dir`), every file it writes is 0600, and a file written whole goes through a temp file created exclusively
beside it (`temp_beside`: a random name, O_EXCL and O_NOFOLLOW, so a link planted in a synced folder is never written
through), fsynced, renamed over the old one, the folder fsynced; removed again when the write fails.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has none (and links there need privileges)


def tighten(path: Path, fd: int | None = None) -> None:
    """Take group and other permissions off `path` (this user's folder or file; through `fd` when it is open), saying
    so in the log. A path owned by another account is left as it is (the log says so too): chmod cannot change it."""
    if os.name == "nt":  # no POSIX modes; the user's profile folder is private already
        return
    try:
        st = os.stat(path) if fd is None else os.fstat(fd)
    except OSError:
        return
    if not st.st_mode & 0o077:
        return
    old = stat.S_IMODE(st.st_mode)
    try:
        if fd is None:
            os.chmod(path, old & ~0o077)
        else:
            os.fchmod(fd, old & ~0o077)
    except OSError as exc:
        log.warning("%s is open to other accounts (mode %04o) and could not be closed (%s)", path, old, exc)
        return
    log.warning(
        "%s was open to other accounts (mode %04o): it holds notes, so it is now %04o (this user only)",
        path,
        old,
        old & ~0o077,
    )


def private_dir(path: Path) -> None:
    """Make the folder `path` for this user only (0700; its parent must exist), or close an existing one. The mode is
    set again after mkdir, which a umask could have narrowed or widened."""
    try:
        path.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        if not path.is_dir():
            raise
    else:
        with contextlib.suppress(OSError):
            os.chmod(path, PRIVATE_DIR)
        return
    tighten(path)


@contextlib.contextmanager
def temp_beside(path: Path) -> Iterator[tuple[int, Path]]:
    """A new empty file (fd, path) beside `path` with a random hidden name ending in `.tmp` (never folded, never
    synced), created exclusively and without following links (mkstemp: O_EXCL, O_NOFOLLOW), 0600. The caller writes
    it and renames it into place; whatever is left at the temp name when the block ends (a failure) is removed."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        yield fd, tmp
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_whole(path: Path, chunks: Iterable[bytes], *, durable: bool = True, mode: int = PRIVATE_FILE) -> None:
    """Replace `path` with `chunks` in one step through `temp_beside` (fsynced, renamed, the folder fsynced): a link
    at `path` is replaced, never written through. On failure nothing changed and no temp file is left. `durable=False`
    only for derived data (a cache a crash may lose); `mode` other than 0600 only for files the OS reads (autostart)."""
    with temp_beside(path) as (fd, tmp):
        for chunk in chunks:
            write_all(fd, chunk)
        if durable:
            os.fsync(fd)
        if mode != PRIVATE_FILE:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable (where directories can be fsynced)."""
    if os.name == "nt":  # directories cannot be opened for fsync on Windows; rename is durable there
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
