"""The fold: ops in any order, any number of times -> one state (notes, knowledge graph), advanced op by op.

Pure: imports only the standard library. Every element is a last-writer-wins register or an LWW-element-set
member decided by the total order of `Stamp`s, so the result does not depend on delivery order (OPLOG.md).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .model import (
    OP_KINDS,
    PLACEHOLDER,
    Entity,
    Facets,
    Journal,
    Note,
    Op,
    PayloadGone,
    Refs,
    Relation,
    Stamp,
    Version,
    graph_row,
)

_LEGACY: Any = object()  # an obs.add without `since` (written before incarnations were recorded)
_NOTE_OPS = frozenset(("note.set", "note.trash", "note.restore", "note.purge"))
_FIRST_K = (0,)  # the occurrences of a name added once (`State.ent_ks`)
_SHORT_ENDS = 16  # relations at one name kept in a list (`State.rel_by_name`); more: a set
_NOTE_CODES = frozenset(code for code, kind in enumerate(OP_KINDS) if kind in _NOTE_OPS)
Epoch = tuple[int, int, str, int] | None  # an entity's latest delete (or a note's latest purge) as seen by a writer
OccKey = tuple[str, int]  # (entity name, occurrence k): the official server allows same-name entities in one batch
RelKey = tuple[str, str, str]  # (from, to, relationType)


def _newer(stamp: Stamp, *others: Stamp | None) -> bool:
    return all(o is None or stamp > o for o in others)


def _same(a: Op | int | None, b: Op | int) -> bool:
    """One op, as an object or as its row (rows are ints made afresh: compared by value)."""
    return a is b or (type(a) is int and a == b)


Entry = Op | int  # an op, or (once it has one) its row in a journal (`Refs`)
# A graph add's stamp as a register keeps it: its row in a journal (`Refs`), or the stamp itself for an op in no
# journal yet (this node's own write, applied before its line is written). A stamp object and its three ints cost
# ~180 bytes an op, the row one int.
At = Stamp | int
Member = str | tuple[str, int]  # an observation in `State.obs_add`: its text, or (text, j) for an in-batch copy j > 0
Revision = tuple[int, int, str, int, int]  # a note's latest stamp as a plain tuple: it compares as the `Stamp` it is


KEPT_VIEWS = 4096  # note views a State keeps (`State.note`): ~1.6 MB
_MARK_STEP = 0x9E3779B97F4A7C15  # an odd 64-bit step per op: a history's count changes its mark whatever the digests
_MARK_MOD = 1 << 64


class NoteRecord:
    """Everything the log says about one note id: field registers, trash register, purge mark, ops in order. An op
    that sits in a journal (a shard's rows) is referred to by its row (`Refs`), in the history and in the field
    registers alike, never as an object: the row keeps the payload while the op decides a field."""

    __slots__ = ("_refs", "fields", "id", "ops", "purge", "trash", "view")

    def __init__(self, note_id: str, refs: Refs | None = None) -> None:
        self.id = note_id
        self._refs = refs if refs is not None else Refs()
        # Sorted by stamp: the history, each op as its journal row (`Refs`); a list, with the op itself, only once
        # an op in no journal comes (one made in memory). A history of one op in a journal (a note written once, the
        # usual case) is that op's row alone, the very int `fields` holds: an array per note cost 80 bytes.
        self.ops: int | array[int] | list[Op | int] | None = None
        # field -> the op that last set it (its value in its payload); while one op decides every field set so far (a
        # note written once, the usual case), that op alone: a dict per note costs more than the rest of its record.
        self.fields: dict[str, Entry] | Entry | None = None
        self.trash: tuple[Stamp, bool] | None = None
        self.purge: Stamp | None = None
        self.view: Note | bool | None = False  # False: not computed yet

    def mark(self) -> int:
        """Which ops the history holds, as a 64-bit number (from their count and line digests): a record of the same
        note with the same mark, in this state or another, folded the same ops, so its note reads the same. 0 (no
        mark, equal to none) when an op of the history is in no journal."""
        ops = self.ops
        if type(ops) is int:  # one op: the usual
            return (_MARK_STEP + self._refs.digest(ops)) % _MARK_MOD or 1
        if ops is None or isinstance(ops, list):
            return 0
        assert isinstance(ops, array)
        return (len(ops) * _MARK_STEP + self._refs.digest_sum(ops)) % _MARK_MOD or 1

    def entries(self) -> Sequence[Op | int]:
        """The history's entries, oldest first (an op, or its row in a journal)."""
        ops = self.ops
        if type(ops) is int:
            return (ops,)
        assert not isinstance(ops, int)
        return () if ops is None else ops

    def apply(self, op: Op) -> None:
        stamp = op.stamp
        refs = self._refs
        row = refs.ref(op)
        key: Any = refs.stamp  # a row's stamp is a plain tuple: it compares as the Stamp it is
        entry: Op | int = op if row is None else row
        if row is None:
            if type(self.ops) is not list:
                self.ops = list(self.entries())
        elif self.ops is None:
            self.ops = row  # the history's one op: its row alone
        elif type(self.ops) is int:
            self.ops = array("q", (self.ops,))
        ops: Any = self.ops
        if ops is entry:
            pass
        elif not ops or stamp > key(ops[-1]):
            ops.append(entry)
        else:
            ops.insert(bisect.bisect_right(ops, stamp, key=key), entry)
        me: Entry = entry
        if op.kind == "note.set" and self.fields is None:
            self.fields = me  # the first edit decides every field it sets
        elif op.kind == "note.set":
            fields = self.deciding()
            self.fields = fields
            won = False
            displaced: list[Entry] | None = None
            for name in op.field_names:
                cur = fields.get(name)
                if cur is None or stamp > key(cur):
                    if cur is not None and not _same(cur, me):
                        if displaced is None:
                            displaced = [cur]
                        elif not any(_same(cur, d) for d in displaced):
                            displaced.append(cur)
                    fields[name] = me
                    won = True
            # An op that decides no field any more keeps only its place in the history: its payload is read back
            # from the log when the history is shown (memory stays that of the notebook, not of every edit).
            if not won:
                op.release(self.id)
            if displaced is not None:
                for old in displaced:
                    deciding = [name for name in refs.field_names(old) if _same(fields.get(name), old)]
                    if deciding:
                        refs.keep_only(old, deciding)  # the values newer ops decide are read back from the log
                    else:
                        refs.release(old, self.id)
        else:
            if op.kind == "note.purge":
                if self.purge is None or stamp > self.purge:
                    self.purge = stamp
            elif self.trash is None or stamp > self.trash[0]:
                self.trash = (stamp, op.kind == "note.trash")
            op.release(self.id)  # its payload is the id: the history shows none of it
        self.view = False

    def sets(self, name: str) -> bool:
        """Whether an op of the history decides the field `name` (without making the view)."""
        fields = self.fields
        if fields is None:
            return False
        return name in fields if isinstance(fields, dict) else name in self._refs.field_names(fields)

    def deciding(self) -> dict[str, Entry]:
        """Each field's deciding op or its row (a fresh dict while one op decides them all)."""
        fields = self.fields
        if fields is None:
            return {}
        if not isinstance(fields, dict):
            return dict.fromkeys(self._refs.field_names(fields), fields)
        return fields

    def deciding_ops(self) -> dict[str, Op]:
        """Each field's deciding op, made from its row (one op for every field it decides)."""
        made: dict[int, Op] = {}
        out = {}
        for name, entry in self.deciding().items():
            key = entry if type(entry) is int else ~id(entry)
            op = made.get(key)
            if op is None:
                op = made[key] = self._refs.op(entry)
            out[name] = op
        return out

    def placed(self, op: Op) -> None:
        """`op`, applied before it had a journal row (this node's own write, applied before its line was written),
        now has one: the history keeps the row instead of the op."""
        ref = self._refs.ref(op)
        if ref is None:
            return
        fields = self.fields
        if fields is op:
            self.fields = ref
        elif isinstance(fields, dict):
            named = [name for name, entry in fields.items() if entry is op]
            for name in named:
                fields[name] = ref
            if not named:
                self._refs.release(ref, self.id)  # superseded before its line was written: its row keeps the id
        elif op.kind == "note.set":
            self._refs.release(ref, self.id)
        ops = self.ops
        if type(ops) is not list:
            return
        key: Any = self._refs.stamp
        at = bisect.bisect_left(ops, op.stamp, key=key)
        if at < len(ops) and ops[at] is op:
            ops[at] = ref
            if all(type(entry) is int for entry in ops):
                self.ops = ref if len(ops) == 1 else array("q", ops)  # type: ignore[arg-type]

    def _counts(self, op: Op) -> bool:
        """Whether a `note.set` still decides a field: made after the latest purge, by a writer that had seen that
        purge (an edit concurrent with a purge does not bring the note back as a stub: the purge wins)."""
        purge = self.purge
        if purge is None:
            return True
        if op.stamp < purge:
            return False
        since = op.since(_LEGACY)
        return since is _LEGACY or since == (purge.wall, purge.counter, purge.node, purge.seq)

    def _live(self) -> Sequence[Op | int]:
        """The history's entries after the latest purge (a purge erases everything before it), without the edits made
        before it whatever their stamps (one stamped ahead by a clock that was wrong, its `since` an older purge or
        none): they are neither in the note's history nor its `created` or `updated`."""
        entries = self.entries()
        purge = self.purge
        if purge is None:
            return entries
        key: Any = self._refs.stamp
        cut = bisect.bisect_right(entries, purge, key=key)
        seen = (purge.wall, purge.counter, purge.node, purge.seq)
        live = []
        for entry in entries[cut:]:
            op = self._refs.op(entry)
            if op.kind == "note.set":
                try:
                    since = op.since(_LEGACY)
                except PayloadGone:  # compacted away: it decides nothing
                    continue
                if since is not _LEGACY and since != seen:
                    continue
            live.append(entry)
        return live

    def live_ops(self) -> list[Op]:
        """Ops after the latest purge (a purge erases everything before it); released ones made again."""
        return [self._refs.op(entry) for entry in self._live()]

    def listed(self) -> tuple[Revision, bool] | None:
        """The note's revision and whether it is in the trash, as its view says, without making the view when none is
        kept (a pass over the whole notebook: the list's order, its counts); None: no note (`note` is None)."""
        view = self.view
        if view is False and self.purge is None and self.fields is not None:
            fields = self.fields
            if fields if isinstance(fields, dict) else self._refs.field_names(fields):
                trash = self.trash
                return self._refs.stamp(self.entries()[-1]), trash is not None and trash[1]
            return None
        if view is False:
            view = self.note(keep=False)
        return (view.revision, view.trashed) if isinstance(view, Note) else None

    def facets(self) -> Note | Facets | None:
        """What a filter looks at: the kept view, or else the same values read from the deciding ops' rows (a
        record with a purge makes its view for the moment: its rules are the view's); None: no note."""
        view = self.view
        if view is not False:
            return view if isinstance(view, Note) else None
        fields, refs = self.fields, self._refs
        if self.purge is not None or fields is None:
            return self.note(keep=False)
        if type(fields) is int and fields == self.ops:  # written once (the usual note; so not in the trash): its row
            seen = refs.facets(fields)
            if seen is not None:
                return seen
        deciding = self.deciding_ops()
        if not deciding:
            return None
        values = {name: deciding[name].field(name) for name in ("kind", "project", "tags") if name in deciding}
        entries = self.entries()
        first = refs.op(entries[0])
        last = first if len(entries) == 1 else refs.op(entries[-1])
        return Facets(
            kind=values.get("kind", "fact"),
            project=values.get("project"),
            tags=tuple(values.get("tags", ())),
            trashed=self.trash is not None and self.trash[1],
            created_by=first.by,
            created_on=first.node,
            updated_by=last.by,
            updated_on=last.node,
            id=self.id,
        )

    def walls(self) -> list[int]:
        """When the note changed: the wall time (ms) of each op of its history after the latest purge, oldest first,
        read from the rows without making the ops (a time window asks it of a note that changed after its end)."""
        if self.purge is not None:
            return [op.wall for op in self.live_ops()]
        stamp: Any = self._refs.stamp
        return [stamp(entry)[0] for entry in self.entries()]

    def note(self, *, keep: bool = True) -> Note | None:
        """The note as its fields' deciding ops say (None: no note, such as one purged). The view is kept for the next
        call unless `keep` is false: a pass over the whole notebook (indexing it, exporting it) makes each note's view
        for the moment, or the notebook would hold every note twice, as its ops and as its view."""
        if self.view is not False:
            return self.view if isinstance(self.view, Note) else None
        purge = self.purge
        deciding = self.deciding_ops()
        values = {k: op.field(k) for k, op in deciding.items() if self._counts(op)}
        if len(values) < len(deciding) and purge is not None:  # an edit that never saw the purge: purge wins
            for op in reversed(self.live_ops()):
                try:  # older edits are released: read back from the log (rare: a purge met a concurrent edit)
                    if op.kind == "note.set" and self._counts(op):
                        for name, value in op.data["fields"].items():
                            values.setdefault(name, value)
                except PayloadGone:  # compacted away: it decides nothing
                    continue
        view: Note | None = None
        if values:
            live = self._live()
            first = self._refs.op(live[0])
            last = first if len(live) == 1 else self._refs.op(live[-1])  # one op: one set of ints for the view
            trash = self.trash
            view = Note(
                id=self.id,
                kind=values.get("kind", "fact"),
                title=values.get("title", ""),
                body=values.get("body", ""),
                tags=tuple(values.get("tags", ())),
                project=values.get("project"),
                created=first.wall,
                updated=last.wall,
                created_by=first.by,
                created_on=first.node,
                updated_by=last.by,
                updated_on=last.node,
                trashed=trash is not None and trash[1] and _newer(trash[0], purge),
                revision=last.stamp,
                replaces=values.get("replaces"),
            )
        if keep:
            self.view = view
        return view


D = TypeVar("D")  # an index derived from a State (State.derived)


@dataclass
class Fork:
    """Evidence that two different lines claim one writer position `(node, seq)`: two installs wrote as one node (a
    copied data dir, a restored shard). Both lines are folded (nothing acknowledged is lost); this says it happened."""

    node: str
    first_seq: int  # the lowest position seen with two contents
    positions: int = 0  # how many positions hold more than one content

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "first_seq": self.first_seq, "positions": self.positions}


@dataclass
class NodeStats:
    """What the fold has seen of one writer node (for status and sync lag)."""

    ops: int = 0
    max_seq: int = 0
    last_wall: int = 0


@dataclass
class State:
    """The folded notebook. `apply` is idempotent per op, an op being its `(node, seq)` and its line's digest; order
    of application does not matter."""

    seen_upto: dict[str, int] = field(default_factory=dict)  # node -> every seq 1..n applied
    seen_extra: dict[str, dict[int, int]] = field(default_factory=dict)  # node -> {seq: digest} beyond a gap
    digests: dict[str, array[int]] = field(default_factory=dict)  # node -> digest of the op at seq 1..n (0: unknown)
    forked: dict[tuple[str, int], set[int]] = field(default_factory=dict)  # (node, seq) -> the other digests there
    forks: dict[str, Fork] = field(default_factory=dict)  # node -> evidence that two histories claim it
    last_wall: dict[str, int] = field(default_factory=dict)  # node -> latest wall clock seen in its ops
    notes: dict[str, NoteRecord] = field(default_factory=dict)
    longest_note_id: int = 0  # no id in `notes` is longer: an id that long can only be a prefix of itself
    ent_add: dict[OccKey, tuple[At, str]] = field(default_factory=dict)  # the deciding add and the type it gives
    # name -> the occurrences k ever added (almost always (0,), one shared tuple: a set per name cost 216 bytes)
    ent_ks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    ent_del: dict[str, Stamp] = field(default_factory=dict)
    obs_add: dict[OccKey, dict[Member, At]] = field(default_factory=dict)
    # (entity, k, text, j) -> the entity incarnation (its latest delete) the latest add of it was made in, when that
    # is one (absent: none, the usual: a dict entry per observation cost ~100 bytes); in `obs_legacy` when that add
    # was written before incarnations were recorded (it follows the stamp rule alone)
    obs_since: dict[tuple[str, int, str, int], Epoch] = field(default_factory=dict)
    obs_legacy: set[tuple[str, int, str, int]] = field(default_factory=set)
    obs_del: dict[tuple[str, int, str], Stamp] = field(default_factory=dict)
    rel_add: dict[tuple[str, str, str, int], At] = field(default_factory=dict)
    rel_del: dict[RelKey, Stamp] = field(default_factory=dict)
    # name -> the relations with an end there: a list while short (a set of five cost 728 bytes), a set once long
    rel_by_name: dict[str, list[tuple[str, str, str, int]] | set[tuple[str, str, str, int]]] = field(
        default_factory=dict
    )
    graph_version: int = 0
    notes_version: int = 0
    # Change feeds of the indexes derived from this state (search, listing, graph search): each index adds a set
    # when it is made (`derived`) and takes what the fold puts in it; the fold knows nothing else of them.
    note_feeds: list[set[str]] = field(default_factory=list)  # the id of every note an op touches
    name_feeds: list[set[str]] = field(default_factory=list)  # the name of every entity an op touches
    _derived: dict[type, object] = field(default_factory=dict)
    _refs: Refs = field(default_factory=Refs)  # the journals the notes' histories refer into
    _graph_cache: tuple[int, list[Entity], list[Relation]] | None = None
    # Entities as built, kept until an op touches their name: reading the whole graph after one write then builds
    # one entity, not every one (their observations are folded and sorted when built).
    _entities: dict[OccKey, Entity] = field(default_factory=dict)
    # The live relations in graph order, kept until an op can change them: a relation added or deleted, an entity
    # deleted (its relations go with it). Reading the graph after any other write then sorts no relations.
    _relations: list[Relation] | None = None
    # The live entities' keys in graph order, kept until an entity is deleted or added anywhere but last.
    _entity_order: list[OccKey] | None = None
    # The ids of the notes whose views are kept, oldest made first: at most KEPT_VIEWS (`note`).
    _kept: dict[str, None] = field(default_factory=dict)

    def ops_key(self) -> bytes:
        """Which ops this state folded, as a digest: every node's positions held and the digest of each one's line,
        forks included. The fold is a function of the set of ops, so two states with one key hold the same notes and
        graph, whatever order the ops came in; derived data saved for one state (the saved search index) is taken whole
        by another when their keys agree, and note by note by their marks (`NoteRecord.mark`) when not. ~1 ms at 100k
        ops (8 bytes hashed per op)."""
        h = hashlib.blake2b(digest_size=16)
        for node in sorted(self.seen_upto):
            h.update(repr((node, self.seen_upto[node], sorted(self.seen_extra[node].items()))).encode())
            h.update(self.digests[node])
        h.update(repr(sorted((at, sorted(others)) for at, others in self.forked.items())).encode())
        return h.digest()

    def derived(self, kind: type[D], make: Callable[[State], D]) -> D:
        """The index of type `kind` derived from this state, made by `make(self)` on first use and kept with the
        state (a new State, as after a reload, starts without any). Its owner module alone knows what is in it."""
        found = self._derived.get(kind)
        if found is None:
            found = self._derived[kind] = make(self)
        assert isinstance(found, kind)
        return found

    def has_derived(self, kind: type) -> bool:
        """Whether the index of type `kind` was made already."""
        return kind in self._derived

    # -- applying ops -------------------------------------------------------------------------------

    def apply(self, op: Op) -> bool:
        """Fold one op in. Returns False (and changes nothing) if this very op was already applied. A different op
        at a `(node, seq)` already taken is a fork: it is applied too, and recorded in `forks`."""
        kind = op.kind
        if not self._seen(op.node, op.seq, op.digest, kind == PLACEHOLDER, op.wall):
            return False
        self._fold(op)
        return True

    def _fold(self, op: Op) -> bool:
        """Fold an op whose position and digest are recorded (`_seen`)."""
        kind = op.kind
        if kind == PLACEHOLDER:
            return True
        if kind in _NOTE_OPS:
            note_id = op.note_id  # a released op (from the op cache) has no payload to look in
            rec = self.notes.get(note_id)
            if rec is None:
                rec = self.notes[note_id] = NoteRecord(note_id, self._refs)
                self.longest_note_id = max(self.longest_note_id, len(note_id))
            rec.apply(op)
            for feed in self.note_feeds:
                feed.add(note_id)
            self.notes_version += 1
            return True
        row = self._refs.ref(op)
        if row is None:
            self._graph(kind, graph_row(kind, op.data), op.stamp)
        else:  # the row's own tuple: a relation's key is then the very tuple its row keeps
            held = op.src.held[op.row]  # type: ignore[union-attr]
            self._graph(kind, held if type(held) is tuple else graph_row(kind, op.data), row)
        return True

    def apply_rows(self, journal: Journal, start: int = 0) -> tuple[int, dict[str, tuple[int, int]]]:
        """Fold rows `start..` of a journal (the op cache's, just put in): a graph op's row straight from its columns
        and payload tuple, no op made (a restart of a graph of 1M ops made 1M ops and 1M dicts only to fold them); a
        note op's through its op, as `apply`. Returns how many were new, and each node's latest (wall, counter)."""
        nodes, _, _ = journal.tables()
        held, refs = journal.held, self._refs
        columns = (journal.walls, journal.seqs, journal.digests, journal.kinds, journal.nodes)
        applied = 0
        rows = itertools.islice(zip(*columns, held, strict=True), start, None)
        placeholder, note_codes = OP_KINDS.index(PLACEHOLDER), _NOTE_CODES
        if self._seen_all(journal, start):  # the usual restart: every row new, one node's, in order
            graph, base, kinds = self._graph, refs.row_ref(journal, 0), OP_KINDS  # a row's ref: base | row
            for row, (_, _, _, code, _, entry) in enumerate(rows, start):
                if code in note_codes:
                    self._fold(journal.op(row))
                elif code != placeholder:
                    graph(kinds[code], entry, base | row)
            return len(journal) - start, _latest(journal, start)
        for row, (wall, seq, digest, code, node_code, entry) in enumerate(rows, start):
            node = nodes[node_code]
            if code in note_codes:
                op = journal.op(row)
                if self.apply(op):
                    applied += 1
                else:
                    op.release()  # folded before (a copy of another shard): its row need not keep the payload
                continue
            if not self._seen(node, seq, digest, code == placeholder, wall):
                continue
            applied += 1
            if code != placeholder:
                self._graph(OP_KINDS[code], entry, refs.row_ref(journal, row))
        return applied, _latest(journal, start)

    def _seen_all(self, journal: Journal, start: int) -> bool:
        """Record the positions and digests of rows `start..` at once when they are the usual restart's: the whole
        journal of one node this state has seen nothing of, seq 1, 2, 3, ... (then every row is new). False, and
        nothing recorded, otherwise (each row is then recorded by `_seen`)."""
        n = len(journal)
        if start or not n or journal.nodes.count(journal.nodes[0]) != n:
            return False
        node, seqs = journal.tables()[0][journal.nodes[0]], journal.seqs
        if node in self.seen_upto or not isinstance(seqs, array) or seqs != array(seqs.typecode, range(1, n + 1)):
            return False
        digests = array("Q", journal.digests)
        placeholder = OP_KINDS.index(PLACEHOLDER)
        walls: Any = journal.walls
        if journal.kinds.count(placeholder):  # a placeholder holds its seq: digest 0, and its wall is not seen
            walls = []
            for row, code in enumerate(journal.kinds):
                if code == placeholder:
                    digests[row] = 0
                else:
                    walls.append(journal.walls[row])
        self.seen_upto[node] = n
        self.seen_extra[node] = {}
        self.digests[node] = digests
        self.last_wall[node] = max(walls, default=0)
        return True

    def _seen(self, node: str, seq: int, digest: int, placeholder: bool, wall: int) -> bool:
        """Record an op's position and digest; False when this very op was applied before."""
        upto = self.seen_upto.get(node)
        if upto is None:
            upto = self.seen_upto[node] = 0
            self.seen_extra[node] = {}
            self.digests[node] = array("Q")
            self.last_wall[node] = 0
        extra = self.seen_extra[node]
        if seq == upto + 1 and not extra:  # the usual case: a shard read in order
            self.seen_upto[node] = seq
            self.digests[node].append(0 if placeholder else digest)
        elif seq <= upto:
            held = self.digests[node]
            if placeholder or held[seq - 1] == digest or not self._second(node, seq, digest, held[seq - 1]):
                return False
            if held[seq - 1] == 0:
                held[seq - 1] = digest
        elif seq in extra:
            if placeholder or extra[seq] == digest or not self._second(node, seq, digest, extra[seq]):
                return False
            if extra[seq] == 0:
                extra[seq] = digest
        elif seq == upto + 1:
            held = self.digests[node]
            held.append(0 if placeholder else digest)
            upto += 1
            while upto + 1 in extra:
                upto += 1
                held.append(extra.pop(upto))
            self.seen_upto[node] = upto
        else:
            extra[seq] = 0 if placeholder else digest
        if not placeholder and wall > self.last_wall[node]:
            self.last_wall[node] = wall
        return True

    def _stamp(self, at: At) -> Stamp:
        return Stamp(*self.stamp_at(at)) if type(at) is int else at  # type: ignore[return-value]

    def _graph(self, kind: str, row: tuple[Any, ...], at: At) -> None:
        """Fold a graph op, its payload as its journal row keeps it (`graph_row`) and its stamp as `At`."""
        if kind == "obs.add":
            entity, text, k, j, since = row
            occ = (entity, k)
            members = self.obs_add.get(occ)
            if members is None:
                members = self.obs_add[occ] = {}
            member: Member = text if j == 0 else (text, j)
            prior = members.get(member)
            if prior is None or self.stamp_at(at) > self.stamp_at(prior):
                members[member] = at
                if since is not None or self.obs_since or self.obs_legacy:  # else nothing to record or undo
                    since_key = (entity, k, text, j)
                    if since is not None and since is not ...:
                        self.obs_since[since_key] = since
                    elif self.obs_since:
                        self.obs_since.pop(since_key, None)
                    if since is ...:  # written before incarnations were recorded
                        self.obs_legacy.add(since_key)
                    elif self.obs_legacy:
                        self.obs_legacy.discard(since_key)
            if self.name_feeds or self._entities:
                self._changed_entity(entity)
        elif kind == "entity.add":
            name, type_, k = row
            key = (name, k)
            cur = self.ent_add.get(key)
            if cur is None or self.stamp_at(at) > self.stamp_at(cur[0]):
                self.ent_add[key] = (at, type_)
            ks = self.ent_ks.get(name)
            if ks is None:
                self.ent_ks[name] = _FIRST_K if k == 0 else (k,)
            elif k not in ks:
                self.ent_ks[name] = (*ks, k)
            self._changed_entity(name)
            self._entity_added(key, fresh=cur is None)
        elif kind == "entity.del":
            name = row[0]
            _max_into(self.ent_del, name, self._stamp(at))
            self._changed_entity(name)
            self._relations = self._entity_order = None
        elif kind == "obs.del":
            entity, text, k = row
            _max_into(self.obs_del, (entity, k, text), self._stamp(at))
            self._changed_entity(entity)
        elif kind == "rel.add":
            rkey = row
            prior_rel = self.rel_add.get(rkey)
            if prior_rel is None or self.stamp_at(at) > self.stamp_at(prior_rel):
                self.rel_add[rkey] = at
            by_name = self.rel_by_name
            for end in (rkey[0], rkey[1]):
                ends = by_name.get(end)
                if ends is None:
                    by_name[end] = [rkey]
                elif type(ends) is list:
                    if rkey not in ends:
                        ends.append(rkey)
                        if len(ends) > _SHORT_ENDS:
                            by_name[end] = set(ends)
                else:
                    ends.add(rkey)  # type: ignore[union-attr]
            self._relations = None
        else:  # rel.del
            _max_into(self.rel_del, row, self._stamp(at))
            self._relations = None
        self.graph_version += 1

    def _second(self, node: str, seq: int, digest: int, first: int) -> bool:
        """Whether an op at an already taken position is new: a fork's other line (recorded as evidence), or the
        real line where only a placeholder or an unknown digest was held."""
        if first == 0:
            return True
        others = self.forked.get((node, seq))
        if others is None:
            others = self.forked[node, seq] = set()
            fork = self.forks.get(node)
            if fork is None:
                fork = self.forks[node] = Fork(node, seq)
            fork.first_seq = min(fork.first_seq, seq)
            fork.positions += 1
        elif digest in others:
            return False
        others.add(digest)
        return True

    def _entity_added(self, occ: OccKey, *, fresh: bool) -> None:
        """Keep the entity order when a new entity comes last, as a local write's does; any other add sorts again."""
        order = self._entity_order
        if order is None:
            return
        if fresh and (not order or self.added(order[-1]) < self.added(occ)):
            if self.entity_alive(occ):
                order.append(occ)
        else:
            self._entity_order = None

    def _changed_entity(self, name: str) -> None:
        for feed in self.name_feeds:
            feed.add(name)
        if self._entities:
            for k in self.ent_ks.get(name, ()):
                self._entities.pop((name, k), None)

    @property
    def nodes(self) -> dict[str, NodeStats]:
        """What the fold has seen of each writer node (ops are counted once however often delivered)."""
        return {
            node: NodeStats(
                ops=upto + len(self.seen_extra[node]),
                max_seq=max(upto, *self.seen_extra[node]) if self.seen_extra[node] else upto,
                last_wall=self.last_wall[node],
            )
            for node, upto in self.seen_upto.items()
        }

    def seen(self, node: str) -> set[int]:
        """Every seq of `node` applied so far (for tests and sync; cheap only for small logs)."""
        return set(range(1, self.seen_upto.get(node, 0) + 1)) | set(self.seen_extra.get(node, {}))

    def placed(self, op: Op) -> None:
        """An op applied before its line was written (`Store.write`) now has its journal row: a note's history
        (`NoteRecord.placed`) and a graph add's register (when it still decides it) keep the row, not the op."""
        kind = op.kind
        if kind in _NOTE_OPS:
            rec = self.notes.get(op.note_id)
            if rec is not None:
                rec.placed(op)
            return
        if kind not in ("entity.add", "obs.add", "rel.add"):
            return
        row = self._refs.ref(op)
        if row is None:
            return
        data, stamp = op.data, op.stamp
        if kind == "entity.add":
            key = (data["name"], data.get("k", 0))
            add = self.ent_add.get(key)
            if add is not None and add[0] == stamp:
                self.ent_add[key] = (row, add[1])
        elif kind == "obs.add":
            members = self.obs_add.get((data["entity"], data.get("k", 0)), {})
            j = data.get("j", 0)
            member: Member = data["text"] if j == 0 else (data["text"], j)
            if members.get(member) == stamp:
                members[member] = row
        else:
            rkey = (data["from"], data["to"], data["type"], data.get("j", 0))
            if self.rel_add.get(rkey) == stamp:
                self.rel_add[rkey] = row

    # -- notes --------------------------------------------------------------------------------------

    def note(self, note_id: str, *, keep: bool = True) -> Note | None:
        """The note's view, kept for the next call unless `keep` is false (`NoteRecord.note`). At most KEPT_VIEWS views
        are kept: a reader paging through the whole notebook (a dashboard scrolled to the end, an export by pages)
        would otherwise keep every note's view for good (~400 bytes a note); the oldest made go first."""
        rec = self.notes.get(note_id)
        if rec is None:
            return None
        if keep and rec.view is False:
            kept = self._kept
            kept.pop(note_id, None)
            kept[note_id] = None
            if len(kept) > KEPT_VIEWS:
                for old in list(itertools.islice(kept, len(kept) - KEPT_VIEWS * 3 // 4)):
                    del kept[old]
                    if (gone := self.notes.get(old)) is not None:
                        gone.view = False
        return rec.note(keep=keep)

    def listed(self, note_id: str) -> tuple[Revision, bool] | None:
        """The note's revision and whether it is in the trash, without making its view (`NoteRecord.listed`)."""
        rec = self.notes.get(note_id)
        return rec.listed() if rec is not None else None

    def facets(self, note_id: str) -> Note | Facets | None:
        """What a filter looks at in the note, without making its view (`NoteRecord.facets`)."""
        rec = self.notes.get(note_id)
        return rec.facets() if rec is not None else None

    def iter_notes(self) -> Iterator[Note]:
        """Every note, each view made for the moment unless one is kept: a pass over the whole notebook keeps no
        view (`NoteRecord.note`)."""
        for rec in self.notes.values():
            note = rec.note(keep=False)
            if note is not None:
                yield note

    def history(self, note_id: str) -> list[Version]:
        rec = self.notes.get(note_id)
        if rec is None:
            return []
        versions = []
        for op in rec.live_ops():
            try:  # a released edit's fields are read back from the log
                fields = dict(op.data["fields"]) if op.kind == "note.set" else {}
            except PayloadGone:  # compaction dropped its line (it decides nothing): a restart would not show it either
                continue
            versions.append(
                Version(
                    at=op.wall, node=op.node, seq=op.seq, by=op.by, action=op.kind.removeprefix("note."), fields=fields
                )
            )
        return versions

    # -- knowledge graph ----------------------------------------------------------------------------

    def stamp_at(self, at: At) -> tuple[int, int, str, int, int]:
        """The stamp of a graph add a register keeps (`At`), as a plain tuple: it compares as the `Stamp` it is."""
        if type(at) is int:
            return self._refs.stamp(at)
        assert isinstance(at, Stamp)
        return at

    def added(self, occ: OccKey) -> tuple[int, int, str, int, int]:
        """The stamp of the add that decides an entity occurrence (one that was added)."""
        return self.stamp_at(self.ent_add[occ][0])

    def entity_alive(self, occ: OccKey) -> bool:
        add = self.ent_add.get(occ)
        if add is None:
            return False
        deleted = self.ent_del.get(occ[0])
        return deleted is None or self.stamp_at(add[0]) > deleted

    def occurrences(self, name: str) -> list[OccKey]:
        """Live entities with this exact name, oldest first (more than one only after an in-batch duplicate)."""
        live = [(name, k) for k in self.ent_ks.get(name, ()) if self.entity_alive((name, k))]
        live.sort(key=self.added)
        return live

    def entity_epoch(self, name: str) -> Epoch:
        """The incarnation of an entity name: its latest delete (None when never deleted)."""
        deleted = self.ent_del.get(name)
        return None if deleted is None else (deleted.wall, deleted.counter, deleted.node, deleted.seq)

    def observations(self, occ: OccKey) -> list[str]:
        name, k = occ
        ent_del, obs_del, since, legacy = self.ent_del.get(name), self.obs_del, self.obs_since, self.obs_legacy
        epoch = self.entity_epoch(name)
        stamp_at = self.stamp_at
        live = []
        for member, at in self.obs_add.get(occ, {}).items():
            text, j = (member, 0) if isinstance(member, str) else member
            stamp = stamp_at(at)
            if not _newer(stamp, ent_del, obs_del.get((name, k, text))):  # type: ignore[arg-type]
                continue
            key = (name, k, text, j)
            if key in legacy or since.get(key) == epoch:
                live.append((stamp, text))
        live.sort()
        return [text for _, text in live]

    def entity_type(self, occ: OccKey) -> str:
        """The type of an entity occurrence (one that was added)."""
        return self.ent_add[occ][1]

    def entity(self, occ: OccKey) -> Entity:
        built = self._entities.get(occ)
        if built is None:
            built = self._entities[occ] = Entity(occ[0], self.ent_add[occ][1], tuple(self.observations(occ)))
        return built

    def relation_alive(self, key: tuple[str, str, str, int]) -> bool:
        f, t, ty, _ = key
        rel_del, ent_del = self.rel_del, self.ent_del
        if not rel_del and not ent_del:  # nothing was ever deleted: every add is live
            return True
        return _newer(
            self.stamp_at(self.rel_add[key]),  # type: ignore[arg-type]
            rel_del.get((f, t, ty)),
            ent_del.get(f),
            ent_del.get(t),
        )

    def relations_touching(self, names: Iterable[str]) -> list[Relation]:
        """Live relations with either end in `names`, in graph order."""
        keys: set[tuple[str, str, str, int]] = set()
        for name in names:
            keys.update(self.rel_by_name.get(name, ()))
        live = sorted((self.stamp_at(self.rel_add[k]), k) for k in keys if self.relation_alive(k))
        return [Relation(k[0], k[1], k[2]) for _, k in live]

    def _graph_order(self, occs: Iterable[OccKey]) -> list[OccKey]:
        """The official server's order: insertion order, i.e. by add stamp."""
        return sorted(occs, key=self.added)

    def sorted_entities(self, occs: Iterable[OccKey]) -> list[Entity]:
        return [self.entity(occ) for occ in self._graph_order(occs)]

    def graph(self) -> tuple[list[Entity], list[Relation]]:
        """The whole graph in the official server's order (insertion order, i.e. by add stamp)."""
        cache = self._graph_cache
        if cache is not None and cache[0] == self.graph_version:
            return list(cache[1]), list(cache[2])  # copies: callers may change what they get
        order, relations = self._live_graph()
        entities = [self.entity(occ) for occ in order]
        self._graph_cache = (self.graph_version, entities, relations)
        return list(entities), list(relations)

    def graph_counts(self) -> tuple[int, int]:
        """How many entities and relations `graph` would return, without making the entities (a status poll on a
        graph of 100k entities made and kept every one of them, with its observations)."""
        order, relations = self._live_graph()
        return len(order), len(relations)

    def _live_graph(self) -> tuple[list[OccKey], list[Relation]]:
        """The live entities' keys in the official server's order, and the live relations (both kept until a change)."""
        order = self._entity_order
        if order is None:
            order = self._entity_order = self._graph_order(occ for occ in self.ent_add if self.entity_alive(occ))
        relations = self._relations
        if relations is None:
            stamp_at = self.stamp_at
            live = sorted((stamp_at(s), k) for k, s in self.rel_add.items() if self.relation_alive(k))
            relations = self._relations = [Relation(k[0], k[1], k[2]) for _, k in live]
        return order, relations

    def relation_exists(self, f: str, t: str, ty: str) -> bool:
        return any(k[:3] == (f, t, ty) and self.relation_alive(k) for k in self.rel_by_name.get(f, ()))

    def relation_keys(self, f: str, t: str, ty: str) -> list[tuple[str, str, str, int]]:
        """The live copies of this triple, oldest first (the official server keeps in-batch duplicates)."""
        live = [k for k in self.rel_by_name.get(f, ()) if k[:3] == (f, t, ty) and self.relation_alive(k)]
        live.sort(key=lambda k: self.stamp_at(self.rel_add[k]))
        return live

    # -- canonical form (for tests and compaction checks) -------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything a reader can observe, in a canonical form: equal snapshots mean equal states."""
        notes = {n.id: n.to_json() for n in self.iter_notes()}
        entities, relations = self.graph()
        return {
            "notes": dict(sorted(notes.items())),
            "entities": [e.to_json() for e in entities],
            "relations": [r.to_json() for r in relations],
        }


def _latest(journal: Journal, start: int) -> dict[str, tuple[int, int]]:
    """Each node's latest (wall, counter) in rows `start..` of a journal (a shard's rows are one node's but for a
    copy, a branch or a sync tool's conflict file)."""
    nodes = journal.tables()[0]
    if start >= len(journal):
        return {}
    stamps = zip(journal.walls[start:], journal.counters[start:], strict=True)
    if len(set(journal.nodes[start:])) == 1:
        return {nodes[journal.nodes[start]]: max(stamps)}
    latest: dict[str, tuple[int, int]] = {}
    for code, stamp in zip(journal.nodes[start:], stamps, strict=True):
        node = nodes[code]
        if stamp > latest.get(node, (-1, -1)):
            latest[node] = stamp
    return latest


def _max_into(registers: dict[Any, Stamp], key: Any, stamp: Stamp) -> None:
    cur = registers.get(key)
    if cur is None or stamp > cur:
        registers[key] = stamp
