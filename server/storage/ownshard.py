"""This machine's own shard file as the store writes it: appends made durable with fsync, cut back after a failed
write, and put back from the still-open handle when the file (or its whole folder) was deleted under a running
server: the handle reaches every acknowledged byte until it is closed. Also says what a disk error means to a user.

Files and folders are this user's only and a file written whole is replaced in one durable step: files.py.
"""

from __future__ import annotations

import errno
import getpass
import hashlib
import logging
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from ..core.errors import StoreError, StoreWriteFailed
from ..core.hlc import wall_ms
from .files import (
    NO_FOLLOW,
    PRIVATE_FILE,
    fsync_dir,
    temp_beside,
    tighten,
    write_all,
    write_whole,
)

log = logging.getLogger(__name__)

ProblemKind = Literal["disk_full", "read_only", "no_permission", "io_error", "write_failed", "log_missing", "lock_lost"]
COPY_CHUNK = 1 << 20
MIN_FREE_BYTES = 64 * 1024  # a disk with less than this free still counts as full
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def os_error(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` (statefile's StateFileUnwritable carries the write's own as `error`)."""
    inner = getattr(exc, "error", None)
    if isinstance(inner, OSError):
        return inner
    return exc if isinstance(exc, OSError) else None


def lacks_space(exc: BaseException) -> bool:
    """Whether `exc` is a write refused for want of space (a full disk or a used-up quota)."""
    inner = os_error(exc)
    return inner is not None and inner.errno in NO_SPACE


def write_refused(exc: OSError, what: str, path: Path) -> StoreWriteFailed:
    """Why writing `what` at `path` failed, for a person: nothing changed, and what to do."""
    inner = os_error(exc) or exc
    reasons = {
        errno.ENOSPC: "the disk is full. Free some space",
        errno.EDQUOT: "the disk quota is used up. Free some space",
        errno.EROFS: "the file system is read-only. Make it writable again",
        errno.EACCES: "Hivenote may not write there. Give your user write permission on it",
        errno.EPERM: "Hivenote may not write there. Give your user write permission on it",
    }
    why = reasons.get(inner.errno or 0, f"{inner.strerror or inner}. Check the folder and its disk")
    return StoreWriteFailed(f"Could not write {what} in {path.parent}: {why}, then try again. Nothing was changed.")


@dataclass(frozen=True)
class DiskProblem:
    """Why the notebook cannot take writes right now; shown in status, the dashboard and the tray."""

    kind: ProblemKind
    message: str  # what happened and what to do next
    since_ms: int

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "message": self.message, "since": self.since_ms}


def problem_from(exc: BaseException, folder: Path, now_ms: int) -> DiskProblem:
    """Name a failed write for a person: the condition, that nothing acknowledged was lost, and what to do."""
    inner = os_error(exc)
    code = inner.errno if inner is not None else None
    refused = "new notes are refused and nothing already saved is lost"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return DiskProblem(
            "disk_full",
            f"The disk holding {folder} is full: {refused}. Free some space; Hivenote carries on by itself.",
            now_ms,
        )
    if code == errno.EROFS:
        return DiskProblem(
            "read_only",
            f"{folder} is on a read-only file system: {refused}. Make it writable again (remount it, or move the "
            "data folder); Hivenote carries on by itself.",
            now_ms,
        )
    if code in (errno.EACCES, errno.EPERM):
        return DiskProblem(
            "no_permission",
            f"Hivenote may not write in {folder}: {refused}. Give your user write permission on it again.",
            now_ms,
        )
    if code == errno.EFBIG:
        return DiskProblem(
            "write_failed",
            f"The notebook log in {folder} is too large for this file system or this process's file size limit: "
            f"{refused}. Run `hivenote compact`, or raise the limit.",
            now_ms,
        )
    if code == errno.EIO:
        return DiskProblem(
            "io_error",
            f"The disk reported an I/O error writing {folder}: {refused}. Check the disk (and its cable or "
            "network share); Hivenote tries again with the next write.",
            now_ms,
        )
    return DiskProblem(
        "write_failed", f"Writing {folder} failed ({exc}): {refused}. Hivenote tries again with the next write.", now_ms
    )


def _permission_fix(path: Path, folder: Path) -> str:
    """What to run so this user may write `path`: a file or folder of this user's that is read-only needs its write
    permission back (chmod u+w); one of another account (made by running Hivenote as another user, sudo hivenote)
    needs to be given back (chown)."""
    try:
        mine = path.stat().st_uid == os.geteuid()
    except OSError:
        mine = False
    if mine:
        kind = "folder" if path.is_dir() else "file"
        return f"give your account write permission on the {kind} again (chmod u+w {shlex.quote(str(path))})"
    owner, where = shlex.quote(getpass.getuser()), shlex.quote(str(folder))
    return f"give it back to your account (sudo chown -R {owner}: {where})"


def cannot_start(exc: OSError, folder: Path) -> StoreError:
    """Why the writer cannot open `folder` at start and what to do (reading works: the CLI opens it read-only)."""
    instead = "or choose another data folder (--data-dir)"
    exc = os_error(exc) or exc
    if exc.errno == errno.EROFS:
        why = f"{folder} is on a read-only file system. Remount it read-write, {instead}"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        fix = "give your user write permission on it"
        if os.name != "nt":
            fix = _permission_fix(Path(exc.filename) if exc.filename else folder, folder)
        why = f"Hivenote may not write in {folder}. To fix it, {fix}, {instead}"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why = f"The disk holding {folder} is full. Free some space, {instead}"
    else:
        why = f"Hivenote cannot write in {folder} ({exc.strerror or exc}). Check the folder and its disk, {instead}"
    return StoreError(f"{why}. Reading still works (hivenote list, search, export).")


def log_missing(folder: Path, now_ms: int) -> DiskProblem:
    return DiskProblem(
        "log_missing",
        f"The log folder {folder} is gone (deleted, or its drive or share is not mounted): new notes are refused. "
        "What this machine wrote is held by Hivenote and put back as soon as the folder exists again: restore or "
        "remount it, and keep Hivenote running until then (quitting first saves it in the data folder's rescued/).",
        now_ms,
    )


def disk_writable(folder: Path) -> bool:
    """Whether a write in `folder` has a chance now (room, a writable file system, permission); never writes."""
    try:
        fs = os.statvfs(folder)
    except (OSError, AttributeError):  # Windows has no statvfs: let the next write tell
        return os.access(folder, os.W_OK)
    read_only = bool(fs.f_flag & os.ST_RDONLY)
    return not read_only and fs.f_bavail * fs.f_frsize >= MIN_FREE_BYTES and os.access(folder, os.W_OK)


class OwnShard:
    """The open shard file. `size` is what was acknowledged: everything before it was written and fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open_shard(path)  # held for the store's lifetime
        self.size = os.fstat(self._file.fileno()).st_size
        self._cut_pending = False  # a failed write's bytes may still be at the end

    def fileno(self) -> int:
        return self._file.fileno()

    def close(self) -> None:
        self._file.close()

    def append(self, data: bytes) -> None:
        """Write all of `data` and fsync. On OSError the file may hold part of it: call `cut_back`."""
        fd = self._file.fileno()
        if self._cut_pending:
            self.cut_back()
            if self._cut_pending:
                raise OSError(errno.EIO, "a failed write's partial line could not be cut off yet")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        self.size += len(data)

    def cut_back(self) -> None:
        """Drop whatever a failed write left after the acknowledged bytes (retried before the next append)."""
        try:
            os.ftruncate(self._file.fileno(), self.size)
        except OSError as exc:
            self._cut_pending = True
            log.warning("could not cut a failed write off %s yet (%s); retrying before the next write", self.path, exc)
        else:
            self._cut_pending = False

    def writable(self) -> bool:
        """Whether the file takes changes again (a read-only or immutable one refuses even a same-size truncate);
        changes nothing."""
        try:
            os.ftruncate(self._file.fileno(), self.size)
        except OSError:
            return False
        self._cut_pending = False
        return True

    def missing(self) -> bool:
        """Deleted, or replaced by another file, since it was opened."""
        try:
            on_disk = os.stat(self.path)
        except OSError:
            return True
        held = os.fstat(self._file.fileno())
        return (on_disk.st_ino, on_disk.st_dev) != (held.st_ino, held.st_dev)

    def _chunks(self) -> Iterator[bytes]:
        """The acknowledged bytes, read through the handle."""
        fd, offset = self._file.fileno(), 0
        while offset < self.size:
            chunk = os.pread(fd, min(COPY_CHUNK, self.size - offset), offset)
            if not chunk:
                raise OSError(errno.EIO, f"the open shard ended at {offset} of {self.size} bytes")
            yield chunk
            offset += len(chunk)

    def digest(self) -> str:
        """SHA-256 (hex) of the acknowledged bytes."""
        h = hashlib.sha256()
        for chunk in self._chunks():
            h.update(chunk)
        return h.hexdigest()

    def path_holds(self) -> Literal["nothing", "same", "prefix", "other"]:
        """What the file now at the path holds compared with the acknowledged bytes: nothing (deleted), the same
        bytes, an older copy of them (a prefix), or another history (bytes that differ, or lines after ours)."""
        try:
            fh = open(self.path, "rb")  # noqa: SIM115 - closed below
        except OSError:
            return "nothing"
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size > self.size:
                return "other"
            for chunk in self._chunks():
                theirs = fh.read(len(chunk))
                if theirs != chunk[: len(theirs)]:
                    return "other"
                if len(theirs) < len(chunk):
                    break
        return "same" if size == self.size else "prefix"

    def adopt(self) -> None:
        """Append to the file now at the path (it holds exactly the acknowledged bytes)."""
        old, self._file = self._file, open_shard(self.path)
        old.close()
        self._cut_pending = False

    def copy_to(self, target: Path) -> None:
        """The acknowledged bytes, read through the handle (the file may be gone from its folder), put at `target` in
        one step (`write_whole`: a temp file made exclusively, fsynced, renamed; a link at `target` is replaced, never
        written through)."""
        write_whole(target, self._chunks())

    def put_back(self) -> None:
        """Write the acknowledged bytes to the path again (its folder must exist) and append there from now on. An
        older copy found at the path (a prefix of them) is simply replaced; any other file found there is kept beside
        it (`.<name>.replaced-<ms>`): the store moves to a new node id rather than overwrite another history, so this
        happens only if one appears in between."""
        with temp_beside(self.path) as (fd, tmp):
            for chunk in self._chunks():
                write_all(fd, chunk)
            os.fsync(fd)
            if self.path_holds() == "other":
                aside = self.path.with_name(f".{self.path.name}.replaced-{wall_ms()}")
                os.replace(self.path, aside)
                log.warning("%s was replaced by another file; kept that one as %s", self.path.name, aside.name)
            os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        old, self._file = self._file, open_shard(self.path)
        old.close()
        self._cut_pending = False
        log.warning("put %s back from memory (%d bytes): it had been deleted or replaced", self.path, self.size)


def open_shard(path: Path) -> BinaryIO:
    """The own shard opened for appending, unbuffered (a failed write leaves nothing in a buffer to be written
    later); created 0600, an older file open to other accounts closed, and never through a link planted at its name
    (the log folder may be a synced one)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | NO_FOLLOW, PRIVATE_FILE)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise OSError(
                errno.ELOOP, f"{path.name} is a symbolic link, not this machine's shard; remove it", str(path)
            ) from None
        raise
    try:
        tighten(path, fd)
        return open(fd, "a+b", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def cut_torn_tail(path: Path) -> int:
    """Cut a last line without `\\n` off the shard at `path` (a torn write: never acknowledged) before appending to
    it again. Returns the bytes cut."""
    try:
        fh = open(path, "r+b")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return 0
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        pos, keep = size, 0  # scan back for the last newline in blocks
        while pos > 0:
            start = max(0, pos - 65536)
            fh.seek(start)
            found = fh.read(pos - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return size - keep
