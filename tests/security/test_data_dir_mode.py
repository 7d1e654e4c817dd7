"""The data folder holds every note, the tokens and the peer book: whichever command creates it first creates it
for this user only (0700), even under the usual umask 022 that leaves new folders readable by every account. Every
folder the store makes in it (log/, cache/, sync/, rescued/) is 0700 and every file 0600, also when the data dir is
deleted under a running server and comes back, and an existing data dir open to other accounts is closed (and the
log says so)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hivenote.desktop.instance import Instance
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.settings import save_setting
from hivenote.server.storage.store import Store
from hivenote.server.sync.peerbook import editing
from hivenote.server.sync.replica import Replicas
from hivenote.server.tokens import Tokens
from tests.support.disks import vanish
from tests.support.internals import add_branch, replace

ME = Author("cli", "hivenote-cli", "")


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def open_store(data: Path) -> None:
    with Store(data):
        pass


def first_token(data: Path) -> None:
    Tokens(data / "tokens.json").default()


def a_setting(data: Path) -> None:
    save_setting(data, "port", 7790)


def a_peer_book(data: Path) -> None:
    with editing(data):
        pass


def the_tray_instance(data: Path) -> None:
    instance = Instance(data)
    assert instance.acquire(lambda _: None)
    instance.release()


@pytest.mark.parametrize("create", [open_store, first_token, a_setting, a_peer_book, the_tray_instance])
def test_whichever_command_creates_the_data_folder_makes_it_private(
    tmp_path: Path, create: Callable[[Path], None]
) -> None:
    data = tmp_path / "profile" / "hivenote"
    create(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert stat.S_IMODE(tmp_path.joinpath("profile").stat().st_mode) == 0o755  # parents are not ours to close


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def not_private(data: Path) -> list[str]:
    """Every folder under `data` (itself included) that is not 0700 and every file that is not 0600. Lock files hold
    only a pid; they sit in 0700 folders and are listed apart (see SECURITY.md)."""
    wrong = [] if mode(data) == 0o700 else [f". {mode(data):04o}"]
    for path in sorted(data.rglob("*")):
        want = 0o700 if path.is_dir() else 0o600
        if mode(path) != want and not path.name.endswith(".lock"):
            wrong.append(f"{path.relative_to(data)} {mode(path):04o}")
    return wrong


def remember(store: Store, title: str) -> None:
    Notebook(store).remember(kind="fact", title=title, body="", by=ME)


def test_an_existing_data_dir_open_to_others_is_closed_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "hivenote"
    data.mkdir(mode=0o755)
    caplog.set_level(logging.WARNING)
    with Store(data) as store:
        remember(store, "private")
        store.checkpoint()  # cache/oplog.bin
    assert not_private(data) == []
    said = [r.getMessage() for r in caplog.records if str(data) in r.getMessage() and "0700" in r.getMessage()]
    assert said and "0755" in said[0], caplog.text


def test_folders_and_shards_made_in_an_old_open_data_dir_are_private_too(tmp_path: Path) -> None:
    """A data dir a former Hivenote left 0755 with log/ 0755 and a shard 0644: all of it is closed at the next start."""
    data = tmp_path / "hivenote"
    with Store(data) as store:
        remember(store, "before")
        assert store.shard_path is not None
        shard = store.shard_path
    for folder in (data, data / "log"):
        folder.chmod(0o755)
    shard.chmod(0o644)
    with Store(data) as store:
        remember(store, "after")
    assert not_private(data) == []


def test_a_data_dir_deleted_under_a_running_store_comes_back_private(tmp_path: Path) -> None:
    data = tmp_path / "hivenote"
    with Store(data) as store:
        remember(store, "kept")
        vanish(data)
        store.watch()  # the follow loop's call: the log folder and the shard are put back
        assert store.problem is None
        assert not_private(data) == []
        remember(store, "after")
        store.checkpoint()
        assert not_private(data) == []


def test_every_file_the_store_and_the_replica_writer_make_is_private(tmp_path: Path) -> None:
    """The own shard, a branch kept when the shard vanished, other nodes' replicas (appended, replaced whole, kept as
    a branch), the op cache; and the shard rescued into the data dir when closing with a synced log folder gone."""
    data = tmp_path / "hivenote"
    with Store(data) as store:
        remember(store, "one")
        replicas = Replicas(store.log_dir, store.node)
        line = b'{"v":1,"node":"peer-0001","seq":1,"hlc":[1,0],"op":"note.trash","id":"x"}\n'
        replicas.append("peer-0001", line, 0)
        replace(replicas, "peer-0002", line.replace(b"peer-0001", b"peer-0002"))
        add_branch(replicas, "peer-0003", line.replace(b"peer-0001", b"peer-0003"))
        assert store.shard_path is not None
        store.shard_path.unlink()
        store.reincarnate("a test moves it on")  # keeps the vanished shard's bytes as a branch
        remember(store, "two")
        store.checkpoint()
    assert len(list((data / "log").glob("*~*.jsonl"))) == 2
    assert not_private(data) == []

    synced = tmp_path / "drive" / "log"
    synced.mkdir(parents=True)
    with Store(data, log_dir=synced) as store:
        remember(store, "three")
        vanish(tmp_path / "drive")  # unplugged: closing rescues the shard into the data dir
    assert list((data / "rescued").iterdir())
    assert not_private(data) == []


def test_a_synced_log_folder_keeps_its_own_mode_and_the_shards_in_it_are_private(tmp_path: Path) -> None:
    data, synced = tmp_path / "hivenote", tmp_path / "Sync" / "hivenote"
    synced.mkdir(parents=True, mode=0o755)
    synced.chmod(0o755)
    with Store(data, log_dir=synced) as store:
        remember(store, "shared folder")
        Replicas(synced, store.node).append(
            "peer-0001", b'{"v":1,"node":"peer-0001","seq":1,"hlc":[1,0],"op":"note.trash","id":"x"}\n', 0
        )
    assert mode(synced) == 0o755  # the user chose it (and may share it with a sync tool's account)
    assert {p.name: mode(p) for p in synced.glob("*.jsonl")} == dict.fromkeys(
        [p.name for p in synced.glob("*.jsonl")], 0o600
    )
    assert not_private(data) == []


def test_an_existing_folder_open_to_a_group_is_closed_too(tmp_path: Path) -> None:
    """No exception for a folder made 0750 on purpose: the notes, the tokens and the peer book are this user's."""
    data = tmp_path / "shared-on-purpose"
    data.mkdir(mode=0o750)
    open_store(data)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
