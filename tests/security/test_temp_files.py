"""Temp files beside the log and the state (issue 14, item 12's siblings): a synced log folder can carry links
(Syncthing, git), so a link planted at a temp file's name must never be written through. Each writer used a fixed or
predictable name opened without O_EXCL; each one here plants a link at that old name pointing at a file outside and
checks that the file is untouched, the work is done all the same, and no temp file is left. A write that fails (a
full disk) leaves no temp file either."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hivenote.server.core.errors import StoreError
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage import opcache
from hivenote.server.storage.store import Store
from hivenote.server.sync.replica import Replicas
from hivenote.server.sync.s3 import BucketSync
from tests.support.disks import fill, tmpfs, vanish
from tests.support.internals import replace

if TYPE_CHECKING:
    from tests.support.s3env import Moto

ME = Author("cli", "hivenote-cli", "")
PRECIOUS = b"the victim's own bytes\n"


def remember(store: Store, title: str) -> None:
    Notebook(store).remember(kind="fact", title=title, body="b" * 200, by=ME)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "victim"
    path.parent.mkdir()
    path.write_bytes(PRECIOUS)
    return path


def plant(link: Path, victim: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    return link


def temps(folder: Path) -> list[str]:
    """Temp files left in `folder` (a planted link is not one)."""
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp") and not p.is_symlink())


def test_compaction_never_writes_through_a_link_at_its_temp_name(tmp_path: Path, victim: Path) -> None:
    with Store(tmp_path / "data") as store:
        for i in range(3):
            remember(store, f"note {i}")
        assert store.shard_path is not None
        plant(store.shard_path.with_name(f".{store.shard_path.name}.compact.tmp"), victim)
        store.compact()
        assert victim.read_bytes() == PRECIOUS
        assert not store.shard_path.is_symlink() and temps(store.log_dir) == []
        remember(store, "after")


def test_the_branch_kept_when_the_shard_vanished_is_not_written_through_a_link(tmp_path: Path, victim: Path) -> None:
    with Store(tmp_path / "data") as store:
        remember(store, "mine")
        assert store.shard_path is not None
        ours = store.shard_path.read_bytes()
        branch = f"{store.node}~{hashlib.sha256(ours).hexdigest()[:12]}.jsonl"
        plant(store.log_dir / f".{branch}.tmp", victim)
        store.shard_path.unlink()
        store.reincarnate("a test moves it on")
        assert victim.read_bytes() == PRECIOUS
        assert (store.log_dir / branch).read_bytes() == ours and temps(store.log_dir) == []


def test_putting_the_shard_back_never_writes_through_a_link_at_its_temp_name(tmp_path: Path, victim: Path) -> None:
    with Store(tmp_path / "data") as store:
        remember(store, "kept")
        assert store.shard_path is not None
        ours = store.shard_path.read_bytes()
        plant(store.shard_path.with_name(f".{store.shard_path.name}.restore.tmp"), victim)
        store.shard_path.unlink()
        store.watch()  # puts it back from the open handle
        assert victim.read_bytes() == PRECIOUS
        assert store.shard_path.read_bytes() == ours and temps(store.log_dir) == []


def test_the_rescued_shard_is_not_written_through_a_link_at_its_name(tmp_path: Path, victim: Path) -> None:
    data, synced = tmp_path / "data", tmp_path / "drive" / "log"
    synced.mkdir(parents=True)
    with Store(data, log_dir=synced) as store:
        remember(store, "kept")
        ours = synced.joinpath(f"{store.node}.jsonl").read_bytes()
        rescued = plant(data / "rescued" / f"{store.node}.jsonl", victim)
        vanish(tmp_path / "drive")
    assert victim.read_bytes() == PRECIOUS
    assert not rescued.is_symlink() and rescued.read_bytes() == ours


def test_a_replaced_replica_is_not_written_through_a_link_at_its_temp_name(tmp_path: Path, victim: Path) -> None:
    log = tmp_path / "log"
    replicas = Replicas(log, "me-0001")
    name = "peer-0001.jsonl"
    plant(log / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp", victim)
    line = b'{"v":1,"node":"peer-0001","seq":1,"hlc":[1,0],"op":"note.trash","id":"x"}\n'
    replace(replicas, "peer-0001", line)
    assert victim.read_bytes() == PRECIOUS
    assert (log / name).read_bytes() == line and temps(log) == []


def test_the_op_cache_is_not_written_through_a_link_at_its_temp_name(tmp_path: Path, victim: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "cached")
        plant(data / "cache" / f".oplog.bin.{os.getpid()}.tmp", victim)
        store.checkpoint()
    assert victim.read_bytes() == PRECIOUS
    assert opcache.load(data / "cache" / "oplog.bin") and temps(data / "cache") == []


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    """The S3 server on loopback, in an AWS environment that reaches nothing else."""
    from tests.support.s3env import moto_sandbox

    with moto_sandbox(monkeypatch, tmp_path) as server:
        yield server


def test_the_bucket_state_is_not_written_through_a_link_at_its_temp_name(
    tmp_path: Path, victim: Path, moto: Moto
) -> None:
    from tests.support.s3env import s3_settings

    with moto.client() as client:
        client.create_bucket(Bucket="hive-temp")
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "up")
        plant(data / "sync" / ".s3-state.json.tmp", victim)
        sync = BucketSync.open(s3_settings(data, moto, "hive-temp"), Replicas(store.log_dir, store.node))
        with contextlib.closing(sync):
            assert sync.step(pull=False) == (True, [])
    assert victim.read_bytes() == PRECIOUS
    assert b'"sent"' in (data / "sync" / "s3-state.json").read_bytes() and temps(data / "sync") == []


def test_a_compaction_that_fails_on_a_full_disk_leaves_no_temp_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "4m") as disk, Store(disk / "data") as store:
        for i in range(50):
            remember(store, f"note {i}")
        filler = fill(disk)
        try:
            with pytest.raises(StoreError, match="full"):
                store.compact()
            assert temps(store.log_dir) == []
        finally:
            filler.unlink()
        store.compact()  # with room again it works
        assert temps(store.log_dir) == []
