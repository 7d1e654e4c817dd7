"""Starting on a full disk (issue 14, item 8): the notebook opens read-only with a clear `disk_full` problem instead of
not starting at all (agents keep their reads), every write says why it is refused, and writing starts by itself once
space is freed (real tmpfs mounts, filled up; a real `hivenote serve` killed with SIGKILL, as a crash leaves it)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.server.core.errors import StoreError, StoreWriteFailed
from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from tests.support.disks import fill, tmpfs
from tests.support.live import call, exchange, free_port, health
from tests.support.wait import wait_until

ME = Author("claude-code", "Claude Code", "")
WAIT_S = 20


def remember(store: Store, title: str) -> None:
    Notebook(store).remember(kind="fact", title=title, body=f"body of {title}", by=ME)


def titles(data: Path) -> set[str]:
    with Store(data, readonly=True) as store:
        return {n.title for n in Notebook(store).list()[0]}


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "8m") as mount:
        yield mount


def crashed_writer(data: Path) -> None:
    """A data dir whose writer died after writing (kill -9): node.json's claim still has the shard's size at open,
    so the next writer records the claim again, which needs the disk."""
    script = (
        "import os, sys\n"
        "from hivenote.server.storage.store import Store\n"
        "from hivenote.server.notebook import Notebook\n"
        "from hivenote.server.core.model import Author\n"
        "store = Store(sys.argv[1]).open()\n"
        "Notebook(store).remember(kind='fact', title='before the crash', body='', by=Author('cli', 'cli', ''))\n"
        "print('written', flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, encoding="utf-8"
    )
    assert child.stdout is not None and child.stdout.readline() == "written\n"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=WAIT_S)
    child.stdin.close()  # type: ignore[union-attr]
    child.stdout.close()


def test_a_store_opened_on_a_full_disk_reads_refuses_writes_with_the_reason_and_recovers(disk: Path) -> None:
    data = disk / "data"
    with Store(data) as store:
        remember(store, "kept")
    crashed_writer(data)
    filler = fill(disk)
    try:
        store = Store(data).open()
    except BaseException:
        filler.unlink()
        raise
    try:
        assert store.problem is not None and store.problem.kind == "disk_full", store.problem
        assert "is full" in store.problem.message and "Free some space" in store.problem.message
        assert "read-only" in store.problem.message
        assert {n.title for n in Notebook(store).list()[0]} == {"kept", "before the crash"}
        with pytest.raises(StoreWriteFailed, match=r"Nothing was saved: The disk holding .* is full"):
            remember(store, "refused")
        store.watch()  # still full: nothing changes
        assert store.problem is not None and store.problem.kind == "disk_full"
        filler.unlink()
        store.watch()  # the follow loop's call: the writer finishes opening
        assert store.problem is None
        remember(store, "after")
    finally:
        store.close()
    assert titles(data) == {"kept", "before the crash", "after"}


def test_a_claim_that_fails_on_a_full_disk_is_made_again_once_there_is_room(disk: Path) -> None:
    """The shard is shorter than node.json says this install wrote (restored from an older copy): a new node id is
    due, which the full disk cannot record. Once there is room the writer claims one; it never writes as the old id."""
    data = disk / "data"
    with Store(data) as store:
        remember(store, "kept")
        old = store.node
    record = json.loads((data / "node.json").read_text(encoding="utf-8"))
    record["claim"]["size"] += 1000
    (data / "node.json").write_text(json.dumps(record), encoding="utf-8")
    before = (data / "log" / f"{old}.jsonl").read_bytes()
    filler = fill(disk)
    try:
        store = Store(data).open()
    except BaseException:
        filler.unlink()
        raise
    try:
        assert store.problem is not None and store.problem.kind == "disk_full"
        filler.unlink()
        remember(store, "after")
        assert store.node != old
    finally:
        store.close()
    assert (data / "log" / f"{old}.jsonl").read_bytes() == before
    assert titles(data) == {"kept", "after"}


def test_a_new_data_dir_on_a_full_disk_says_the_disk_is_full(disk: Path) -> None:
    """Nothing to read yet and no node id recorded: this one does not start, and says why."""
    filler = fill(disk)
    try:
        with pytest.raises(StoreError, match=r"The disk holding .* is full\. Free some space"):
            Store(disk / "data").open()
    finally:
        filler.unlink()


def post_note(port: int, token: str, title: str) -> tuple[int, dict[str, object]]:
    data = json.dumps({"kind": "fact", "title": title, "body": ""}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    status, _, answer = exchange(urllib.request.Request(f"http://127.0.0.1:{port}/api/notes", data, headers))
    body = json.loads(answer)
    assert isinstance(body, dict)
    return status, body


def test_hivenote_serve_starts_on_a_full_disk_and_serves_reads(disk: Path) -> None:
    data = disk / "data"
    port = free_port()
    argv = [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "serve", "--port", str(port)]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, encoding="utf-8")
    try:
        wait_until(lambda: health(port) == 200, WAIT_S)
        token = json.loads((data / "tokens.json").read_text(encoding="utf-8"))["default"]
        assert post_note(port, token, "kept")[0] == 201
    finally:
        first.send_signal(signal.SIGKILL)  # a crash: the next start records its claim again
        first.communicate(timeout=WAIT_S)
    filler = fill(disk)
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, encoding="utf-8")
    try:
        wait_until(lambda: health(port) == 200 or server.poll() is not None, WAIT_S)
        assert server.poll() is None, server.communicate(timeout=WAIT_S)[1]
        notes = json.loads(call(port, token, "GET", "/api/notes"))
        assert [n["title"] for n in notes["results"]] == ["kept"]
        storage = json.loads(call(port, token, "GET", "/api/status"))["storage"]
        assert storage["ok"] is False and storage["problem"]["kind"] == "disk_full", storage
        status, body = post_note(port, token, "refused")
        assert status == 503 and "is full" in str(body["error"]), body
        filler.unlink()
        wait_until(lambda: json.loads(call(port, token, "GET", "/api/status"))["storage"]["ok"], WAIT_S)
        assert post_note(port, token, "after")[0] == 201
    finally:
        if filler.exists():
            filler.unlink()
        server.terminate()
        server.communicate(timeout=WAIT_S)
    assert titles(data) == {"kept", "after"}
