"""Real file systems for tests of the disk under a running server: a small tmpfs to fill up, an ext4 image on a loop
device that the kernel turns read-only on an error. Mounting needs root (CI runs as root, as the dev box does)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.system import needs


@needs("root, to mount file systems (tmpfs, ext4 on a loop device)")
def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


@needs("root, to mount a tmpfs")
@contextlib.contextmanager
def tmpfs(mount: Path, size: str = "4m") -> Iterator[Path]:
    mount.mkdir(parents=True, exist_ok=True)
    run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount))
    try:
        yield mount
    finally:
        run("umount", "-l", str(mount))


@needs("root, to mount an ext4 image on a loop device")
@contextlib.contextmanager
def ext4(image: Path, mount: Path, size: int = 16 << 20) -> Iterator[Path]:
    """An ext4 file system mounted with errors=remount-ro (see `trigger_error`)."""
    mount.mkdir(parents=True, exist_ok=True)
    with open(image, "wb") as fh:
        fh.truncate(size)
    run("mkfs.ext4", "-q", str(image))
    run("mount", "-o", "loop,errors=remount-ro", str(image), str(mount))
    try:
        yield mount
    finally:
        run("umount", "-l", str(mount))


def trigger_error(mount: Path) -> None:
    """What ext4 does on a real disk error with errors=remount-ro: writes fail with EROFS from now on."""
    for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines():
        source, target, *_ = line.split()
        if target == str(mount):
            device = source.rsplit("/", 1)[-1]
            Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("test\n", encoding="utf-8")
            return
    raise AssertionError(f"{mount} is not mounted")


def fill(disk: Path) -> Path:
    """Take every free byte (a file grown until the disk says no); delete the file to free them."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    fh.write(b"\0" * size)
    return filler


def vanish(folder: Path, *, leave_file: bool = False) -> None:
    """Take `folder` away in one step, as unplugging a drive does, then delete it. `shutil.rmtree` in place would
    delete file by file, and a running store's follow loop may put its shard back in between (the folder is then
    not empty and rmtree fails). With `leave_file` an empty file takes the folder's place in the same step
    (renameat2 RENAME_EXCHANGE), so nothing can make the folder again first."""
    gone = folder.with_name(f".{folder.name}.vanished")
    if leave_file:
        gone.write_bytes(b"")
        libc = ctypes.CDLL(None, use_errno=True)
        at_fdcwd, rename_exchange = -100, 2
        if libc.renameat2(at_fdcwd, bytes(gone), at_fdcwd, bytes(folder), rename_exchange) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(folder))
    else:
        folder.rename(gone)
    shutil.rmtree(gone)
