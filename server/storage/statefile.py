"""State files: the small documents a data dir keeps beside the log (tokens.json, settings.json, peers.json,
server.json, the desktop's records), each written whole and read whole, by any number of processes.

- `locked(path)` holds a cross-process lock (an OS file lock on `<name>.lock` beside the file) for a
  read-modify-write.
- `write_json` / `write_bytes` replace the file in one step: a temp file with a unique name, created exclusively
  (O_EXCL) in the same folder with the file's mode (0600 unless told), written, fsynced, renamed over the file, and
  the folder fsynced, so a crash or a power cut leaves the old file or the new one, never a mix or an empty file. A
  failure removes the temp file and raises StateFileUnwritable, which says why and that nothing changed.
- `read_json` tells a missing file (None) from a damaged one (StateFileCorrupt, naming the file and what to do): a
  damaged file is never taken for an empty one, so nothing is ever saved over it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import filelock

from ..core.errors import InvalidInput, StoreError
from .files import write_whole

LOCK_WAIT_S = 10.0
T = TypeVar("T")


class StateFileCorrupt(InvalidInput):
    """A state file exists but cannot be read as what it should hold; it is left as it is."""

    def __init__(self, path: Path, reason: str, fix: str) -> None:
        self.path = path
        super().__init__(f"cannot read {path}: {reason}; {fix}")


class StateFileUnwritable(StoreError, OSError):
    """A state file could not be saved (disk full, read-only, permissions); the old one is unchanged. Also an
    OSError, so code that handled the write's own OSError before it used this module still does; `error` is that
    OSError."""

    def __init__(self, path: Path, exc: OSError) -> None:
        self.path = path
        self.error = exc
        reason = exc.strerror or str(exc)
        super().__init__(
            f"cannot save {path}: {reason}; nothing was changed. Free some disk space or check that your account can "
            f"write to {path.parent}, then try again."
        )


class StateFileBusy(StoreError):
    """Another process held the file's lock for too long."""


def lock_path(path: Path) -> Path:
    return path.with_name(f"{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path, timeout: float = LOCK_WAIT_S) -> Iterator[None]:
    """Hold the cross-process lock of `path` (its folder must exist). Re-entrant within one thread."""
    lock = filelock.FileLock(lock_path(path), timeout=timeout, mode=0o600, is_singleton=True)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise StateFileBusy(
            f"{path} is being changed by another Hivenote process that has held it for {timeout:.0f} s; "
            "try again, or end that process (hivenote status names the server)."
        ) from None
    except OSError as exc:
        raise StateFileUnwritable(path, exc) from None
    try:
        yield
    finally:
        lock.release()


def read_bytes(path: Path, fix: str = "fix or delete the file") -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileCorrupt(path, exc.strerror or str(exc), fix) from None


def read_json(path: Path, fix: str = "fix or delete the file", *, expect: type = dict) -> Any:
    """The JSON value the file holds (checked to be an `expect`), or None when the file does not exist. An empty
    file, a cut one or any other content raises StateFileCorrupt naming the file and `fix` (what to do)."""
    data = read_bytes(path, fix)
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as exc:
        reason = "the file is empty" if not data.strip() else f"not valid JSON ({exc})"
        raise StateFileCorrupt(path, reason, fix) from None
    if not isinstance(value, expect):
        kind = "a JSON object" if expect is dict else "a JSON array" if expect is list else expect.__name__
        raise StateFileCorrupt(path, f"it must hold {kind}", fix)
    return value


def write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` atomically and durably (files.write_whole). Take `locked(path)` around a
    read-modify-write; a lone write needs no lock (the rename is atomic)."""
    try:
        write_whole(path, [data], mode=mode)
    except OSError as exc:
        raise StateFileUnwritable(path, exc) from None


def encode_json(value: Any, *, indent: int | None = 2, sort_keys: bool = False) -> bytes:
    """The one format of a JSON state file: UTF-8, indented, ending in a newline."""
    return (json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False) + "\n").encode("utf-8")


def write_json(path: Path, value: Any, *, mode: int = 0o600, sort_keys: bool = False) -> None:
    write_bytes(path, encode_json(value, sort_keys=sort_keys), mode=mode)
