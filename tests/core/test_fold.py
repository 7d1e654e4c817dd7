"""The CRDT laws of the fold (OPLOG.md "Laws"), checked with Hypothesis over random multi-node op sets."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.compaction import lines_to_keep
from hivenote.server.core.fold import State
from hivenote.server.core.model import Author, Journal, Op, decode_op
from tests.support.internals import apply_all
from tests.support.strategies import NODES, op_sets


def fold(ops: list[Op]) -> dict[str, Any]:
    state = State()
    apply_all(state, ops)
    return state.snapshot()


@given(op_sets())
def test_fold_is_idempotent(ops: list[Op]) -> None:
    assert fold(ops + ops) == fold(ops)


@given(op_sets(), st.randoms(use_true_random=False))
def test_fold_is_independent_of_delivery_order(ops: list[Op], rnd: random.Random) -> None:
    shuffled = ops[:]
    rnd.shuffle(shuffled)
    assert fold(shuffled) == fold(ops)


@given(op_sets(), st.randoms(use_true_random=False))
def test_reading_between_ops_sees_what_a_fresh_fold_sees(ops: list[Op], rnd: random.Random) -> None:
    """Entities are kept as built until an op touches their name: reads in between must never see a stale one."""
    shuffled = ops[:]
    rnd.shuffle(shuffled)
    state = State()
    for op in shuffled:
        state.apply(op)
        if rnd.random() < 0.5:
            state.graph()  # builds, and keeps, every live entity
    assert state.snapshot() == fold(ops)


def test_relations_are_kept_across_writes_that_cannot_change_them() -> None:
    """Reading the whole graph after an entity or observation write reuses the relations (the encoded read_graph
    answer then reuses their bytes); a relation write or an entity delete builds them again."""
    state = State()
    apply_all(
        state,
        [
            op(0, 1, 10, "entity.add", name="Ann", type="person"),
            op(0, 2, 11, "rel.add", **{"from": "Ann", "to": "Bob", "type": "knows"}),
        ],
    )
    kept = state.graph()[1]
    apply_all(
        state, [op(0, 3, 12, "entity.add", name="Bob", type="person"), op(0, 4, 13, "obs.add", entity="Ann", text="x")]
    )
    assert state.graph()[1][0] is kept[0]
    for n, (kind, data) in enumerate(
        [
            ("rel.add", {"from": "Bob", "to": "Ann", "type": "knows"}),
            ("rel.del", {"from": "Bob", "to": "Ann", "type": "knows"}),
            ("entity.del", {"name": "Cy"}),
        ],
        start=5,
    ):
        kept = state.graph()[1]
        state.apply(op(0, n, 10 + n, kind, **data))
        assert state.graph()[1][0] is not kept[0], kind


def test_the_kept_entity_order_places_late_renewed_and_dead_entities_as_a_fresh_fold_does() -> None:
    """A local write's new entity comes last and is appended; one from another node can be older, one added again
    moves, one already deleted stays out."""
    steps = [
        op(0, 1, 10, "entity.add", name="Ann", type="p"),
        op(0, 2, 30, "entity.add", name="Cy", type="p"),
        op(1, 1, 20, "entity.add", name="Bob", type="p"),  # older than Cy: between
        op(1, 2, 40, "entity.add", name="Dee", type="p"),  # newest: last
        op(0, 3, 50, "entity.del", name="Ann"),
        op(0, 4, 60, "entity.add", name="Ann", type="p"),  # added again: moves last
        op(2, 1, 70, "entity.del", name="Eve"),
        op(2, 2, 65, "entity.add", name="Eve", type="p"),  # the newest add, but deleted already
        op(2, 3, 80, "entity.add", name="Bob", type="p"),  # a later add of a live one: moves last
    ]
    state = State()
    for n, step in enumerate(steps, start=1):
        state.graph()  # keeps the order the next op has to be placed in
        state.apply(step)
        assert state.snapshot() == fold(steps[:n]), step
    assert [e["name"] for e in state.snapshot()["entities"]] == ["Cy", "Dee", "Ann", "Bob"]


@given(op_sets(), st.randoms(use_true_random=False))
def test_fold_is_associative_over_batches(ops: list[Op], rnd: random.Random) -> None:
    a, b, c = ([op for op in ops if rnd.random() < 0.5] for _ in range(3))
    left, right = State(), State()
    apply_all(left, a + b)
    apply_all(left, c)
    apply_all(right, a)
    apply_all(right, b + c)
    assert left.snapshot() == fold(a + b + c) == right.snapshot()


@given(op_sets(), st.randoms(use_true_random=False))
def test_duplicated_and_gapped_delivery_converges_once_refilled(ops: list[Op], rnd: random.Random) -> None:
    state = State()
    first_pass = [op for op in ops if rnd.random() < 0.6]  # gaps
    apply_all(state, first_pass + first_pass[: len(first_pass) // 2])  # duplicates
    refill = ops[:]
    rnd.shuffle(refill)
    apply_all(state, refill)
    assert state.snapshot() == fold(ops)


@given(op_sets(), st.randoms(use_true_random=False))
def test_relay_through_a_middle_node_converges(ops: list[Op], rnd: random.Random) -> None:
    """A sees only its own ops, B receives A's in random order, C hears everything from B only."""
    a_ops = [op for op in ops if op.node == NODES[0]]
    b = State()
    relayed: list[Op] = []
    for op in sorted(ops, key=lambda _: rnd.random()):
        if b.apply(op):
            relayed.append(op)
    c = State()
    apply_all(c, reversed(relayed))
    assert fold(a_ops + relayed) == c.snapshot() == fold(ops)


@given(op_sets())
def test_ops_survive_an_encode_decode_round_trip(ops: list[Op]) -> None:
    for op in ops:
        line = op.encode()
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode_op(line[:-1]) == op


class _Shard(Journal):
    """A journal that reads its lines back, as a shard file does (a released note op's payload is read from it)."""

    def __init__(self, data: bytes = b"") -> None:
        super().__init__()
        self.data = data

    def line(self, at: int, digest: int) -> bytes | None:
        return self.data[at : self.data.index(b"\n", at)]


def _journals(ops: list[Op]) -> dict[str, _Shard]:
    """Each node's ops as its shard's journal rows, as read from their lines (the parse path)."""
    journals: dict[str, _Shard] = {}
    for op in ops:
        line = op.encode()
        journal = journals.setdefault(op.node, _Shard())
        journal.add(decode_op(line[:-1]), len(journal.data))
        journal.data += line
    return journals


@given(op_sets(max_size=60), st.randoms(use_true_random=False))
def test_folding_journal_rows_as_the_op_cache_does_equals_folding_the_ops(ops: list[Op], rnd: random.Random) -> None:
    # A restart folds the op cache's rows straight from the columns (`apply_rows`, a graph op made into no op); it
    # must fold what the ops fold, in any order of shards, with a copy of a shard folded twice.
    parsed = _journals(ops)  # encodes the ops: each learns its digest, the last part of its stamp
    expected = fold(ops)
    state = State()
    names = list(parsed) + list(parsed)[:1]  # a shard and a sync tool's copy of it
    rnd.shuffle(names)
    for name in names:
        source = parsed[name]
        cached = _Shard(source.data)
        cached.extend(source.columns_of(0), source.tables(), list(source.held))
        state.apply_rows(cached)
    assert state.snapshot() == expected
    # Folding the parsed rows' ops one by one (the first start) gives the same too.
    again = State()
    for journal in parsed.values():
        for row in range(len(journal)):
            again.apply(journal.op(row))
    assert again.snapshot() == expected


@settings(max_examples=300)
@given(op_sets(max_size=60), st.randoms(use_true_random=False))
def test_compaction_preserves_the_fold(ops: list[Op], rnd: random.Random) -> None:
    encoded = {id(op): op.encode()[:-1] for op in ops}  # as the store does: an op's digest is its line's
    state = State()
    apply_all(state, ops)
    own = NODES[0]
    lines = [encoded[id(op)] for op in ops if op.node == own]
    lines.insert(rnd.randint(0, len(lines)), b"{garbage")  # unreadable lines are kept, never judged
    kept = lines_to_keep(lines, state, own)
    assert b"{garbage" in kept
    assert len(kept) <= len(lines)
    if any(op.node == own for op in ops):
        last = max(op.seq for op in ops if op.node == own)
        assert any(line.startswith(b"{") and b'"seq":%d,' % last in line for line in kept)
    compacted = [decode_op(line) for line in kept if line != b"{garbage"]
    others = [op for op in ops if op.node != own]
    assert fold(compacted + others) == state.snapshot()


# -- examples of the semantics the laws leave open ----------------------------------------------------


def op(node: int, seq: int, wall: int, kind: str, **data: Any) -> Op:
    return Op(NODES[node], seq, wall, 0, kind, data, Author(agent="cli"))


def test_last_writer_wins_per_field_not_per_note() -> None:
    ops = [
        op(0, 1, 10, "note.set", id="N", fields={"kind": "fact", "title": "a", "body": "one"}),
        op(1, 1, 20, "note.set", id="N", fields={"title": "b"}),
        op(0, 2, 15, "note.set", id="N", fields={"body": "two"}),
    ]
    note = fold(ops)["notes"]["N"]
    assert (note["title"], note["body"], note["created"], note["updated"]) == ("b", "two", 10, 20)
    assert note["created_by"]["node"] == NODES[0] and note["updated_by"]["node"] == NODES[1]


def test_trash_then_restore_then_trash_follows_the_latest() -> None:
    base = op(0, 1, 1, "note.set", id="N", fields={"title": "t"})
    trash, restore = op(0, 2, 2, "note.trash", id="N"), op(1, 1, 3, "note.restore", id="N")
    assert fold([base, restore, trash])["notes"]["N"]["trashed"] is False
    assert fold([base, trash])["notes"]["N"]["trashed"] is True


def test_purge_erases_the_note_until_a_later_set_recreates_it_fresh() -> None:
    ops = [
        op(0, 1, 1, "note.set", id="N", fields={"title": "secret", "body": "token=abc"}),
        op(0, 2, 2, "note.trash", id="N"),
        op(0, 3, 3, "note.purge", id="N"),
    ]
    assert fold(ops)["notes"] == {}
    state = State()
    apply_all(state, [*ops, op(1, 1, 4, "note.set", id="N", fields={"title": "again"})])
    note = state.snapshot()["notes"]["N"]
    assert (note["title"], note["body"], note["trashed"], note["created"]) == ("again", "", False, 4)
    assert [v.action for v in state.history("N")] == ["set"]


def test_entity_delete_cascades_only_to_older_observations_and_relations() -> None:
    ops = [
        op(0, 1, 1, "entity.add", name="Ann", type="person"),
        op(0, 2, 2, "obs.add", entity="Ann", text="old"),
        op(0, 3, 3, "rel.add", **{"from": "Bob", "to": "Ann", "type": "knows"}),
        op(1, 1, 4, "entity.del", name="Ann"),
        op(0, 4, 5, "entity.add", name="Ann", type="robot"),
        op(0, 5, 6, "obs.add", entity="Ann", text="new"),
    ]
    snap = fold(ops)
    assert snap["entities"] == [{"name": "Ann", "entityType": "robot", "observations": ["new"]}]
    assert snap["relations"] == []


def test_concurrent_add_and_delete_of_an_observation_resolve_by_stamp() -> None:
    add = op(0, 2, 5, "obs.add", entity="Ann", text="x")
    delete = op(1, 1, 4, "obs.del", entity="Ann", text="x")
    ent = op(0, 1, 1, "entity.add", name="Ann", type="p")
    assert fold([ent, delete, add])["entities"][0]["observations"] == ["x"]
    later_delete = op(1, 2, 6, "obs.del", entity="Ann", text="x")
    assert fold([ent, add, delete, later_delete])["entities"][0]["observations"] == []


def test_same_name_entities_from_one_batch_stay_apart_but_concurrent_adds_merge() -> None:
    batch = [op(0, 1, 1, "entity.add", name="Dup", type="a"), op(0, 2, 2, "entity.add", name="Dup", type="b", k=1)]
    assert [e["entityType"] for e in fold(batch)["entities"]] == ["a", "b"]
    concurrent = [op(0, 1, 1, "entity.add", name="Dup", type="a"), op(1, 1, 2, "entity.add", name="Dup", type="b")]
    assert [e["entityType"] for e in fold(concurrent)["entities"]] == ["b"]


def test_history_lists_every_version_in_order_with_its_author() -> None:
    state = State()
    apply_all(
        state,
        [
            op(1, 1, 20, "note.set", id="N", fields={"title": "second"}),
            op(0, 1, 10, "note.set", id="N", fields={"title": "first"}),
            op(0, 2, 30, "note.trash", id="N"),
        ],
    )
    versions = state.history("N")
    assert [(v.at, v.action, v.node, v.fields) for v in versions] == [
        (10, "set", NODES[0], {"title": "first"}),
        (20, "set", NODES[1], {"title": "second"}),
        (30, "trash", NODES[0], {}),
    ]
