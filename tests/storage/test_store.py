"""The store on real files: locking, fsync'd appends, group commit, following, torn tails, bad lines, compaction."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from hivenote.server.core.fold import State
from hivenote.server.core.hlc import wall_ms
from hivenote.server.core.model import Author, Entity, Op
from hivenote.server.core.search import note_index, refresh_note_index, search_notes
from hivenote.server.graph import Graph
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import ReadOnlyStore, ShardLocked, Store, StoreError, lock_holder
from tests.support.internals import apply_all
from tests.support.wait import wait_until

BY = Author(agent="cli")


def remember(store: Store, title: str, body: str = "") -> str:
    return Notebook(store).remember(kind="fact", title=title, body=body).note.id


def shard(store: Store) -> Path:
    assert store.shard_path is not None
    return store.shard_path


def run_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(data_dir), *args],
        capture_output=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


@pytest.mark.system  # a second Hivenote process holds the store
def test_a_second_process_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "held")
        result = run_cli(data, "remember", "--kind", "fact", "--title", "second writer")
        assert result.returncode == 4
        assert f"Hivenote is already running for this data dir (pid {os.getpid()})" in result.stderr
        assert lock_holder(data) == os.getpid()
        # Reads still work beside the running writer.
        listed = run_cli(data, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [n["title"] for n in json.loads(listed.stdout)["results"]] == ["held"]
    assert lock_holder(data) is None
    assert run_cli(data, "remember", "--kind", "fact", "--title", "after close").returncode == 0


def test_a_second_store_in_the_same_process_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "d"), pytest.raises(ShardLocked, match="already running"):
        Store(tmp_path / "d").open()


def test_every_acknowledged_write_is_on_disk_and_seq_continues_after_reopen(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        ids = [remember(store, f"note {i}") for i in range(5)]
        node = store.node
    lines = (data / "log" / f"{node}.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(line)["seq"] for line in lines[:-1]] == [1, 2, 3, 4, 5]
    with Store(data) as store:
        assert store.node == node
        assert {n.id for n in store.state.iter_notes()} == set(ids)
        remember(store, "sixth")
        assert store.state.nodes[node].max_seq == 6


def test_the_clock_never_runs_backwards_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data, now_ms=lambda: 5_000) as store:
        remember(store, "from the future")
    with Store(data, now_ms=lambda: 1_000) as store:  # the wall clock was set back
        remember(store, "later")
        stamps = sorted(op.stamp for rec in store.state.notes.values() for op in rec.live_ops())
    assert stamps[1][:2] == (5_000, 1)


def test_concurrent_writers_share_one_fsync(tmp_path: Path) -> None:
    with Store(tmp_path / "d") as store:
        notebook = Notebook(store)
        store._flush_lock.acquire()  # hold the disk so writers pile up behind it
        threads = [
            threading.Thread(target=notebook.remember, kwargs={"kind": "fact", "title": f"w{i}"}) for i in range(8)
        ]
        for t in threads:
            t.start()
        wait_until(lambda: store._enqueued == 8, interval=0.001)
        before = store.fsyncs
        store._flush_lock.release()
        for t in threads:
            t.join()
        assert store.fsyncs - before == 1
        assert len(list(store.state.iter_notes())) == 8
    with Store(tmp_path / "d") as again:
        assert sorted(n.title for n in again.state.iter_notes()) == [f"w{i}" for i in range(8)]


def test_many_threads_writing_lose_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "d") as store:
        notebook = Notebook(store)

        def work(i: int) -> None:
            for j in range(25):
                notebook.remember(kind="fact", title=f"t{i}-{j}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        node = store.node
    with Store(tmp_path / "d") as store:
        assert len(list(store.state.iter_notes())) == 200
        assert store.state.seen(node) == set(range(1, 201))


def test_a_torn_last_line_is_ignored_by_readers_and_cut_by_the_owner(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        remember(store, "whole")
        path = shard(store)
    with path.open("ab") as fh:
        fh.write(b'{"v":1,"node":"x","seq":9,"hlc":[1,0],"op":"note.set","id":"TORN","fie')
    with Store(data, readonly=True) as reader:
        assert [n.title for n in reader.state.iter_notes()] == ["whole"]
        assert reader.health()[path.name].torn_tail_bytes > 0
    with Store(data) as store:
        assert store.repaired_tail_bytes > 0
        remember(store, "after repair")
    content = path.read_bytes()
    assert b"TORN" not in content and content.endswith(b"\n")
    with Store(data, readonly=True) as reader:
        assert sorted(n.title for n in reader.state.iter_notes()) == ["after repair", "whole"]
        assert reader.health()[path.name].bad == 0


def test_garbage_in_the_middle_is_skipped_counted_reported_and_kept(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        remember(store, "before")
        path = shard(store)
    with path.open("ab") as fh:
        fh.write(b"this is not json\n")
        fh.write(b'{"v":1,"op":"note.set"}\n')
        fh.write(b'{"v":7,"op":"note.teleport","node":"n","seq":1,"hlc":[1,0]}\n')
    with Store(data) as store:
        remember(store, "after")
        health = store.health()[path.name]
        assert (health.bad, health.unknown) == (2, 1)
        assert [b.line for b in health.bad_lines] == [2, 3, 4]
        assert "newer than this Hivenote" in health.bad_lines[2].reason
        assert sorted(n.title for n in store.state.iter_notes()) == ["after", "before"]
        store.compact()
    assert b"this is not json\n" in path.read_bytes()


def test_doctor_shows_unreadable_lines_with_their_numbers(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        remember(store, "ok")
        path = shard(store)
    with path.open("ab") as fh:
        fh.write(b"garbage\n")
    result = run_cli(data, "doctor")
    assert result.returncode == 0, result.stderr
    assert "1 unreadable" in result.stdout and "line 2: not JSON" in result.stdout


def copy_like_a_sync_tool(src: Path, dst_dir: Path, name: str | None = None) -> Path:
    """Write a fresh copy next to the target, then rename it over (a new inode, as Syncthing does)."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    target = dst_dir / (name or src.name)
    tmp = dst_dir / f".syncthing.{target.name}.tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, target)
    return target


def test_a_follower_sees_growth_replacement_and_compaction_of_another_shard(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        notebook = Notebook(a)
        first = remember(a, "one")
        copy_like_a_sync_tool(shard(a), b.log_dir)
        assert b.refresh() == 1
        notebook.update(first, title="one, edited")
        notebook.update(first, title="one, edited again")
        remember(a, "two")
        copy_like_a_sync_tool(shard(a), b.log_dir)  # grown and replaced: continue from the offset
        assert b.refresh() == 3
        assert b.health()[shard(a).name].bad == 0
        before, after = a.compact()
        assert after < before
        copy_like_a_sync_tool(shard(a), b.log_dir)  # shrunk: re-read whole, nothing new
        assert b.refresh() == 0
        remember(a, "three")
        copy_like_a_sync_tool(shard(a), b.log_dir)
        assert b.refresh() == 1
        assert b.health()[shard(a).name].bad == 0
        theirs = {n.id: n.to_json() for n in a.state.iter_notes()}
        assert {n.id: n.to_json() for n in b.state.iter_notes()} == theirs


def test_a_sync_conflict_copy_is_folded_and_changes_nothing_it_already_had(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        remember(a, "shared")
        copy_like_a_sync_tool(shard(a), b.log_dir)
        conflict = f"{shard(a).stem}.sync-conflict-20261130-101010-ABCDEFG.jsonl"
        copy_like_a_sync_tool(shard(a), b.log_dir, conflict)
        b.refresh()
        assert [n.title for n in b.state.iter_notes()] == ["shared"]
        remember(a, "only in the copy")
        copy_like_a_sync_tool(shard(a), b.log_dir, conflict)
        b.refresh()
        assert sorted(n.title for n in b.state.iter_notes()) == ["only in the copy", "shared"]
        # Temp files of sync tools are never read.
        (b.log_dir / f".syncthing.{shard(a).name}.tmp").write_bytes(b"partial garbage\n")
        b.refresh()
        assert all(h.bad == 0 for h in b.health().values())


def test_compaction_keeps_the_fold_and_drops_shadowed_history(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        notebook, graph = Notebook(store), Graph(store)
        note = remember(store, "v0")
        for i in range(1, 6):
            notebook.update(note, title=f"v{i}")
        gone = remember(store, "to purge", body="secret")
        notebook.forget(gone)
        notebook.purge(gone)
        graph.create_entities([Entity("Ann", "person", ("a", "b"))])
        graph.delete_observations([("Ann", ["a"])])
        graph.create_entities([Entity("Old", "thing", ("x",))])
        graph.delete_entities(["Old"])
        snapshot = store.state.snapshot()
        before, after = store.compact()
        assert after < before
        assert store.state.snapshot() == snapshot
        remember(store, "after compaction")
    assert b"secret" not in (data / "log" / f"{store.node}.jsonl").read_bytes()
    with Store(data) as again:
        snap = again.state.snapshot()
        del snap["notes"][next(n.id for n in again.state.iter_notes() if n.title == "after compaction")]
        assert snap == snapshot
        assert [v.fields.get("title") for v in again.state.history(note)] == ["v0", "v5"]


def test_compaction_refuses_when_the_result_would_differ(tmp_path: Path) -> None:
    with Store(tmp_path / "d") as store:
        remember(store, "keep me")
        original = shard(store).read_bytes()
        import hivenote.server.core.compaction as compaction

        real = compaction.lines_to_keep
        compaction.lines_to_keep = lambda lines, state, node: []  # a broken rule must be caught
        try:
            with pytest.raises(StoreError, match="would change the notebook"):
                store.compact()
        finally:
            compaction.lines_to_keep = real
        assert shard(store).read_bytes() == original


def test_a_node_json_copied_from_another_machine_gets_a_new_node_and_keeps_the_old_shard(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data, fingerprint=lambda: "machine-a") as store:
        remember(store, "written on a")
        old = store.node
    with Store(data, fingerprint=lambda: "machine-b") as store:
        assert store.node != old
        remember(store, "written on b")
        assert sorted(n.title for n in store.state.iter_notes()) == ["written on a", "written on b"]
    old_lines = (data / "log" / f"{old}.jsonl").read_bytes().count(b"\n")
    assert old_lines == 1


def test_a_remote_stamp_far_in_the_future_is_applied_reported_and_does_not_drag_the_clock(tmp_path: Path) -> None:
    now = 1_000_000
    future = now + 10 * 3_600_000
    data = tmp_path / "d"
    (data / "log").mkdir(parents=True)
    line = {
        "v": 1,
        "node": "skewed-0000",
        "seq": 1,
        "hlc": [future, 0],
        "op": "note.set",
        "id": "FUTURE",
        "fields": {"kind": "fact", "title": "from a broken clock"},
    }
    (data / "log" / "skewed-0000.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    with Store(data, now_ms=lambda: now) as store:
        assert store.clock.skew.ahead_ms == {"skewed-0000": future - now}
        assert store.state.note("FUTURE") is not None
        remember(store, "local")
        local = next(n for n in store.state.iter_notes() if n.title == "local")
        assert local.created <= now + store.clock.max_offset_ms


def test_writing_to_a_read_only_store_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "d", readonly=True) as store, pytest.raises(ReadOnlyStore):
        store.write(lambda state: [("entity.del", {"name": "x"})], BY)


def test_a_write_that_fails_on_disk_acknowledges_nothing_and_the_store_recovers(tmp_path: Path) -> None:
    """A real EFBIG from the kernel (file size limit), in a child process so the limit stays there."""
    script = textwrap.dedent(
        """
        import resource, signal, sys
        from pathlib import Path
        from hivenote.server.notebook import Notebook
        from hivenote.server.storage.store import Store, StoreWriteFailed
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with Store(Path(sys.argv[1])) as store:
            nb = Notebook(store)
            nb.remember(kind="fact", title="small")
            size = store.shard_path.stat().st_size
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, resource.RLIM_INFINITY))
            try:
                nb.remember(kind="fact", title="too big", body="x" * 5000)
            except StoreWriteFailed as exc:
                print("refused:", exc)
            assert store.shard_path.stat().st_size == size, "the partial line must be cut"
            assert sorted(n.title for n in store.state.iter_notes()) == ["small"]
            nb.remember(kind="fact", title="fits again")
        """
    )
    data = tmp_path / "d"
    result = subprocess.run(
        [sys.executable, "-c", script, str(data)], capture_output=True, encoding="utf-8", timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "refused: Nothing was saved: The notebook log" in result.stdout and "too large" in result.stdout
    with Store(data, readonly=True) as store:
        assert sorted(n.title for n in store.state.iter_notes()) == ["fits again", "small"]
        node = store.node
        assert store.state.seen(node) == {1, 2}
        assert all(h.bad == 0 and h.torn_tail_bytes == 0 for h in store.health().values())


def test_state_folded_from_disk_equals_the_state_built_while_writing(tmp_path: Path) -> None:
    with Store(tmp_path / "d") as store:
        notebook = Notebook(store)
        a = remember(store, "a")
        notebook.update(a, body="more", tags=["x"])
        notebook.forget(a)
        Graph(store).create_entities([Entity("E", "t", ("o",))])
        live = store.state.snapshot()
    fresh = State()
    for path in (tmp_path / "d" / "log").glob("*.jsonl"):
        from hivenote.server.core.model import decode_op

        apply_all(fresh, (decode_op(line) for line in path.read_bytes().split(b"\n") if line))
    assert fresh.snapshot() == live


def test_a_restart_takes_parsed_ops_from_the_cache_and_reads_only_what_grew(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        for i in range(5):
            remember(store, f"n{i}")
        store.checkpoint()
        remember(store, "after the checkpoint")
        path = shard(store)
    with path.open("ab") as fh:
        fh.write(b"garbage\n")
    with Store(data, readonly=True) as reader:
        assert reader.cached_ops == 5
        assert len(list(reader.state.iter_notes())) == 6
        assert reader.health()[path.name].bad == 1
        reader.checkpoint()
    with Store(data, readonly=True) as again:
        assert again.cached_ops == 6
        health = again.health()[path.name]
        assert (health.ops, health.bad, [b.line for b in health.bad_lines]) == (6, 1, [7])


def test_a_cache_that_no_longer_matches_the_shard_is_ignored(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        note = remember(store, "v0")
        for i in range(1, 4):
            Notebook(store).update(note, title=f"v{i}")
        store.checkpoint()
        before = store.cache_path.read_bytes()
        store.compact()  # the shard is rewritten shorter: the cached offset means nothing now
        store.cache_path.write_bytes(before)  # the cache from before it (a process that died before rewriting it)
        remember(store, "fresh")
        expected = store.state.snapshot()
    with Store(data, readonly=True) as reader:
        assert reader.cached_ops == 0
        assert reader.state.snapshot() == expected


def test_a_damaged_cache_is_ignored(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with Store(data) as store:
        remember(store, "kept in the log")
        store.checkpoint()
        cache = store.cache_path
    blob = bytearray(cache.read_bytes())
    blob[-5] ^= 0xFF
    cache.write_bytes(bytes(blob))
    with Store(data, readonly=True) as reader:
        assert reader.cached_ops == 0
        assert [n.title for n in reader.state.iter_notes()] == ["kept in the log"]
    cache.write_bytes(b"not a cache at all")
    with Store(data, readonly=True) as reader:
        assert [n.title for n in reader.state.iter_notes()] == ["kept in the log"]


def test_after_a_failed_write_the_search_index_goes_over_warm(tmp_path: Path) -> None:
    """A failed write folds the notebook again from its files (the state held an op never acknowledged). The search
    index was left behind, and the next searches scanned every note while it was built again; now it goes over to
    the new state for every note whose ops are the same, and the note the lost op touched is indexed again."""
    with Store(tmp_path / "data") as store:
        ids = [remember(store, f"Deploy step {i}") for i in range(50)]
        lost = Op(store.node, 10_000, wall_ms(), 0, "note.set", {"id": ids[0], "fields": {"title": "Never written"}})
        with store.reading() as state:
            state.apply(lost)  # taken by the fold, never written: what a failed write leaves
            refresh_note_index(state)
            assert search_notes(state, "never").total == 1
        store._reload()
        with store.reading() as state:
            assert note_index(state).pending == {ids[0]}  # all but the one note taken over warm
            assert search_notes(state, "never").total == 0
            assert search_notes(state, "deploy step").total == 50
