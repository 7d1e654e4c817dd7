"""The disk under a running server: the log folder deleted (put back from the open shard), a folder that cannot come
back (writes refused, nothing changes), a disk that fills up and a file system remounted read-only (real tmpfs
mounts): each is a clear problem in status, nothing acknowledged is lost or torn, and writing works again by itself
once the condition clears."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.desktop.supervisor import Supervisor
from hivenote.server.core.errors import ShardLocked, StoreError, StoreWriteFailed
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from tests.support.disks import ext4, fill, run, tmpfs, trigger_error, vanish
from tests.support.live import call, exchange, free_port, serve
from tests.support.wait import wait_until

ME = Author("claude-code", "Claude Code", "")
WAIT_S = 10


def remember(notebook: Notebook, title: str) -> str:
    return notebook.remember(kind="fact", title=title, body=f"body of {title}", by=ME).note.id


def titles(data_dir: Path, log_dir: Path | None = None) -> set[str]:
    """What a fresh reader finds on disk."""
    with Store(data_dir, readonly=True, log_dir=log_dir) as store:
        return {n.title for n in Notebook(store).list()[0]}


def test_a_deleted_log_folder_is_put_back_from_the_open_shard_and_the_lock_taken_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        notebook = Notebook(store)
        for i in range(5):
            remember(notebook, f"note {i}")
        assert store.shard_path is not None
        before = store.shard_path.read_bytes()
        vanish(data / "log")

        store.watch()
        assert store.shard_path.read_bytes() == before
        with pytest.raises(ShardLocked):  # the lock is held again: no second writer can start meanwhile
            Store(data).open()
        remember(notebook, "after")
        assert store.problem is None
    assert titles(data) == {f"note {i}" for i in range(5)} | {"after"}


def test_a_deleted_data_dir_gets_its_log_folder_and_shard_back(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        remember(Notebook(store), "kept")
        vanish(data)  # the whole data dir: its log folder is Hivenote's own, made again
        store.watch()
        assert store.problem is None
        remember(Notebook(store), "after")
    with Store(data, readonly=True) as reader:  # node.json went with the data dir: read the shard by name
        assert {n.title for n in Notebook(reader).list()[0]} == {"kept", "after"}


def test_closing_while_the_log_folder_is_gone_saves_the_shard_in_the_data_dir(tmp_path: Path) -> None:
    data, synced = tmp_path / "data", tmp_path / "drive" / "hivenote"
    synced.mkdir(parents=True)
    with Store(data, log_dir=synced) as store:
        remember(Notebook(store), "kept")
        saved = synced.joinpath(f"{store.node}.jsonl").read_bytes()
        node = store.node
        vanish(tmp_path / "drive")
    assert (data / "rescued" / f"{node}.jsonl").read_bytes() == saved


def test_a_write_finds_the_deleted_shard_and_puts_it_back_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        notebook = Notebook(store)
        remember(notebook, "first")
        assert store.shard_path is not None
        store.shard_path.unlink()
        remember(notebook, "second")  # no watch in between
        assert store.shard_path.exists()
    assert titles(data) == {"first", "second"}


def test_another_file_put_in_place_of_the_shard_moves_this_install_to_a_new_node_and_keeps_both(
    tmp_path: Path,
) -> None:
    """Another history where this node's shard was: it is not overwritten (nor set aside, hidden), this install's
    bytes are kept beside it as a branch that is folded like any shard, and the next write uses a new node id."""
    data = tmp_path / "data"
    with Store(data) as store:
        remember(Notebook(store), "mine")
        assert store.shard_path is not None
        old, ours = store.node, store.shard_path.read_bytes()
        stranger = store.shard_path.with_name("stranger.tmp")
        stranger.write_bytes(b"not ours\n")
        stranger.replace(store.shard_path)
        store.watch()
        assert store.node != old and (store.log_dir / f"{old}.jsonl").read_bytes() == b"not ours\n"
        assert [p.read_bytes() for p in store.log_dir.glob(f"{old}~*.jsonl")] == [ours]
        assert not list(store.log_dir.glob(".*replaced*"))
        remember(Notebook(store), "after")
        assert [i.message for i in store.incidents if "replaced by another history" in i.message]
    assert titles(data) == {"mine", "after"}


def test_a_log_folder_that_cannot_come_back_refuses_writes_until_it_does(tmp_path: Path) -> None:
    data, synced = tmp_path / "data", tmp_path / "drive" / "hivenote"
    synced.mkdir(parents=True)
    with Store(data, log_dir=synced) as store:
        notebook = Notebook(store)
        remember(notebook, "kept")
        saved = synced.joinpath(f"{store.node}.jsonl").read_bytes()
        vanish(tmp_path / "drive")  # the drive is unplugged: its mount point is gone too

        with pytest.raises(StoreWriteFailed, match=r"Nothing was saved: The log folder .* is gone"):
            store.watch()
        assert store.problem is not None and store.problem.kind == "log_missing"
        assert "keep Hivenote running" in store.problem.message
        with pytest.raises(StoreWriteFailed, match="Nothing was saved"):
            remember(notebook, "refused")
        assert {n.title for n in notebook.list()[0]} == {"kept"}  # nothing changed

        synced.mkdir(parents=True)  # plugged back in, empty
        store.watch()
        assert store.problem is None
        assert synced.joinpath(f"{store.node}.jsonl").read_bytes() == saved
        remember(notebook, "after")
    assert titles(data, synced) == {"kept", "after"}


# -- real file systems: a full disk and a read-only remount ---------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs holding the data dir."""
    with tmpfs(tmp_path / "disk") as mount:
        yield mount


def status(port: int, token: str) -> dict[str, object]:
    storage = json.loads(call(port, token, "GET", "/api/status"))["storage"]
    assert isinstance(storage, dict)
    return storage


def post_note(port: int, token: str, title: str, text: str = "") -> dict[str, object]:
    """The answer to remembering a note; with "status" added when it was refused."""
    data = json.dumps({"kind": "fact", "title": title, "body": text}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    status, _, answer = exchange(urllib.request.Request(f"http://127.0.0.1:{port}/api/notes", data, headers))
    body = json.loads(answer)
    assert isinstance(body, dict)
    return body if status < 400 else {"status": status, **body}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_a_full_disk_refuses_writes_clearly_and_recovers_when_space_is_freed(small_disk: Path) -> None:
    data = small_disk / "data"
    with serve(data) as server:
        port = port_of(server.url)
        for i in range(3):
            assert "note" in post_note(port, server.token, f"saved {i}")
        assert status(port, server.token) == {"ok": True, "problem": None}
        assert server.store.shard_path is not None
        shard = server.store.shard_path.read_bytes()

        filler = fill(small_disk)
        refused = post_note(port, server.token, "refused", "x" * 30_000)
        assert refused["status"] == 503
        error = refused["error"]
        assert isinstance(error, dict)
        assert "is full" in error["message"] and "Free some space" in error["message"]
        assert server.store.shard_path.read_bytes() == shard  # no partial line left behind
        problem = status(port, server.token)["problem"]
        assert isinstance(problem, dict) and problem["kind"] == "disk_full"
        folded = server.store.shards
        again = post_note(port, server.token, "small")  # refused at once: no write tried, no fold again
        assert again["status"] == 503 and "is full" in str(again["error"])
        assert server.store.shards is folded

        filler.unlink()
        wait_until(lambda: status(port, server.token)["ok"], WAIT_S)  # cleared without a write
        assert "note" in post_note(port, server.token, "after")
    assert titles(data) == {"saved 0", "saved 1", "saved 2", "after"}


@pytest.fixture
def ext4_disk(tmp_path: Path) -> Iterator[Path]:
    with ext4(tmp_path / "disk.img", tmp_path / "ext4") as mount:
        yield mount


def test_a_disk_the_kernel_turns_read_only_refuses_writes_and_keeps_what_was_saved(ext4_disk: Path) -> None:
    data = ext4_disk / "data"
    with serve(data) as server:
        port = port_of(server.url)
        assert "note" in post_note(port, server.token, "before")
        trigger_error(ext4_disk)

        refused = post_note(port, server.token, "refused")
        assert refused["status"] == 503
        assert "read-only file system" in str(refused["error"]) and "nothing already saved is lost" in str(
            refused["error"]
        )
        problem = status(port, server.token)["problem"]
        assert isinstance(problem, dict) and problem["kind"] == "read_only"
    # Such a file system comes back only unmounted and checked, so this recovery is a restart.
    image = ext4_disk.parent / "disk.img"
    run("umount", str(ext4_disk))
    subprocess.run(["e2fsck", "-fy", str(image)], capture_output=True, timeout=60, check=False)  # exit 1: fixed
    run("mount", "-o", "loop,errors=remount-ro", str(image), str(ext4_disk))
    with serve(data) as server:
        assert "note" in post_note(port_of(server.url), server.token, "after")
        health = json.loads(call(port_of(server.url), server.token, "GET", "/api/status"))["shards"]
        assert all(shard["bad_lines"] == 0 and shard["torn_tail_bytes"] == 0 for shard in health.values())
    assert titles(data) == {"before", "after"}


def test_an_immutable_shard_refuses_writes_and_recovers_by_itself_when_writable_again(ext4_disk: Path) -> None:
    data = ext4_disk / "data"
    with serve(data) as server:
        port = port_of(server.url)
        assert "note" in post_note(port, server.token, "before")
        assert server.store.shard_path is not None
        run("chattr", "+i", str(server.store.shard_path))
        try:
            refused = post_note(port, server.token, "refused")
            assert refused["status"] == 503
            assert "may not write" in str(refused["error"])
            problem = status(port, server.token)["problem"]
            assert isinstance(problem, dict) and problem["kind"] == "no_permission"
        finally:
            run("chattr", "-i", str(server.store.shard_path))
        wait_until(lambda: status(port, server.token)["ok"], WAIT_S)
        assert "note" in post_note(port, server.token, "after")
    assert titles(data) == {"before", "after"}


def test_a_log_folder_deleted_under_the_server_comes_back_with_every_acknowledged_note(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as server:
        port = port_of(server.url)
        for i in range(3):
            assert "note" in post_note(port, server.token, f"saved {i}")
        vanish(data / "log")
        assert server.store.shard_path is not None
        wait_until(server.store.shard_path.exists, WAIT_S)  # the follow loop put it back
        assert status(port, server.token) == {"ok": True, "problem": None}
        assert "note" in post_note(port, server.token, "after")
    assert titles(data) == {"saved 0", "saved 1", "saved 2", "after"}


def test_starting_on_a_read_only_file_system_says_so_and_what_to_do(ext4_disk: Path) -> None:
    data = ext4_disk / "data"
    with Store(data) as store:
        remember(Notebook(store), "kept")
    run("mount", "-o", "remount,ro", str(ext4_disk))

    with pytest.raises(StoreError, match=r"is on a read-only file system\. Remount it read-write, or choose another"):
        Store(data).open()
    served = subprocess.run(
        [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "serve", "--port", str(free_port())],
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert served.returncode != 0 and "Traceback" not in served.stderr
    assert "read-only file system" in served.stderr and "Reading still works" in served.stderr
    # The tray serves it read-only (issue 35: it went to an error state when no token file had been written; the
    # owner token is then held in memory for the run).
    assert not (data / "tokens.json").exists()
    supervisor = Supervisor(data, {"port": free_port()})
    try:
        assert supervisor.start().wait(WAIT_S)
        status = supervisor.status()
        assert status.server == "running" and "read-only file system" in status.title, status
    finally:
        supervisor.shutdown()
    assert titles(data) == {"kept"}  # and reading works
