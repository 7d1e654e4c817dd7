"""A purge is the end of a note in every file, branches included (issue 32, part 2): another history of a node kept
as `<node>~<hex>.jsonl` is nobody's own shard, so no owner ever compacts it, and the text of a note purged after the
fork stayed in it on every machine. The compaction that drops a purged note's text from this node's shard also drops
it from every branch held here (only the purged note's lines: everything else in the branch still decides)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.sync.replica import Replicas
from hivenote.server.sync.s3 import BucketSync
from tests.support.internals import add_branch, classify
from tests.support.s3env import Moto, moto_sandbox, objects, read, s3_settings

BY = Author(agent="cli")


def test_compaction_drops_a_purged_notes_text_from_the_branches_held_here(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as store:
        notebook = Notebook(store, author=BY)
        secret = notebook.remember(kind="fact", title="SECRET title", body="SECRET body").note.id
        kept = notebook.remember(kind="fact", title="kept", body="stays").note.id
        notebook.update(secret, body="SECRET body two")
        replicas = Replicas(store.log_dir, store.node)
        before = store.shard_path.read_bytes()  # type: ignore[union-attr]
        # Another history of a node (a copy that forked from it) holding the note's text, as a transport keeps it.
        forked = before.replace(b'"stays"', b'"stays elsewhere"')
        branch = add_branch(replicas, "vm-0ther", forked.replace(store.node.encode(), b"vm-0ther"))
        store.refresh()
        notebook.forget(secret)
        notebook.purge(secret)
        store.compact()
        store.refresh()
        assert store.state.note(secret) is None
        assert store.state.note(kept) is not None
        for path in sorted(store.log_dir.glob("*.jsonl")):
            assert b"SECRET" not in path.read_bytes(), path.name
        scrubbed = (store.log_dir / f"{branch}.jsonl").read_bytes()
        assert b"stays elsewhere" in scrubbed  # the rest of the other history is still there
        original = forked.replace(store.node.encode(), b"vm-0ther")
        assert classify(original, scrubbed) == "replaces"  # the machines holding it before the scrub take it


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    """The S3 server on loopback, in an AWS environment that reaches nothing else."""
    with moto_sandbox(monkeypatch, tmp_path / "aws") as server:
        yield server


def sync_bucket(store: Store, moto: Moto, bucket: str) -> None:
    """One exchange of `store` with the bucket (up, then down), then the store folds what arrived."""
    replicas = Replicas(store.log_dir, lambda: store.node)
    with contextlib.closing(BucketSync.open(s3_settings(store.data_dir, moto, bucket), replicas)) as it:
        it.step(pull=True)
    store.refresh()


def test_a_branch_scrubbed_of_a_purged_note_replaces_the_one_in_the_bucket_and_on_every_machine(
    tmp_path: Path, moto: Moto
) -> None:
    """A branch goes up to the bucket once (the only way an install's forked writes reach machines that share nothing
    but the bucket); scrubbed of a purged note by a compaction, it goes up again as a new generation of that branch,
    the older one is deleted, and a machine that pulled the older one takes the scrubbed one."""
    bucket = f"hive-{secrets.token_hex(4)}"
    with moto.client() as client:
        client.create_bucket(Bucket=bucket)
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        notebook = Notebook(a, author=BY)
        secret = notebook.remember(kind="fact", title="SECRET title", body="SECRET body").note.id
        own = a.shard_path.read_bytes()  # type: ignore[union-attr]
        branch = add_branch(Replicas(a.log_dir, a.node), "vm-0ther", own.replace(a.node.encode(), b"vm-0ther"))
        for store in (a, b, a):
            sync_bucket(store, moto, bucket)
        assert (b.log_dir / f"{branch}.jsonl").exists()
        notebook.forget(secret)
        notebook.purge(secret)
        a.compact()
        for store in (a, b, a, b):
            sync_bucket(store, moto, bucket)
        with moto.client() as client:
            held = {key: read(client, bucket, key) for key in objects(client, bucket)}
        assert any(key.startswith(f"hivenote/{branch}/") for key in held)
        assert not [key for key, data in held.items() if b"SECRET" in data]
        for store in (a, b):
            assert store.state.note(secret) is None
            for path in sorted(store.log_dir.glob("*.jsonl")):
                assert b"SECRET" not in path.read_bytes(), (store.node, path.name)
