"""What a whole copy of a shard is to the copy held (`replica.classify`, used by every transport that is handed
whole copies: peers, the bucket, the synced folder's held copies): a continuation or a compaction replaces the copy
held, an older copy is behind, and only two different ops at one position are another history (issue 32, finding 3:
every compaction whose last line became a `seq.keep` stand-in was kept as a branch, purged text and all)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.model import PLACEHOLDER, Author, Op
from hivenote.server.sync.replica import Replicas, classify

NODE = "w-0001"


def shard(keys: list[int], node: str = NODE, title: str = "t") -> list[bytes]:
    """One line per op (`keys[i]` is the element op i sets: a note's title), seq 1.., each a complete line."""
    return [
        Op(node, seq, 1000 + seq, 0, "note.set", {"id": f"N{key}", "fields": {"title": f"{title}{seq}"}}).encode()
        for seq, key in enumerate(keys, 1)
    ]


def kept(keys: list[int], purged: frozenset[int]) -> list[int]:
    """The seqs OPLOG.md's compaction keeps: the latest op of each element not purged since."""
    return sorted({key: seq for seq, key in enumerate(keys, 1) if key not in purged}.values())


def compacted(keys: list[int], lines: list[bytes], purged: frozenset[int] = frozenset()) -> list[bytes]:
    """OPLOG.md's compaction of these lines, the notes `purged` being purged (by another node): the latest op of each
    element, and the last line (a `seq.keep` stand-in, with its position and stamp, when it decides nothing)."""
    keep = kept(keys, purged)
    out = [lines[seq - 1] for seq in keep]
    if not keep or keep[-1] != len(lines):
        stand_in = Op(NODE, len(lines), 1000 + len(lines), 0, PLACEHOLDER, {}, Author("", "", ""))
        out.append(stand_in.encode())
    return out


histories = st.lists(st.integers(0, 5), min_size=1, max_size=25)
purges = st.frozensets(st.integers(0, 5), max_size=3)


@given(histories, purges, st.data())
@settings(max_examples=200, deadline=None)
def test_prefixes_continuations_and_compactions_are_never_another_history(
    keys: list[int], purged: frozenset[int], data: st.DataObject
) -> None:
    lines = shard(keys)
    cut = data.draw(st.integers(1, len(lines)), "cut")
    earlier = data.draw(st.frozensets(st.sampled_from(sorted(purged))) if purged else st.just(frozenset()), "earlier")
    whole, prefix = b"".join(lines), b"".join(lines[:cut])
    after, before = b"".join(compacted(keys, lines, purged)), b"".join(compacted(keys[:cut], lines[:cut], earlier))
    for own in (False, True):
        assert classify(whole, prefix, own=own) == "behind"  # a copy that is only behind
        assert classify(whole, whole, own=own) == "behind"
        assert classify(after, whole, own=own) == "behind"  # the shard before the compaction ours comes from
        assert classify(after, prefix, own=own) == "behind"
        assert classify(before + b"".join(lines[cut:]), prefix, own=own) == "behind"

    def takes(held: bytes, got: bytes) -> bool:  # a newer copy replaces ours; the very same is behind
        return classify(held, got) == ("behind" if held == got else "replaces")

    assert takes(prefix, whole)  # a continuation
    assert takes(whole, after)  # the owner compacted
    assert takes(prefix, after)  # compacted after writing more
    assert takes(before, after)  # compacted twice
    assert takes(before + b"".join(lines[cut:]), after)
    if after != whole:
        assert classify(whole, after, own=True) == "other"  # only this install compacts its own shard


@given(histories, purges, st.data())
@settings(max_examples=100, deadline=None)
def test_two_different_ops_at_one_position_are_another_history(
    keys: list[int], purged: frozenset[int], data: st.DataObject
) -> None:
    lines = shard(keys)
    at = data.draw(st.integers(0, len(lines) - 1), "at")
    other = [*lines[:at], shard(keys, title="other ")[at], *lines[at + 1 :]]
    for own in (False, True):
        assert classify(b"".join(lines), b"".join(other), own=own) == "other"
        assert classify(b"".join(lines), b"".join(other[: at + 1]), own=own) == "other"
        assert classify(b"".join(other[: at + 1]), b"".join(lines), own=own) == "other"
        if at + 1 in kept(keys, purged):  # else the compaction dropped the position: nothing tells the two apart
            assert classify(b"".join(compacted(keys, lines, purged)), b"".join(other[: at + 1]), own=own) == "other"


def test_settle_writes_only_a_copy_that_replaces_and_branches_only_another_history(tmp_path: Path) -> None:
    keys = [1, 2, 1, 3, 3]
    lines = shard(keys)
    replicas = Replicas(tmp_path, "me-0001")
    replicas.append(NODE, b"".join(lines), 0)
    assert replicas.settle(NODE, b"".join(lines[:2])) == "behind"
    after = b"".join(compacted(keys, lines, frozenset({3})))
    assert b'"op":"seq.keep"' in after
    assert replicas.settle(NODE, after) == "replaced" and replicas.read(NODE) == after
    assert replicas.settle(NODE, b"".join(lines)) == "behind" and replicas.read(NODE) == after
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{NODE}.jsonl"]
    other = b"".join(shard(keys, title="x"))
    branch = replicas.settle(NODE, other)
    assert branch.startswith(f"{NODE}~") and replicas.read(branch) == other
