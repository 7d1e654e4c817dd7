"""As long as one machine holds an acknowledged op, no deletion in a shared area loses it (issue 32, finding 1's
rule, on S3): a machine's objects deleted from the bucket (a person, a lifecycle rule, a tidy-up script) are put back
by a machine that holds a copy of that shard, so a machine that joins later still gets its notes; and the owner, when
it writes again, takes the put-back generation as its own (the bucket holds only its bytes): no fork, no new node id.
An owner whose objects are all gone while it runs publishes its shard again."""

from __future__ import annotations

import contextlib
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hivenote.server.core.model import Author
from hivenote.server.notebook import Notebook
from hivenote.server.storage.identity import previous_nodes
from hivenote.server.storage.store import Store
from hivenote.server.sync.bucket import Bucket
from hivenote.server.sync.replica import Replicas
from hivenote.server.sync.s3 import BucketSync
from tests.support.s3env import Moto, bucket_shard, moto_sandbox, objects, read, s3_settings

BY = Author(agent="cli")


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Moto]:
    """The S3 server on loopback, in an AWS environment that reaches nothing else."""
    with moto_sandbox(monkeypatch, tmp_path / "aws") as server:
        yield server


@pytest.fixture
def bucket(moto: Moto) -> str:
    name = f"hive-{secrets.token_hex(4)}"
    with moto.client() as client:
        client.create_bucket(Bucket=name)
    return name


def sync_bucket(store: Store, moto: Moto, bucket: str) -> list[str]:
    """One exchange of `store` with the bucket (up, then down), then the store folds what arrived; the problems."""
    replicas = Replicas(store.log_dir, lambda: store.node)
    with contextlib.closing(BucketSync.open(s3_settings(store.data_dir, moto, bucket), replicas)) as it:
        problems = it.step(pull=True)[1]
    store.refresh()
    return problems


def delete_node(moto: Moto, bucket: str, node: str) -> None:
    with moto.client() as client:
        keys = list(objects(client, bucket, f"hivenote/{node}/"))
        assert keys
        client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})


def titles(store: Store) -> set[str]:
    return {n.title for n in store.state.iter_notes()}


def test_a_machines_objects_deleted_from_the_bucket_are_put_back_by_one_that_holds_them(
    tmp_path: Path, moto: Moto, bucket: str
) -> None:
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        Notebook(a, author=BY).remember(kind="fact", title="written on a")
        Notebook(a, author=BY).remember(kind="fact", title="also on a")
        for store in (a, b):
            assert sync_bucket(store, moto, bucket) == []
        assert titles(b) == {"written on a", "also on a"}
        node, shard = a.node, a.shard_path.read_bytes()  # type: ignore[union-attr]
    delete_node(moto, bucket, node)  # a is stopped; its objects go
    with Store(tmp_path / "b") as b:
        assert sync_bucket(b, moto, bucket) == []
    with moto.client() as client:
        assert bucket_shard(client, bucket, node) == shard
    with Store(tmp_path / "c") as c:
        sync_bucket(c, moto, bucket)
        assert titles(c) == {"written on a", "also on a"}
    with Store(tmp_path / "a") as a:  # the owner comes back and writes: the put-back generation is its own
        assert a.node == node
        Notebook(a, author=BY).remember(kind="fact", title="after the put back")
        assert sync_bucket(a, moto, bucket) == []
        assert a.node == node
        with moto.client() as client:
            assert bucket_shard(client, bucket, node) == a.shard_path.read_bytes()  # type: ignore[union-attr]
        assert not list(a.log_dir.glob("*~*.jsonl"))
    with Store(tmp_path / "c") as c:
        sync_bucket(c, moto, bucket)
        assert titles(c) == {"written on a", "also on a", "after the put back"}
        assert not list(c.log_dir.glob("*~*.jsonl"))


def test_an_owner_whose_objects_were_deleted_publishes_its_shard_again(tmp_path: Path, moto: Moto, bucket: str) -> None:
    with Store(tmp_path / "a") as a:
        Notebook(a, author=BY).remember(kind="fact", title="first")
        assert sync_bucket(a, moto, bucket) == []
        node = a.node
        delete_node(moto, bucket, node)
        Notebook(a, author=BY).remember(kind="fact", title="second")
        assert sync_bucket(a, moto, bucket) == []
        assert a.node == node  # not taken for a clone writing as this node
        with moto.client() as client:
            assert bucket_shard(client, bucket, node) == a.shard_path.read_bytes()  # type: ignore[union-attr]
    with Store(tmp_path / "c") as c:
        sync_bucket(c, moto, bucket)
        assert titles(c) == {"first", "second"}


class HolderFirst(Bucket):
    """The real bucket, except that just before this machine's first write another machine puts the node back (the
    owner and a holder racing after the node's objects were deleted)."""

    before_head: Callable[[], object] | None = None

    def put(self, key: str, body: bytes, etag: str = "") -> str | None:
        if self.before_head is not None:
            hook, self.before_head = self.before_head, None
            hook()
        return super().put(key, body, etag)


def test_an_owner_that_loses_the_race_to_a_holder_putting_it_back_takes_that_generation_as_its_own(
    tmp_path: Path, moto: Moto, bucket: str
) -> None:
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        Notebook(a, author=BY).remember(kind="fact", title="first")
        for store in (a, b):
            assert sync_bucket(store, moto, bucket) == []
        node = a.node
        delete_node(moto, bucket, node)
        Notebook(a, author=BY).remember(kind="fact", title="second")
        settings = s3_settings(a.data_dir, moto, bucket)
        racing = HolderFirst(settings)
        racing.before_head = lambda: sync_bucket(b, moto, bucket)  # b puts back what it holds: "first" only
        with contextlib.closing(BucketSync(settings, Replicas(a.log_dir, lambda: a.node), racing)) as sync:
            problems = sync.step(pull=True)[1]
            assert problems == []
            assert sync.step(pull=True)[1] == []
        a.refresh()
        assert a.node == node  # not taken for a clone
        with moto.client() as client:
            assert bucket_shard(client, bucket, node) == a.shard_path.read_bytes()  # type: ignore[union-attr]
        assert sync_bucket(b, moto, bucket) == []
        assert titles(b) == {"first", "second"}


def test_a_compaction_of_a_node_this_install_wrote_as_before_is_no_branch_of_the_copy_held_here(
    tmp_path: Path, moto: Moto, bucket: str
) -> None:
    """Long fault run, S3 seed 1003: the text of a purged note stayed in a branch `<d>~<hex>.jsonl` on every machine and
    in the bucket after every install compacted. e was a copy of d's data dir (so it writes as a new node id, d's in its
    `previous`); when d compacted, e pulled the new generation and kept the copy it held of d's shard (the text of the
    purged note in it) as a branch, because the generation did not start with that copy's bytes: a compaction of the
    copy held, with nothing the bucket lacks, was taken for ops only this install held."""
    with Store(tmp_path / "d") as d:
        Notebook(d, author=BY).remember(kind="fact", title="kept")
        assert sync_bucket(d, moto, bucket) == []
    shutil.copytree(tmp_path / "d", tmp_path / "e")
    with Store(tmp_path / "d") as d, Store(tmp_path / "e") as e:
        assert d.node in previous_nodes(e.data_dir)  # a copied data dir: e writes as a new node id
        notebook = Notebook(d, author=BY)
        secret = notebook.remember(kind="fact", title="SECRET title").note.id
        for store in (d, e):
            assert sync_bucket(store, moto, bucket) == []
        assert "SECRET title" in titles(e)
        notebook.forget(secret)
        notebook.purge(secret)
        d.compact()
        for store in (d, e, d, e):
            assert sync_bucket(store, moto, bucket) == []
        assert not list(e.log_dir.glob("*~*.jsonl"))
        for store in (d, e):
            for path in sorted(store.log_dir.glob("*.jsonl")):
                assert b"SECRET" not in path.read_bytes(), (store.node, path.name)
        with moto.client() as client:
            assert not [key for key in objects(client, bucket) if b"SECRET" in read(client, bucket, key)]


def test_an_owner_that_compacted_takes_the_older_copy_a_holder_put_back_as_its_own(
    tmp_path: Path, moto: Moto, bucket: str
) -> None:
    """A sibling of the S3 seed 1003 finding: a holder put back the owner's deleted objects from the copy it held, and
    the owner, meanwhile, compacted. The put-back generation is the shard before that compaction (every op it holds up
    to its last seq is ours), not a clone's bytes: the owner publishes its compacted shard over it, no fork, no new
    node id."""
    with Store(tmp_path / "a") as a, Store(tmp_path / "b") as b:
        notebook = Notebook(a, author=BY)
        note = notebook.remember(kind="fact", title="first").note.id
        notebook.update(note, title="first, retitled")
        notebook.update(note, title="first, retitled again")
        for store in (a, b):
            assert sync_bucket(store, moto, bucket) == []
        node = a.node
        delete_node(moto, bucket, node)
        assert sync_bucket(b, moto, bucket) == []  # b puts back what it holds
        assert a.compact()[1] < 3  # the first retitle's line goes
        assert sync_bucket(a, moto, bucket) == []
        assert a.node == node and not list(a.log_dir.glob("*~*.jsonl"))
        with moto.client() as client:
            assert bucket_shard(client, bucket, node) == a.shard_path.read_bytes()  # type: ignore[union-attr]
        assert sync_bucket(b, moto, bucket) == []
        assert (b.log_dir / f"{node}.jsonl").read_bytes() == a.shard_path.read_bytes()  # type: ignore[union-attr]


def test_an_owner_that_compacted_after_its_objects_were_deleted_publishes_the_compacted_shard(
    tmp_path: Path, moto: Moto, bucket: str
) -> None:
    """The same, with nobody putting the node back: the compacted shard goes up as its next generation (its HEAD
    swap found no HEAD at all, and that was taken for another writer)."""
    with Store(tmp_path / "a") as a:
        notebook = Notebook(a, author=BY)
        note = notebook.remember(kind="fact", title="first").note.id
        notebook.update(note, title="first, retitled")
        notebook.update(note, title="first, retitled again")
        assert sync_bucket(a, moto, bucket) == []
        node = a.node
        delete_node(moto, bucket, node)
        assert a.compact()[1] < 3
        assert sync_bucket(a, moto, bucket) == []
        assert a.node == node and not list(a.log_dir.glob("*~*.jsonl"))
        with moto.client() as client:
            assert bucket_shard(client, bucket, node) == a.shard_path.read_bytes()  # type: ignore[union-attr]
