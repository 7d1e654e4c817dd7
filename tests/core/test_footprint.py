"""What the notebook's memory relies on (issue 18): a note op holds its payload compact (no dicts, no lists: a tuple of
values beside a field-name tuple every such op shares), a note's view shares the op's values, and the payload as a
reader sees it (`Op.data`, the log line) is what it always was."""

from __future__ import annotations

from typing import Any

from hivenote.server.core.fold import State
from hivenote.server.core.model import Author, Op, decode_op


def reachable(value: Any) -> list[Any]:
    """Every container reachable from `value` through tuples, lists and dicts (itself included)."""
    out: list[Any] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (tuple, list, dict)):
            out.append(item)
            todo.extend(item.values() if isinstance(item, dict) else item)
            if isinstance(item, dict):
                todo.extend(item)
    return out


def written(**data: Any) -> Op:
    op = Op("alpha-0001", 1, 100, 0, "note.set", data, Author(agent="cursor"))
    return decode_op(op.encode()[:-1])  # as read from the log


def test_a_note_op_holds_its_payload_in_tuples_and_its_view_shares_them() -> None:
    fields = {"kind": "fact", "title": "Use Drizzle", "body": "not Prisma", "tags": ["db", "orm"], "project": "shop"}
    since = [5, 0, "beta-0002", 7]
    for op in (
        written(id="N", fields=fields, since=since),
        Op("alpha-0001", 1, 100, 0, "note.set", {"id": "N", "fields": fields, "since": since}),  # as a writer makes it
    ):
        held = reachable(op.cached_payload())
        assert held and not [c for c in held if isinstance(c, (dict, list))], held
        assert op.field_names is Op("x", 2, 1, 0, "note.set", {"id": "M", "fields": dict(fields)}).field_names
        assert op.data == {"id": "N", "fields": fields, "since": tuple(since)}  # what readers always saw
        state = State()
        state.apply(op)
        note = state.note("N")
        assert note is not None and note.tags == ("db", "orm")
        assert any(note.tags is c for c in held)  # one tuple of tags, not one in the op and one in the view


def test_a_compact_op_writes_the_same_line() -> None:
    line = (
        b'{"v":1,"node":"alpha-0001","seq":3,"hlc":[100,2],"op":"note.set","id":"N","fields":{"title":"t","tags":[]},'
        b'"since":null,"replaces":"M","by":{"agent":"cursor"}}'
    )
    op = decode_op(line)
    assert op.encode() == line + b"\n"
    assert op.field("replaces") == "M" and op.field("tags") == () and op.since("none") is None
