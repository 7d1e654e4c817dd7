"""The store lets go of superseded payloads (the fold's `Op.release`) and reads them back from the shard by offset:
after a start that parses the log, after one from the op cache, after its own writes and after compaction, a note's
history still shows every version's fields, and only the ops that decide something hold their payloads."""

from __future__ import annotations

import shutil
from array import array
from pathlib import Path

from hivenote.server.core.model import Author, Journal, Op
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store


def edited(data: Path, edits: int) -> str:
    with Store(data) as store:
        notebook = Notebook(store)
        note = notebook.remember(kind="fact", title="v0", body="the body, written once").note
        for i in range(1, edits + 1):
            notebook.update(note.id, title=f"v{i}")
        # Its own writes: each edit is released once the next one supersedes it (its line is written by then).
        assert held(store, note.id) == [True, *[False] * (edits - 1), True]
        return note.id


def held(store: Store, note_id: str) -> list[bool]:
    """Per op of the note's history, whether it holds its payload. The history and the field registers are its ops'
    journal rows, no objects: a held op's row keeps its payload, a released op's row its note id alone."""
    rec = store.state.notes[note_id]
    assert isinstance(rec.ops, array), rec.ops
    ops = rec.live_ops()
    for op in ops:
        assert isinstance(op.src, Journal)
        entry = op.src.held[op.row]
        assert type(entry) is tuple and entry == op.cached_payload() if op.held else entry == note_id
    fields = rec.fields
    assert type(fields) is int or (isinstance(fields, dict) and all(type(e) is int for e in fields.values())), fields
    return [op.held for op in ops]


def titles(store: Store, note_id: str) -> list[str | None]:
    return [v.fields.get("title") for v in Notebook(store).history(note_id)]


def test_superseded_payloads_are_not_held_after_any_start_and_come_back_for_the_history(tmp_path: Path) -> None:
    data = tmp_path / "data"
    note_id = edited(data, 5)
    expected = [f"v{i}" for i in range(6)]
    with Store(data) as writer:  # its own writes: released once the next edit supersedes them
        assert held(writer, note_id) == [True, False, False, False, False, True]  # the first still holds kind, body
        assert titles(writer, note_id) == expected
        writer.checkpoint()
    with Store(data, readonly=True) as cached:  # from the op cache: released ops are cached as id and field names
        assert cached.cached_ops == 6
        assert held(cached, note_id) == [True, False, False, False, False, True]
        assert titles(cached, note_id) == expected
        note = Notebook(cached).get(note_id)
        assert (note.title, note.body) == ("v5", "the body, written once")
    (data / "cache" / "oplog.bin").unlink()
    with Store(data, readonly=True) as parsed:  # parsing the log
        assert parsed.cached_ops == 0
        assert held(parsed, note_id) == [True, False, False, False, False, True]
        assert titles(parsed, note_id) == expected


def test_after_compaction_the_history_reads_what_is_left_and_skips_what_is_gone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    note_id = edited(data, 3)
    with Store(data) as store:
        Notebook(store).remember(kind="fact", title="another", body="so the last line is not the note's")
        assert titles(store, note_id) == ["v0", "v1", "v2", "v3"]
        before, after = store.compact()
        assert after < before
        # The released v1 and v2 are gone from the shard, the kept lines moved: found again by their digests.
        assert titles(store, note_id) == ["v0", "v3"]
        assert Notebook(store).get(note_id).title == "v3"


def test_a_shard_with_stamps_beyond_64_bits_folds_and_starts_again(tmp_path: Path) -> None:
    """A line may carry any non-negative int as its wall clock, counter or seq (another machine's clock set far
    ahead, a hand-edited shard): the journal's 64-bit columns become lists for that shard, every start folds it, and
    the op cache leaves it to be read from its log while it keeps the others."""

    data = tmp_path / "data"
    (data / "log").mkdir(parents=True)
    fields: dict[str, object] = {
        "kind": "fact",
        "title": "from the far future",
        "body": "",
        "tags": [],
        "project": None,
    }
    far = Op(
        "skewed-0001",
        1,
        10**30,
        2**70,
        "note.set",
        {"id": "01SKEW00000000000000000001", "fields": fields},
        Author("cursor"),
    )
    (data / "log" / "skewed-0001.jsonl").write_bytes(far.encode())
    note_id = edited(data, 2)  # this machine's own shard, beside it
    for start in ("log", "op cache", "op cache again"):
        with Store(data) as store:
            notebook = Notebook(store)
            assert notebook.get("01SKEW00000000000000000001").title == "from the far future", start
            assert titles(store, note_id) == ["v0", "v1", "v2"], start
            assert store.cached_ops == (0 if start == "log" else 3), start  # this machine's three ops only
            store.checkpoint()


def test_a_copy_of_a_shard_folds_once_and_only_one_row_keeps_the_payload(tmp_path: Path) -> None:
    """A sync tool's copy of a shard (or a shard read again from its start) carries ops the fold already has: their
    rows keep the note id alone, so the notebook's text is held once, not once per copy."""
    data = tmp_path / "data"
    with Store(data) as store:
        note = Notebook(store).remember(kind="fact", title="kept once", body="the body").note
        shard = store.shard_path
    assert shard is not None
    shutil.copy(shard, shard.with_name("copied-node.jsonl"))
    with Store(data, readonly=True) as reader:
        rows = [entry for cur in reader.shards.cursors.values() for entry in cur.source.held]
        keeping = [e for e in rows if type(e) is tuple or (isinstance(e, Op) and e.held)]
        assert len(rows) == 2 and len(keeping) == 1, rows
        assert Notebook(reader).get(note.id).body == "the body"
