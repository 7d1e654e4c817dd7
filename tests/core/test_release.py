"""Superseded payloads are not held: a note op that decides no field any more (or a trash, restore or purge) lets go of
its payload once it knows where its line is, and reads it back from there when asked. The fold, the notes and the
history are exactly those of a fold that keeps every payload."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.fold import State
from hivenote.server.core.model import Author, Op, decode_op, line_digest
from tests.support.internals import apply_all
from tests.support.strategies import op_sets


class Lines:
    """A shard as the fold sees it through `Op.src`: lines by offset (here: by index), each checked by its digest."""

    def __init__(self) -> None:
        self.lines: dict[int, bytes] = {}
        self.reads = 0

    def line(self, at: int, digest: int) -> bytes | None:
        self.reads += 1
        line = self.lines.get(at)
        return line if line is not None and line_digest(line) == digest else None


def placed(ops: list[Op], lines: Lines) -> list[Op]:
    """Fresh copies of `ops` as read from a shard: decoded from their lines, each knowing where its line is."""
    out = []
    for op in ops:
        line = op.encode()[:-1]
        copy = decode_op(line)
        copy.at, copy.src = len(lines.lines), lines
        lines.lines[copy.at] = line
        out.append(copy)
    return out


def note_op(seq: int, wall: int, kind: str, **data: Any) -> Op:
    return Op("alpha-0001", seq, wall, 0, kind, data, Author(agent="cli"))


def test_superseded_edits_let_go_of_their_text_and_read_it_back_for_the_history() -> None:
    lines = Lines()
    ops = placed(
        [
            note_op(1, 100, "note.set", id="N", fields={"kind": "fact", "title": "first", "body": "x" * 1000}),
            note_op(2, 200, "note.set", id="N", fields={"title": "second"}),
            note_op(3, 300, "note.set", id="N", fields={"title": "third", "body": "short"}),
            note_op(4, 400, "note.trash", id="N"),
        ],
        lines,
    )
    state = State()
    apply_all(state, ops)
    first, second, third, trash = ops
    assert first.held  # it still decides `kind`
    assert first.cached_payload() == ("N", ("fact", ..., ...))  # but lets go of the title and body newer ops decide
    assert not second.held  # every field it set has a newer value: only its place in the history is kept
    assert third.held
    assert not trash.held  # its payload is the id
    assert second.note_id == "N" and tuple(second.field_names) == ("title",)
    assert second._stamp is None and second.stamp == (200, 0, "alpha-0001", 2, second.digest)  # made when asked
    note = state.note("N")
    assert note is not None and (note.title, note.body, note.kind, note.trashed) == ("third", "short", "fact", True)
    before = lines.reads
    assert [v.fields.get("title") for v in state.history("N")] == ["first", "second", "third", None]
    assert lines.reads == before + 2  # only the released edit and the first op's let-go values were read back


def test_a_released_op_whose_line_is_gone_is_left_out_of_the_history() -> None:
    lines = Lines()
    ops = placed(
        [
            note_op(1, 100, "note.set", id="N", fields={"title": "old"}),
            note_op(2, 200, "note.set", id="N", fields={"title": "new"}),
        ],
        lines,
    )
    state = State()
    apply_all(state, ops)
    lines.lines.pop(ops[0].at)  # compaction dropped it
    assert [v.fields for v in state.history("N")] == [{"title": "new"}]


def test_an_op_nobody_can_read_again_keeps_its_payload() -> None:
    ops = [
        note_op(1, 100, "note.set", id="N", fields={"title": "old"}),
        note_op(2, 200, "note.set", id="N", fields={"title": "new"}),
    ]
    apply_all(State(), ops)
    assert all(op.held for op in ops)  # no `src`: a line that was never written (or a test's op) is kept


def snapshot_and_history(state: State) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    return state.snapshot(), {note_id: [v.to_json() for v in state.history(note_id)] for note_id in state.notes}


@given(op_sets(max_size=60), st.randoms(use_true_random=False))
@settings(max_examples=150)
def test_releasing_payloads_changes_nothing_a_reader_sees(ops: list[Op], rnd: random.Random) -> None:
    for op in ops:
        op.encode()  # as the store does: an op's digest is its line's
    kept = State()
    apply_all(kept, ops)
    lines = Lines()
    shuffled = placed(ops, lines)
    rnd.shuffle(shuffled)
    released = State()
    apply_all(released, shuffled)
    assert snapshot_and_history(released) == snapshot_and_history(kept)
    holders = {id(op) for rec in released.notes.values() for op in rec.deciding().values()}
    for op in shuffled:
        if op.kind.startswith("note.") and id(op) not in holders:
            assert not op.held, op  # superseded payloads are not held


@given(op_sets(max_size=60), st.randoms(use_true_random=False))
@settings(max_examples=150)
def test_ops_folded_again_without_the_ops_that_superseded_them_read_as_a_fresh_fold(
    ops: list[Op], rnd: random.Random
) -> None:
    """Issue 32, finding 2: the same rows folded again (the op cache's) after some ops are gone (a shard deleted)
    give the notes a fold of the rest gives. An op that let go of a value its newer op decided decides it again: the
    value is read back from its line; the `...` placeholder is never a value of any note."""
    for op in ops:
        op.encode()
    lines = Lines()
    shuffled = placed(ops, lines)
    rnd.shuffle(shuffled)
    apply_all(State(), shuffled)  # payloads let go of as they are superseded
    rest = [op for op in shuffled if rnd.random() < 0.5]
    again = State()
    apply_all(again, rest)
    fresh = State()
    apply_all(fresh, placed(rest, Lines()))
    assert snapshot_and_history(again) == snapshot_and_history(fresh)
