"""The copies a machine holds of a synced folder's shards (sync/held.py), step by step on real files with a clock
the test moves: nothing done to a file in the folder loses what was held (issue 32, finding 1)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hivenote.server.core.model import MAX_LINE_BYTES, PLACEHOLDER, Author, Op
from hivenote.server.sync.held import PUT_BACK_AFTER_S, HeldCopies
from hivenote.server.sync.replica import starts_with


def line(node: str, seq: int, title: str, kind: str = "note.set") -> bytes:
    data = {} if kind == PLACEHOLDER else {"id": f"N{seq}", "fields": {"title": title}}
    return Op(node, seq, 1000 + seq, 0, kind, data, Author("cli", "", "")).encode()


class Machine:
    def __init__(self, root: Path, own: str = "me-0001") -> None:
        self.folder, self.now, self.own = root / "Sync", 0.0, own
        self.folder.mkdir(parents=True)
        (root / "data").mkdir()
        self.held = HeldCopies(self.folder, root / "data", lambda: self.own, clock=lambda: self.now)
        self.copies = root / "data" / "sync" / "held"

    def step(self, after: float = 0.0) -> list[str]:
        self.now += after
        return self.held.step()


def test_a_deleted_or_shortened_shard_is_put_back_after_a_while_and_never_the_own_one(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    shard, own = m.folder / "other-0001.jsonl", m.folder / "me-0001.jsonl"
    shard.write_bytes(line("other-0001", 1, "one") + line("other-0001", 2, "two"))
    own.write_bytes(line("me-0001", 1, "mine"))
    m.step()
    whole = shard.read_bytes()
    shard.write_bytes(whole + line("other-0001", 3, "three") + b'{"torn')  # grew, with a line still being written
    m.step()
    whole += line("other-0001", 3, "three")
    assert (m.copies / shard.name).read_bytes() == whole  # complete lines only

    shard.unlink()
    own.unlink()
    assert m.step() == []  # a sync tool's replace takes a moment; a running owner goes first
    assert m.step(PUT_BACK_AFTER_S) == [f"{shard.name} was deleted: put back ({len(whole)} bytes)"]
    assert shard.read_bytes() == whole and not own.exists()  # the own shard is the store's to put back

    shard.write_bytes(whole[: whole.index(b"\n") + 1])  # an older copy put in its place
    m.step()
    m.step(PUT_BACK_AFTER_S)
    assert shard.read_bytes() == whole
    assert sorted(p.name for p in m.folder.iterdir()) == [shard.name]


def test_a_compaction_replaces_the_copy_held_and_another_history_is_kept_as_a_branch(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    shard = m.folder / "other-0001.jsonl"
    shard.write_bytes(line("other-0001", 1, "kept") + line("other-0001", 2, "the secret"))
    m.step()
    compacted = line("other-0001", 1, "kept") + line("other-0001", 2, "", PLACEHOLDER)
    shard.write_bytes(compacted)  # its owner compacted it: the secret's note was purged
    assert m.step() == [] and (m.copies / shard.name).read_bytes() == compacted  # the secret is held nowhere
    assert m.step(PUT_BACK_AFTER_S) == [] and shard.read_bytes() == compacted

    other = line("other-0001", 1, "a clone's") + line("other-0001", 2, "note")
    shard.write_bytes(other)  # two different ops at one position: another history
    m.step()
    [said] = m.step(PUT_BACK_AFTER_S)
    branches = list(m.folder.glob("other-0001~*.jsonl"))
    assert [p.read_bytes() for p in branches] == [compacted] and branches[0].name in said
    assert shard.read_bytes() == other and (m.copies / shard.name).read_bytes() == other
    m.step(PUT_BACK_AFTER_S)
    assert (m.copies / branches[0].name).read_bytes() == compacted  # held like any shard from then on


def test_lines_longer_than_any_op_are_never_held_and_a_conflict_copy_of_them_is_tidied(tmp_path: Path) -> None:
    """Damage in a shard of the folder (a line past MAX_LINE_BYTES) is skipped a piece at a time: the copy held keeps
    the lines around it, and keeps growing with the shard past it."""
    m = Machine(tmp_path)
    shard = m.folder / "other-0001.jsonl"
    one, two, three = (line("other-0001", n, t) for n, t in ((1, "one"), (2, "two"), (3, "three")))
    damage = b"x" * (MAX_LINE_BYTES + 10) + b"\n"
    shard.write_bytes(one + damage + two)
    m.step()
    assert (m.copies / shard.name).read_bytes() == one + two
    shard.write_bytes(one + damage + two + three + b"x" * (3 * MAX_LINE_BYTES))  # grew; an endless unfinished tail
    m.step()
    assert (m.copies / shard.name).read_bytes() == one + two + three
    assert shard.read_bytes().startswith(one + damage + two + three)  # nothing put back over it: nothing lost


@given(st.binary(max_size=300), st.binary(max_size=300), st.lists(st.integers(1, 50), max_size=6))
def test_starts_with_is_bytes_startswith_whatever_the_pieces(whole: bytes, prefix: bytes, cuts: list[int]) -> None:
    def cut(data: bytes) -> list[bytes]:
        out, at = [], 0
        for n in cuts:
            out.append(data[at : at + n])
            at += n
        return [*out, data[at:]]

    assert starts_with(cut(whole), cut(prefix)) == whole.startswith(prefix)
    assert starts_with(cut(prefix + whole), [prefix]) and starts_with([prefix + whole], cut(prefix))
