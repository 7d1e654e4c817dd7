"""The synced-folder transport: `hivenote sync folder <path>` puts the log folder in a folder another program
replicates (Syncthing, Dropbox, a git working tree, a network mount); `use_default_folder` brings it back. Nothing
runs here afterwards: the store follows every shard in whatever folder `log_dir` names (shards.py).

A move never loses a byte: each shard is copied to a hidden temp name in the target, fsynced, compared byte for
byte, renamed into place and the folder fsynced; then the setting is saved; only then are the originals removed,
and only from the private `<data dir>/log` (a deletion in a synced folder would travel to every machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InvalidInput, ShardLocked, StoreError
from ..core.hlc import wall_ms
from ..settings import load_settings, save_setting
from ..storage.files import private_dir, temp_beside
from ..storage.identity import ShardClaim, claim_node, host_fingerprint, make_data_dir, record_shard
from ..storage.layout import Layout
from ..storage.shards import NO_FOLDER, is_shard_file
from ..storage.store import fsync_dir, lock_holder

CHUNK = 1 << 20


class FolderRefused(InvalidInput):
    """The folder cannot take the log, or would clash with it; nothing was changed."""


class ServerRunning(ShardLocked):
    """A Hivenote process writes this data dir: the log cannot move under it."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        StoreError.__init__(
            self,
            f"Hivenote is running for {data_dir} ({f'pid {pid}' if pid else 'pid unknown'}); stop it first "
            '("Stop server" in the tray, or end `hivenote serve`), then move the log folder. Nothing was changed.',
        )
        self.pid = pid


@dataclass(frozen=True)
class FolderMove:
    """What a move did, for the CLI, the tray and the dashboard to show. Names are shard file names."""

    source: Path
    target: Path
    node: str
    moved: tuple[str, ...] = ()  # copied into the target (this node's older copy there brought up to date)
    kept: tuple[str, ...] = ()  # the target already held these bytes, or more of them: left as they are
    set_aside: tuple[tuple[str, str], ...] = ()  # (name, copy): ours differed from the target's; kept beside it
    found: tuple[str, ...] = ()  # shards the target held that this data dir did not (other machines)
    left: tuple[str, ...] = ()  # originals left in the old folder: it may be synced, and deleting there is global

    def to_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "target": str(self.target),
            "node": self.node,
            "moved": list(self.moved),
            "kept": list(self.kept),
            "set_aside": [{"name": n, "copy": c} for n, c in self.set_aside],
            "found": list(self.found),
            "left": list(self.left),
        }

    def summary(self) -> str:
        lines = [f"The notebook's log folder is now {self.target}"]
        if self.source == self.target:
            return lines[0] + " (it already was; nothing moved)."
        parts = [(self.moved, "copied in"), (self.kept, "already there"), (self.found, "from other machines found")]
        lines += [f"  {len(names)} {what}: {', '.join(names)}" for names, what in parts if names]
        lines += [
            f"  {name} differed from the copy there; ours is kept beside it as {copy}" for name, copy in self.set_aside
        ]
        if self.left:
            lines.append(
                f"  The originals stay in {self.source} (a synced folder: deleting there deletes on every machine). "
                "Remove them yourself once no machine uses that folder."
            )
        elif self.moved or self.kept or self.set_aside:
            lines.append(f"  The originals in {self.source} were removed.")
        return "\n".join(lines)


@dataclass(frozen=True)
class _Step:
    name: str
    action: str  # "copy" (new in the target), "update" (our own older copy there), "keep", "aside"
    dest: str


def use_folder(data_dir: Path, target: Path, *, environ: Mapping[str, str] = os.environ) -> FolderMove:
    """Move the log into `target` (created if missing) and save it as `log_dir`. Another machine's shards already
    there are kept (that is how a second machine joins). Refuses, changing nothing, while a Hivenote process
    holds the data dir, for a folder inside the data dir (or holding it), one it cannot create or write, or one
    whose copy of this node's shard is not an older copy of ours (two installs claiming one node)."""
    data_dir = Path(data_dir)
    try:
        resolved = Path(target).expanduser().resolve()
    except (OSError, RuntimeError) as exc:
        raise FolderRefused(f"cannot use {target} as the log folder: {exc}") from None
    home = data_dir.resolve()
    if resolved == home or home in resolved.parents:
        raise FolderRefused(
            f"{resolved} is inside the data dir {home}; choose a folder outside it (the synced folder, or one in it)"
        )
    if resolved in home.parents:
        raise FolderRefused(
            f"the data dir {home} is inside {resolved}: syncing that folder would copy tokens and settings to other "
            "machines; choose a folder of its own (for example a new folder inside the synced one)"
        )
    return _move(data_dir, resolved, str(resolved), environ)


def use_default_folder(data_dir: Path, *, environ: Mapping[str, str] = os.environ) -> FolderMove:
    """Bring the log back into `<data dir>/log` and clear `log_dir`, with the same safety as `use_folder`. The
    shards stay in the synced folder too: removing them there would remove them from every other machine."""
    data_dir = Path(data_dir)
    return _move(data_dir, Layout(data_dir).log.resolve(), None, environ)


def _move(data_dir: Path, target: Path, setting: str | None, environ: Mapping[str, str]) -> FolderMove:
    if environ.get("HIVENOTE_LOG_DIR"):
        raise FolderRefused(
            "HIVENOTE_LOG_DIR is set in the environment and overrides the log_dir setting; change or unset it "
            "instead. Nothing was changed."
        )
    source = load_settings(data_dir=data_dir, environ=environ).log_path
    holder = lock_holder(data_dir)
    if holder is not None:
        raise ServerRunning(data_dir, holder)
    node = claim_node(data_dir, host_fingerprint(), wall_ms())
    make_data_dir(data_dir)
    private_dir(Layout(data_dir).log)
    claim = ShardClaim(data_dir, node)  # the writer's lock: no server or CLI writes while the shards move
    try:
        claim.acquire()
    except ShardLocked as exc:
        raise ServerRunning(data_dir, exc.pid) from None
    try:
        if _same_folder(source, target):
            save_setting(data_dir, "log_dir", setting)
            return FolderMove(source, target, node)
        return _move_locked(data_dir, source, target, node, setting)
    finally:
        claim.release()


def _move_locked(data_dir: Path, source: Path, target: Path, node: str, setting: str | None) -> FolderMove:
    created = _make_folder(target)
    try:
        _check_writable(target)
        steps = _plan(source, target, node)
    except BaseException:
        _remove_dirs(created)
        raise
    placed: list[Path] = []
    try:
        for step in steps:
            if step.action in ("copy", "aside"):
                _copy_verified(source / step.name, target / step.dest, overwrite=False)
                placed.append(target / step.dest)
            elif step.action == "update":  # our own older copy: ours holds every byte of it and more
                _copy_verified(source / step.name, target / step.dest, overwrite=True)
        fsync_dir(target)
        save_setting(data_dir, "log_dir", setting)
        own = target / f"{node}.jsonl"  # the file this install appends to from now on: its claim moves with it
        record_shard(data_dir, node, own, own.stat().st_size if own.exists() else 0)
    except OSError as exc:
        _undo(placed, created)
        raise FolderRefused(
            f"could not copy the log into {target} ({exc.strerror or exc}); nothing was moved. "
            "Free space or fix the folder's permissions, then try again."
        ) from None
    except BaseException:
        _undo(placed, created)
        raise
    # The setting names the target now and everything is durable there; what follows only tidies up.
    names = {s.name for s in steps}
    found = tuple(n for n in _shard_names(target) if n not in names and n not in {s.dest for s in steps})
    private = _same_folder(source, Layout(data_dir).log)
    left = [s.name for s in steps] if not private else _remove_originals(source, target, steps)
    return FolderMove(
        source,
        target,
        node,
        moved=tuple(s.name for s in steps if s.action in ("copy", "update")),
        kept=tuple(s.name for s in steps if s.action == "keep"),
        set_aside=tuple((s.name, s.dest) for s in steps if s.action == "aside"),
        found=found,
        left=tuple(left),
    )


def _plan(source: Path, target: Path, node: str) -> list[_Step]:
    """What to do with each shard of the source; refuses when the target's copy of our own shard is not ours."""
    own = f"{node}.jsonl"
    steps: list[_Step] = []
    names = _shard_names(source)
    for name in names:
        src, dest = source / name, target / name
        if not dest.exists():
            steps.append(_Step(name, "copy", name))
        elif dest.is_file() and _same_bytes(src, dest):
            steps.append(_Step(name, "keep", name))
        elif name == own:
            if not (dest.is_file() and _is_prefix(dest, src)):
                raise _clash(dest, node)
            steps.append(_Step(name, "update", name))
        elif dest.is_file() and _is_prefix(src, dest):
            steps.append(_Step(name, "keep", name))  # the target holds all of ours and more
        else:
            steps.append(_Step(name, "aside", _aside_name(target, name, node)))
    mine = target / own
    if own not in names and (mine.is_dir() or (mine.exists() and mine.stat().st_size > 0)):
        raise _clash(mine, node)
    return steps


def _clash(path: Path, node: str) -> FolderRefused:
    return FolderRefused(
        f"{path} already holds a different shard for this machine's node id {node}: another install claims the "
        "same node (a copied data dir?), or this data dir is older than that folder. Nothing was changed. "
        "Use a new data dir on one of them (it gets its own node id), or choose another folder."
    )


def _aside_name(target: Path, name: str, node: str) -> str:
    stem = name.removesuffix(".jsonl")
    for n in range(1, 1000):
        candidate = f"{stem}.copy-from-{node}{'' if n == 1 else f'-{n}'}.jsonl"
        if not (target / candidate).exists():
            return candidate
    raise FolderRefused(f"{target} holds too many copies of {name}; tidy it up and try again")


def _remove_originals(source: Path, target: Path, steps: list[_Step]) -> list[str]:
    """Delete each original whose bytes the target verifiably holds; returns the names left."""
    left = []
    for step in steps:
        src, dest = source / step.name, target / step.dest
        held = _is_prefix(src, dest) if step.action == "keep" else _same_bytes(src, dest)
        if not held:  # changed since it was copied (nothing should write it under our lock): keep it
            left.append(step.name)
            continue
        try:
            src.unlink()
        except OSError:
            left.append(step.name)
    with contextlib.suppress(OSError):
        fsync_dir(source)
    return left


# -- files ----------------------------------------------------------------------------------------------------------


def _shard_names(folder: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(folder) if e.is_file() and is_shard_file(e.name))
    except NO_FOLDER:
        return []


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _make_folder(target: Path) -> list[Path]:
    """Create `target` and any missing parents; returns what was created (innermost last)."""
    missing: list[Path] = []
    probe = target
    while not probe.exists() and not probe.is_symlink():
        missing.append(probe)
        probe = probe.parent
    if not probe.is_dir():
        what = "is a file" if probe == target else f"cannot be created: {probe} is a file"
        raise FolderRefused(f"{target} {what}; choose a folder")
    created: list[Path] = []
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except OSError as exc:
            _remove_dirs(created)
            raise FolderRefused(
                f"cannot create {target}: {exc.strerror or exc}; choose a folder you can write to"
            ) from None
        created.append(folder)
    return created


def _check_writable(target: Path) -> None:
    try:
        with temp_beside(target / ".hivenote-write-check"):
            pass  # made exclusively under a random name, removed again
    except OSError as exc:
        raise FolderRefused(
            f"cannot write to {target}: {exc.strerror or exc}; choose a folder you can write to, or fix its "
            "permissions. Nothing was changed."
        ) from None


def _copy_verified(src: Path, dest: Path, *, overwrite: bool) -> None:
    """Copy `src` to `dest` through a hidden temp file (random name, made exclusively, 0600) that is fsynced and
    compared before it is renamed in."""
    with temp_beside(dest) as (fd, tmp), open(src, "rb") as fin, os.fdopen(os.dup(fd), "wb") as fout:
        shutil.copyfileobj(fin, fout, CHUNK)
        fout.flush()
        st = os.fstat(fin.fileno())
        # Sync tools settle a clash by modification time: a copy must not look newer than the original.
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.fsync(fout.fileno())
        if not _same_bytes(src, tmp):
            raise FolderRefused(f"the copy of {src} in {dest.parent} does not match it; nothing was moved")
        if overwrite:
            os.replace(tmp, dest)
        else:
            _place_new(tmp, dest)


def _place_new(tmp: Path, dest: Path) -> None:
    """Rename without replacing a file a sync tool may have brought meanwhile (a hard link cannot clobber)."""
    try:
        os.link(tmp, dest)
    except FileExistsError:
        raise FolderRefused(f"{dest} appeared while the log was moving (a sync tool?); run the move again") from None
    except OSError:  # no hard links here (some network and FUSE file systems)
        if dest.exists():
            raise FolderRefused(
                f"{dest} appeared while the log was moving (a sync tool?); run the move again"
            ) from None
        os.replace(tmp, dest)


def _same_bytes(a: Path, b: Path) -> bool:
    return a.stat().st_size == b.stat().st_size and _is_prefix(a, b)


def _is_prefix(short: Path, long: Path) -> bool:
    """Whether `long` starts with every byte of `short`."""
    with open(short, "rb") as fs, open(long, "rb") as fl:
        if os.fstat(fs.fileno()).st_size > os.fstat(fl.fileno()).st_size:
            return False
        while chunk := fs.read(CHUNK):
            if fl.read(len(chunk)) != chunk:
                return False
    return True


def _remove_dirs(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _undo(placed: list[Path], created: list[Path]) -> None:
    """Take back the new files a failed move put in the target (never anything that was there before)."""
    for path in placed:
        with contextlib.suppress(OSError):
            path.unlink()
    _remove_dirs(created)
