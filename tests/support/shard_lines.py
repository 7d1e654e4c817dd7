"""Shards as lines for the sync tests: one node's history of ops over a few notes, and what OPLOG.md's compaction
keeps of it (Hypothesis strategies for histories and purges)."""

from __future__ import annotations

from hypothesis import strategies as st

from hivenote.server.core.model import PLACEHOLDER, Author, Op

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
