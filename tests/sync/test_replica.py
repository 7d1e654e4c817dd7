"""What a whole copy of a shard is to the copy held (`replica.classify_lines`, used by every transport that is handed
whole copies: peers, the bucket, the synced folder's held copies): a continuation or a compaction replaces the copy
held, an older copy is behind, and only two different ops at one position are another history (issue 32, finding 3:
every compaction whose last line became a `seq.keep` stand-in was kept as a branch, purged text and all)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.model import MAX_LINE_BYTES, PLACEHOLDER, Author, Op
from hivenote.server.sync.replica import PIECE_BYTES, Replicas, SyncRefused, pieces
from tests.support.internals import classify, settle
from tests.support.shard_lines import NODE, compacted, histories, kept, purges, shard


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
    assert settle(replicas, NODE, b"".join(lines[:2])) == "behind"
    after = b"".join(compacted(keys, lines, frozenset({3})))
    assert b'"op":"seq.keep"' in after
    assert settle(replicas, NODE, after) == "replaced" and replicas.read(NODE) == after
    assert settle(replicas, NODE, b"".join(lines)) == "behind" and replicas.read(NODE) == after
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{NODE}.jsonl"]
    other = b"".join(shard(keys, title="x"))
    branch = settle(replicas, NODE, other)
    assert branch.startswith(f"{NODE}~") and replicas.read(branch) == other


def _classify_held_whole(held: bytes, got: bytes, own: bool) -> str:
    """The rule as it read before copies were walked in pieces (every line of both held in dicts by seq): the
    reference the streamed walk must agree with."""

    def by_seq(data: bytes) -> dict[int, bytes]:
        found = {}
        for line in data.splitlines():
            try:
                seq = json.loads(line).get("seq")
            except (ValueError, AttributeError):
                continue
            if type(seq) is int:
                found[seq] = line
        return found

    def stands_for(new: bytes, old: bytes) -> bool:
        if new == old:
            return True
        try:
            a, b = json.loads(new), json.loads(old)
            return bool(a["op"] == PLACEHOLDER and (a["node"], a["seq"], a["hlc"]) == (b["node"], b["seq"], b["hlc"]))
        except (ValueError, KeyError, TypeError):
            return False

    def covered(newer: dict[int, bytes], older: dict[int, bytes], upto: int) -> bool:
        return all((o := older.get(s)) is not None and stands_for(line, o) for s, line in newer.items() if s <= upto)

    theirs, ours = by_seq(got), by_seq(held)
    if not ours:
        return ("other" if theirs else "behind") if own else "replaces"
    last, theirs_last = max(ours), max(theirs, default=0)
    if theirs_last <= last and covered(ours, theirs, theirs_last):
        return "behind"
    if not own and theirs_last >= last and covered(theirs, ours, last):
        return "replaces"
    return "other"


copies = st.lists(st.tuples(st.integers(1, 12), st.sampled_from([b"a", b"b", b"keep"])), max_size=14)


def _copy(lines: list[tuple[int, bytes]], ordered: bool) -> bytes:
    """Lines of NODE's shard (seq, what it says; `keep`: a stand-in), in seq order or as drawn; junk lines between."""
    out = []
    for seq, what in sorted(lines, key=lambda x: x[0]) if ordered else lines:
        if what == b"keep":
            out.append(Op(NODE, seq, 1000 + seq, 0, PLACEHOLDER, {}, Author("", "", "")).encode())
        else:
            fields = {"id": "N", "fields": {"title": what.decode()}}
            out.append(Op(NODE, seq, 1000 + seq, 0, "note.set", fields).encode())
        if seq % 5 == 0:
            out.append(b"not json\n")
    return b"".join(out)


@given(copies, copies, st.booleans(), st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_streamed_walk_decides_as_holding_both_copies_whole_did(
    held: list[tuple[int, bytes]], got: list[tuple[int, bytes]], own: bool, ordered_held: bool, ordered_got: bool
) -> None:
    a, b = _copy(held, ordered_held), _copy(got, ordered_got)
    assert classify(a, b, own=own) == _classify_held_whole(a, b, own)


@given(
    st.lists(st.sampled_from([10, 300, MAX_LINE_BYTES, MAX_LINE_BYTES + 1, MAX_LINE_BYTES + 50_000]), max_size=8),
    st.integers(0, 3000),
)
@settings(max_examples=60, deadline=None)
def test_pieces_give_the_complete_lines_and_skip_or_refuse_overlong_ones(sizes: list[int], tail: int) -> None:
    lines = [bytes([97 + i % 26]) * (size - 1) + b"\n" for i, size in enumerate(sizes)]
    with io.BytesIO(b"".join(lines) + b"t" * tail) as fh:
        if all(len(line) - 1 <= MAX_LINE_BYTES for line in lines) and tail <= MAX_LINE_BYTES:
            assert b"".join(pieces(fh)) == b"".join(lines)
            for k in range(len(lines) + 1):  # from any line's start, up to any line's end
                at = sum(map(len, lines[:k]))
                assert b"".join(pieces(fh, start=at)) == b"".join(lines[k:])
                assert b"".join(pieces(fh, at, start=0)) == b"".join(lines[:k])
        else:
            with pytest.raises(SyncRefused, match="longer than any op"):
                b"".join(pieces(fh))
        kept = b"".join(pieces(fh, strict=False))
        assert kept == b"".join(line for line in lines if len(line) - 1 <= MAX_LINE_BYTES)
        assert all(len(piece) <= PIECE_BYTES + MAX_LINE_BYTES + 1 for piece in pieces(fh, strict=False))
