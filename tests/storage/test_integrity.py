"""Log integrity on one machine's disk (OPLOG.md, "Node identity" and "Forks"): a (node, seq) names one op for ever.
A copied data dir, a lost or restored own shard, a shard replaced under a running server or a sync tool's conflict
copy never make two installs append as one node, never hide an acknowledged write, and a fork that happens anyway
(a cloned machine) is folded whole and reported. Real files, real stores; the transports' own tests are in
tests/sync/."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from hivenote.server.core.model import Author, Op, decode_op
from hivenote.server.core.search import refresh_note_index
from hivenote.server.notebook import Notebook
from hivenote.server.storage.searchcache import SearchCache
from hivenote.server.storage.store import Store
from hivenote.server.transfer import export_notebook

ME = Author("claude-code", "Claude Code", "")


def remember(store: Store, title: str, body: str = "") -> str:
    return Notebook(store).remember(kind="fact", title=title, body=body or f"body of {title}", by=ME).note.id


def titles(data_dir: Path, log_dir: Path | None = None) -> set[str]:
    with Store(data_dir, readonly=True, log_dir=log_dir) as store:
        return {n.title for n in Notebook(store).list(limit=500)[0]}


def ops(path: Path) -> list[Op]:
    return [decode_op(line) for line in path.read_bytes().splitlines()]


def test_a_copied_data_dir_writes_as_a_new_node_so_both_copies_notes_survive(tmp_path: Path) -> None:
    """The same machine, the same host fingerprint, one shared (synced) log folder: the copy proves nothing."""
    shared = tmp_path / "synced"
    with Store(tmp_path / "a", log_dir=shared) as a:
        remember(a, "before the copy")
        node = a.node
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    with Store(tmp_path / "a", log_dir=shared) as a, Store(tmp_path / "copy", log_dir=shared) as copy:
        assert a.node == node, "the original goes on as itself"
        assert copy.node != node, "the copy cannot prove it is the install that wrote the shard"
        assert "copy" in copy.incidents[0].message
        remember(a, "original after")
        remember(copy, "copy after")
    assert titles(tmp_path / "a", shared) == {"before the copy", "original after", "copy after"}
    with Store(tmp_path / "a", readonly=True, log_dir=shared) as reader:
        assert not reader.state.forks
        assert all(len({op.seq for op in ops(p)}) == len(ops(p)) for p in shared.glob("*.jsonl"))


def test_a_lost_own_shard_never_restarts_seq_and_the_old_notes_come_back_whole(tmp_path: Path) -> None:
    """Lost while stopped, nothing reachable to restore it from: the next write is not (node, 1) again."""
    data = tmp_path / "data"
    with Store(data) as store:
        for i in range(3):
            remember(store, f"old {i}")
        old_node, shard = store.node, store.shard_path
    assert shard is not None
    saved = shard.read_bytes()  # a peer's or the bucket's copy, out of reach for now
    shard.unlink()
    with Store(data) as store:
        assert store.node != old_node and "missing" in store.incidents[0].message
        remember(store, "written while the old shard was away")
    shard.write_bytes(saved)  # a transport brings the old shard back later, as another node's
    assert titles(data) == {"old 0", "old 1", "old 2", "written while the old shard was away"}
    with Store(data) as store:
        assert not store.state.forks


def test_a_shard_restored_from_an_older_backup_is_not_appended_to(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "backed up")
        assert store.shard_path is not None
        backup, node = store.shard_path.read_bytes(), store.node
        remember(store, "after the backup")  # the backup misses it; a peer holds it
        newest = store.shard_path.read_bytes()
    (data / "log" / f"{node}.jsonl").write_bytes(backup)  # restored over the newer file (a new inode)
    with Store(data) as store:
        assert store.node != node
        remember(store, "after the restore")
    (data / "log" / "peer-copy.jsonl").write_bytes(newest)  # what a peer still holds of the old node
    assert titles(data) == {"backed up", "after the backup", "after the restore"}


def test_a_sync_tools_conflict_copy_is_folded_not_ignored_and_the_fork_reported(tmp_path: Path) -> None:
    """Two histories of one node (a cloned machine): both notes at seq 1 are kept, and the fork is evidence."""
    one, two = tmp_path / "one", tmp_path / "two"
    with Store(one) as a:
        remember(a, "on the first clone")
        node = a.node
    shutil.copytree(one, two)
    (two / "log" / f"{node}.jsonl").unlink()
    shutil.copy(one / "node.json", two / "node.json")
    lines = (one / "log" / f"{node}.jsonl").read_bytes()
    other = lines.replace(b"on the first clone", b"on the other clone").replace(b'"id":"', b'"id":"X')
    (one / "log" / f"{node}.sync-conflict-20261201-101010-ABCDEFG.jsonl").write_bytes(other)
    with Store(one, readonly=True) as reader:
        assert {n.title for n in Notebook(reader).list()[0]} == {"on the first clone", "on the other clone"}
        fork = reader.state.forks[node]
        assert (fork.first_seq, fork.positions) == (1, 1)


def test_a_running_writer_that_sees_another_history_of_its_node_moves_to_a_new_one(tmp_path: Path) -> None:
    """A conflict copy from a clone brings seqs this install never wrote: the next write must not collide."""
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "mine")
        node = store.node
        assert store.shard_path is not None
        theirs = store.shard_path.read_bytes().replace(b'"title":"mine"', b'"title":"the clone\'s"')
        theirs = theirs.replace(b'"id":"', b'"id":"X')
        extra = json.loads(theirs)
        extra["seq"], extra["id"] = 2, "01JCLONE0000000000000000002"
        clone = theirs + json.dumps(extra, separators=(",", ":")).encode() + b"\n"
        (store.log_dir / f"{node}.sync-conflict-20261201-101010-CLONE01.jsonl").write_bytes(clone)
        store.refresh()
        assert store.node != node
        remember(store, "after")
        assert {op.node for op in ops(store.log_dir / f"{store.node}.jsonl")} == {store.node}
    assert titles(data) == {"mine", "the clone's", "after"}


def test_a_reader_never_resumes_inside_a_replaced_shard_whose_last_bytes_match(tmp_path: Path) -> None:
    """A compacted (or forked) file that ends a line at the reader's offset with the same last 64 bytes: the bytes
    before it differ, so it is read again whole, and no op of it is skipped."""
    data, shared = tmp_path / "reader", tmp_path / "shared"
    shared.mkdir()

    def mk(seq: int, title: str, pad: int) -> bytes:
        line = {"v": 1, "node": "w-0001", "seq": seq, "hlc": [1000 + seq, 0], "op": "note.set", "id": f"N{seq:04d}"}
        line["fields"] = {"kind": "fact", "title": title, "body": "x" * pad}
        return json.dumps(line, separators=(",", ":")).encode() + b"\n"

    first = mk(1, "one", 10) + mk(2, "two", 10) + mk(3, "three", 10)
    (shared / "w-0001.jsonl").write_bytes(first)
    with Store(data, readonly=True, log_dir=shared) as reader:
        assert len(list(reader.state.iter_notes())) == 3
        # The new file: other ops first, then the very same last line ending at the same offset, then more.
        last = mk(3, "three", 10)
        head = mk(1, "one", 10) + mk(4, "four", 5)
        pad = len(first) - len(last) - len(head)
        replaced = mk(1, "one", 10) + mk(4, "four", 5 + pad) + last + mk(5, "five", 10)
        assert len(replaced[: len(first)]) == len(first) and replaced[len(first) - 64 : len(first)] == first[-64:]
        tmp = shared / ".w-0001.jsonl.tmp"
        tmp.write_bytes(replaced)
        tmp.replace(shared / "w-0001.jsonl")
        reader.refresh()
        assert {n.title for n in reader.state.iter_notes()} == {"one", "two", "three", "four", "five"}


def test_a_purged_notes_text_is_gone_from_the_shard_after_compaction_even_in_its_last_line(tmp_path: Path) -> None:
    """Another machine purged the note whose last edit is this shard's last line (kept so seq continues): after
    compaction a content-free placeholder stands in for it, and seq goes on after it."""
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "kept")
        secret = remember(store, "secret title", "the secret body")
        Notebook(store).update(secret, body="the secret body, edited", by=ME)
        assert store.shard_path is not None
        last = ops(store.shard_path)[-1]
        purge = {"v": 1, "node": "other-0001", "seq": 1, "hlc": [last.wall + 1, 0], "op": "note.purge", "id": secret}
        (store.log_dir / "other-0001.jsonl").write_text(json.dumps(purge) + "\n", encoding="utf-8")
        store.refresh()
        with store.reading() as state:
            assert state.note(secret) is None
        store.compact()
        assert b"secret" not in store.shard_path.read_bytes()
        assert ops(store.shard_path)[-1].seq == last.seq and ops(store.shard_path)[-1].kind == "seq.keep"
        remember(store, "after")
        assert ops(store.shard_path)[-1].seq == last.seq + 1
    assert titles(data) == {"kept", "after"}


def holding(data: Path, text: bytes) -> list[str]:
    """The files under the data dir whose bytes hold `text`."""
    return sorted(str(p.relative_to(data)) for p in data.rglob("*") if p.is_file() and text in p.read_bytes())


def test_after_compaction_no_file_of_the_data_dir_holds_a_purged_notes_text(tmp_path: Path) -> None:
    """The derived files hold what the log held: the op cache every op's payload, the search index every note's
    text. Compaction erases a purged note's text from the shard, and from them too, not at their next save."""
    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "kept")
        secret = remember(store, "secret title", "the secret body")
        store.checkpoint()  # the op cache, with the note's payload
        with store.reading() as state:
            refresh_note_index(state)
        assert SearchCache(store).save()  # the search index, with its text
        assert holding(data, b"secret") == ["cache/oplog.bin", "cache/search.bin", f"log/{store.node}.jsonl"]
        assert store.shard_path is not None
        last = ops(store.shard_path)[-1]
        purge = {"v": 1, "node": "other-0001", "seq": 1, "hlc": [last.wall + 1, 0], "op": "note.purge", "id": secret}
        (store.log_dir / "other-0001.jsonl").write_text(json.dumps(purge) + "\n", encoding="utf-8")
        store.refresh()
        store.compact()
        assert holding(data, b"secret") == []
    assert holding(data, b"secret") == []
    assert titles(data) == {"kept"}


def test_a_fork_and_a_new_node_id_show_in_the_servers_sync_status(tmp_path: Path) -> None:
    """A person sees it: the status every surface reads (`sync status`, dashboard, tray) names what happened."""
    import httpx2

    from tests.support.peer_inprocess import served

    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "before")
        node = store.node
    shard = data / "log" / f"{node}.jsonl"
    conflict = shard.read_bytes().replace(b'"title":"before"', b'"title":"clone"').replace(b'"id":"', b'"id":"X')
    (data / "log" / f"{node}.sync-conflict-20261201-000000-CLONE.jsonl").write_bytes(conflict)
    with served(data) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        deadline = time.monotonic() + 10
        while True:
            status = httpx2.get(f"{server.url}/api/status", headers=headers).json()
            entry = next((s for s in status["sync"]["transports"] if s["name"] == "integrity"), None)
            if entry is not None or time.monotonic() > deadline:
                break
        assert entry is not None and entry["failing"]
        assert f"two histories of {node} from seq 1" in entry["error"] and server.store.node != node


def test_doctor_names_a_fork_and_a_log_stamped_ahead_of_this_clock(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "mine")
        node = store.node
    lines = (data / "log" / f"{node}.jsonl").read_bytes()
    ahead = json.loads(lines)
    ahead |= {"hlc": [ahead["hlc"][0] + 86_400_000, 0], "id": "X" + ahead["id"]}
    (data / "log" / f"{node}.sync-conflict-20261201-000000-CLONE.jsonl").write_text(
        json.dumps(ahead) + "\n", encoding="utf-8"
    )
    out = subprocess.run(
        [sys.executable, "-m", "hivenote.desktop", "--data-dir", str(data), "doctor"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    ).stdout
    assert f"fork: two histories of {node} from seq 1 (1 positions), both kept" in out
    assert "clock skew: this machine wrote stamps 86" in out and "timedatectl set-ntp true" in out


def test_an_observation_added_while_another_machine_deleted_its_entity_stays_out_of_a_re_created_one(
    tmp_path: Path,
) -> None:
    """A deletes E1 while B, not knowing yet, adds an observation to it. Once both have both: E1 is gone; and when E1
    is created again it starts clean, as in the official memory server (it used to bring B's observation back)."""
    from hivenote.server.core.model import Entity
    from hivenote.server.graph import Graph

    shared = tmp_path / "Sync"
    with Store(tmp_path / "a", log_dir=shared) as a, Store(tmp_path / "b", log_dir=shared) as b:
        Graph(a).create_entities([Entity("E1", "thing", ("first",))], by=ME)
        b.refresh()
        Graph(a).delete_entities(["E1"], by=ME)
        assert Graph(b).add_observations([("E1", ["added on b meanwhile"])], by=ME) == [
            ("E1", ["added on b meanwhile"])
        ]
        a.refresh()
        b.refresh()
        assert Graph(a).read_graph() == Graph(b).read_graph() == ([], [])
        Graph(a).create_entities([Entity("E1", "thing", ())], by=ME)
        b.refresh()
        assert Graph(a).read_graph() == Graph(b).read_graph() == ([Entity("E1", "thing", ())], [])
        Graph(b).add_observations([("E1", ["added after the re-creation"])], by=ME)
        a.refresh()
        assert Graph(a).read_graph()[0] == [Entity("E1", "thing", ("added after the re-creation",))]


def test_an_edit_made_while_another_machine_purged_the_note_does_not_bring_back_a_stub(tmp_path: Path) -> None:
    """The rule (OPLOG.md): a purge wins over an edit whose writer had not seen it."""
    shared = tmp_path / "Sync"
    later = Store(tmp_path / "b", log_dir=shared, now_ms=lambda: time.time_ns() // 1_000_000 + 1000)
    with Store(tmp_path / "a", log_dir=shared) as a, later as b:  # b's edit is stamped after a's purge
        note_id = remember(a, "to be purged", "the whole body")
        b.refresh()
        Notebook(a).forget(note_id, by=ME)
        Notebook(a).purge(note_id, by=ME)
        Notebook(b).update(note_id, title="edited on b meanwhile", by=ME)  # b has not seen the purge
        a.refresh()
        b.refresh()
        for store in (a, b):
            with store.reading() as state:
                assert state.note(note_id) is None, state.note(note_id)


def test_a_data_dir_from_before_claims_keeps_every_note_and_claims_once(tmp_path: Path) -> None:
    """Migration: node.json as earlier Hivenotes wrote it (no claim), a shard, an op cache of the old format. It
    cannot prove the shard is its own, so it writes under a new node id once; then that id is kept."""
    from hivenote.server.storage.identity import host_fingerprint, read_record

    data = tmp_path / "data"
    with Store(data) as store:
        remember(store, "from the old version")
        node = store.node
    (data / "node.json").write_text(
        json.dumps({"node": node, "host": host_fingerprint(), "created": 1}, indent=2) + "\n", encoding="utf-8"
    )
    (data / "cache" / "oplog.bin").parent.mkdir(exist_ok=True)
    (data / "cache" / "oplog.bin").write_bytes(b"hivenote-opcache-1\n" + b"\0" * 64)  # the old format: ignored
    with Store(data) as store:
        assert store.node != node and "older Hivenote" in store.incidents[0].message
        remember(store, "after the upgrade")
        migrated = store.node
    with Store(data) as store:
        assert store.node == migrated and not store.incidents
        assert {n.title for n in store.state.iter_notes()} == {"from the old version", "after the upgrade"}
    assert read_record(data)["previous"] == [node]


def test_ops_decided_as_the_old_node_before_a_move_are_written_to_its_shard_not_the_new_one(tmp_path: Path) -> None:
    """A write decided (and given its seq) as node N waits for the fsync while the store moves to a new node id: it
    must land in N's shard, never in the new node's (a line there naming N would be refused by every reader)."""
    import threading

    entered, go = threading.Event(), threading.Event()

    class Paused(Store):
        def _flush(self, ticket: int) -> None:
            entered.set()
            go.wait(10)
            super()._flush(ticket)

    data = tmp_path / "data"
    with Paused(data) as store:
        old = store.node
        writer = threading.Thread(target=remember, args=(store, "decided as the old node"))
        writer.start()
        assert entered.wait(10)  # decided and enqueued as `old`, not yet written
        new = store.reincarnate("a test moves it")
        go.set()
        writer.join(10)
        remember(store, "after the move")
        assert {op.node for op in ops(store.log_dir / f"{new}.jsonl")} == {new}
        assert [op.data["fields"]["title"] for op in ops(store.log_dir / f"{old}.jsonl")] == ["decided as the old node"]
    assert titles(data) == {"decided as the old node", "after the move"}


def test_a_value_let_go_of_is_read_back_never_served_as_a_placeholder(tmp_path: Path) -> None:
    """Issue 32, finding 2. The op cache keeps a `note.set` row with the values a newer op decided let go of (`...`);
    when that newer op is gone at the next start (it was in this machine's own shard, deleted while stopped), the
    cached row decides the field again: its value is read back from its line, never served as the placeholder
    (it was: `'ellipsis' object has no attribute 'isascii'` from the search index, 500 to writes and exports)."""
    a, b = tmp_path / "a", tmp_path / "b"
    with Store(b) as other:
        note_id = remember(other, "written on b", "b's body")
        assert other.shard_path is not None
        theirs = other.shard_path
    with Store(a) as store:
        shutil.copy(theirs, store.log_dir / theirs.name)  # b's shard arrives (a transport)
        store.refresh()
        Notebook(store).update(note_id, title="retitled on a", by=ME)  # decides the title: b's value let go of
        store.checkpoint()  # the op cache keeps b's row as it is now
        assert store.shard_path is not None
        own = store.shard_path
    own.unlink()  # deleted while stopped, before any other machine held it: the retitle is lost (allowed)
    with Store(a) as store:
        assert store.cached_ops, "b's row came from the op cache"
        with store.reading() as state:
            note = state.note(note_id)
            assert note is not None and (note.title, note.body, note.kind) == ("written on b", "b's body", "fact")
            assert refresh_note_index(state)  # the search index reads every field as text
            exported = export_notebook(state, node=store.node, now_ms=0)
        assert [n["title"] for n in exported["notes"]] == ["written on b"]
        remember(store, "a write after the loss")
