"""Which lines of a node's own shard still decide something: the compaction rule of OPLOG.md.

Pure: imports only the standard library. Keeps, per element, this node's latest op (the first live op of
each note too, for `created`), drops ops that can never matter again (shadowed, older than a purge, adds
already cascaded away), and keeps every line it cannot read: unreadable lines are never deleted. The last line
is kept so `seq` continues; when its op no longer matters it becomes a content-free `seq.keep` placeholder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .fold import State
from .model import PLACEHOLDER, Author, CorruptLine, Op, Stamp, decode_op

_NO_SINCE: Any = object()


def lines_to_keep(lines: list[bytes], state: State, node: str) -> list[bytes]:
    """The subset of `lines` (this node's shard, in order) that a compacted shard keeps."""
    latest: dict[tuple[Any, ...], tuple[Stamp, int]] = {}
    first: dict[str, tuple[Stamp, int]] = {}
    keep: set[int] = set()
    last_seq: tuple[int, int] = (0, -1)
    last_op: Op | None = None
    for idx, op in _read(lines):
        if op is None:  # unreadable lines are never deleted
            keep.add(idx)
            continue
        if op.node != node:
            keep.add(idx)  # not ours to judge
            continue
        if (op.seq, idx) > last_seq:
            last_seq, last_op = (op.seq, idx), op
        for element in _elements(op, state):
            cur = latest.get(element)
            if cur is None or op.stamp > cur[0]:
                latest[element] = (op.stamp, idx)
        if op.kind.startswith("note.") and op.kind != "note.purge" and not _masked(op, state):
            note_id = op.note_id
            cur = first.get(note_id)
            if cur is None or op.stamp < cur[0]:
                first[note_id] = (op.stamp, idx)
    keep.update(idx for _, idx in latest.values())
    keep.update(idx for _, idx in first.values())
    stand_in = b""
    if last_op is not None and last_seq[1] not in keep:
        # Kept only so the next seq continues after it: a content-free line in its place (a purged note's text must
        # not survive in it), with the same (node, seq) and stamp.
        stand_in = _stand_in(last_op)
        keep.add(last_seq[1])
    return [stand_in if stand_in and idx == last_seq[1] else line for idx, line in enumerate(lines) if idx in keep]


def without_purged(lines: list[bytes], state: State) -> list[bytes] | None:
    """Another history of a node (a branch, `<node>~<hex>.jsonl`) without the lines of notes purged since: nobody owns
    a branch, so no `lines_to_keep` ever runs on it, yet a purge is the end of that note in every file. Drops only the
    note ops a purge masks (everything else in the branch may still decide); the last line, if dropped, becomes a
    content-free `seq.keep` with the same (node, seq) and stamp, so a copy elsewhere sees the result as a compaction
    of the one it holds. None when nothing is dropped."""
    dropped = False
    last: tuple[int, int, Op | None] = (0, -1, None)
    out: list[tuple[int, bytes]] = []
    for idx, op in _read(lines):
        if op is None:  # unreadable lines are never deleted
            out.append((idx, lines[idx]))
            continue
        if op.seq >= last[0]:
            last = (op.seq, idx, op)
        if op.kind.startswith("note.") and op.kind != "note.purge" and _masked(op, state):
            dropped = True
            continue
        out.append((idx, lines[idx]))
    if not dropped:
        return None
    _, at, end = last
    if end is not None and all(idx != at for idx, _ in out):
        out.append((at, _stand_in(end)))
        out.sort(key=lambda pair: pair[0])
    return [line for _, line in out]


def _read(lines: list[bytes]) -> Iterator[tuple[int, Op | None]]:
    """Each non-blank line's index and op (None: a line that does not decode)."""
    for idx, line in enumerate(lines):
        if line.strip():
            try:
                yield idx, decode_op(line)
            except CorruptLine:
                yield idx, None


def _stand_in(op: Op) -> bytes:
    """A content-free line in the place of `op` (the same node, seq and stamp, no newline): kept so the seq after it
    continues, with none of a purged note's text."""
    return Op(op.node, op.seq, op.wall, op.counter, PLACEHOLDER, {}, Author("", "", "")).encode()[:-1]


def _masked(op: Op, state: State) -> bool:
    """Whether a note op can never matter again: older than the note's latest purge, or an edit made without having
    seen that purge (its `since` is an older one, or none), however far ahead its stamp is. A purge is the end of the
    note everywhere: an edit stamped ahead by a clock that was wrong must not keep its text past the purge."""
    rec = state.notes.get(op.note_id)
    if rec is None or rec.purge is None:
        return False
    purge = rec.purge
    if op.stamp <= purge:
        return True
    if op.kind != "note.set":
        return False
    since = op.since(_NO_SINCE)
    if since is _NO_SINCE:  # an older Hivenote's edit: its stamp alone says whether it came after the purge
        return False
    # Made without the note's latest purge: it never counts again (the latest purge only grows). A `since` newer than
    # the purge held here names a purge on its way: kept.
    return since is None or tuple(since) < (purge.wall, purge.counter, purge.node, purge.seq)


def _after(stamp: Stamp, *others: Stamp | None) -> bool:
    return all(o is None or stamp > o for o in others)


def _elements(op: Op, state: State) -> list[tuple[Any, ...]]:
    """The registers this op may still win; empty when it can never matter again."""
    d, kind = op.data, op.kind
    if kind == "note.purge":
        return [("purge", d["id"])]
    if kind.startswith("note."):
        if _masked(op, state):
            return []
        if kind == "note.set":
            return [("field", d["id"], name) for name in d["fields"]]
        return [("trash", d["id"])]
    if kind == "entity.add":
        alive = _after(op.stamp, state.ent_del.get(d["name"]))
        return [("entity", d["name"], d.get("k", 0))] if alive else []
    if kind == "entity.del":
        return [("entity.del", d["name"])]
    if kind == "obs.add":
        e, k = d["entity"], d.get("k", 0)
        alive = _after(op.stamp, state.ent_del.get(e), state.obs_del.get((e, k, d["text"])))
        alive = alive and ("since" not in d or d["since"] == state.entity_epoch(e))  # its entity's incarnation
        return [("obs", e, k, d["text"], d.get("j", 0))] if alive else []
    if kind == "obs.del":
        return [("obs.del", d["entity"], d.get("k", 0), d["text"])]
    rel = (d["from"], d["to"], d["type"])
    if kind == "rel.add":
        alive = _after(op.stamp, state.rel_del.get(rel), state.ent_del.get(rel[0]), state.ent_del.get(rel[1]))
        return [("rel", *rel, d.get("j", 0))] if alive else []
    return [("rel.del", *rel)]
