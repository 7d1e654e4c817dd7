"""The notebook's values: ops (one log line each), their stamps, and the note/graph views folded from them.

Pure: imports only the standard library. Encoding and decoding of a log line live here so every reader
(store, import, sync) agrees on what a valid op is.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, Protocol

FORMAT_VERSION: Final = 1
PLACEHOLDER: Final = "seq.keep"  # compaction's content-free stand-in for a last line whose op no longer matters

NOTE_KINDS: Final = ("fact", "decision", "preference", "project")
NOTE_FIELDS: Final = ("kind", "title", "body", "tags", "project")

OP_KINDS: Final = (
    "note.set",
    "note.trash",
    "note.restore",
    "note.purge",
    "entity.add",
    "entity.del",
    "obs.add",
    "obs.del",
    "rel.add",
    "rel.del",
    PLACEHOLDER,
)

# Payload keys of each op kind: (required string keys, optional non-negative int keys).
NOTE_OPS: Final = frozenset(("note.set", "note.trash", "note.restore", "note.purge"))
_PAYLOAD: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "note.trash": (("id",), ()),
    "note.restore": (("id",), ()),
    "note.purge": (("id",), ()),
    "entity.add": (("name", "type"), ("k",)),
    "entity.del": (("name",), ()),
    "obs.add": (("entity", "text"), ("k", "j")),
    "obs.del": (("entity", "text"), ("k",)),
    "rel.add": (("from", "to", "type"), ("j",)),
    "rel.del": (("from", "to", "type"), ()),
    PLACEHOLDER: ((), ()),
}
_KNOWN: Final = frozenset(OP_KINDS)
_TEXT_KEYS: Final = frozenset(("id", "text"))  # free text: never interned
_INT_KEYS: Final = frozenset(("k", "j"))  # a graph row's optional ints (0 when absent)
# A graph op's payload as a journal row keeps it (`graph_row`): its values in this order, an optional int 0 when
# absent, `...` for an obs.add without `since` (written before incarnations were recorded).
_GRAPH_KEYS: Final = {
    kind: (*required, *optional, *(("since",) if kind == "obs.add" else ()))
    for kind, (required, optional) in _PAYLOAD.items()
    if kind not in NOTE_OPS
}
_KINDS: Final = {kind: kind for kind in OP_KINDS}
_FIELD_NAMES: Final = {name: name for name in NOTE_FIELDS}


class Stamp(NamedTuple):
    """The total order of ops: hybrid logical clock, then writer node and sequence number, then the line's digest
    (two different lines at one `(node, seq)`, a fork, are two ops: the digest keeps them apart and ordered)."""

    wall: int
    counter: int
    node: str
    seq: int
    digest: int = 0


NO_STAMP: Final = Stamp(0, 0, "", 0)


def line_digest(line: bytes) -> int:
    """An op's content identity: 64 bits of BLAKE2b over its exact log line (without the newline); never 0."""
    return int.from_bytes(hashlib.blake2b(line, digest_size=8).digest(), "big") or 1


# No op's line is longer: a note's body is at most 64 KiB, an observation too, every other value far less, and JSON's
# escapes at most six-fold that. A longer line, from any source (this log, a peer, the bucket, an import), is damage:
# skipped and reported, never held whole.
MAX_LINE_BYTES: Final = 1 << 20
MAX_TEXT_BYTES: Final = 64 * 1024  # a note's body, an observation: the writer's limit, the same for every source


class CorruptLine(ValueError):
    """A log line that is not a valid op. The fold skips and counts it; it is never deleted."""


class UnknownOp(CorruptLine):
    """A well-formed line written by a newer Hivenote (unknown `v` or op kind): skipped, reported apart."""


@dataclass(frozen=True, slots=True)
class Imported:
    """How an op came in with a notebook export: who imported it (agent, client, person), when (`at`, epoch ms) and
    from which file. The op's own author and stamp are the export's, the note's; this is the import's."""

    agent: str
    client: str
    person: str
    at: int
    file: str

    @property
    def by(self) -> Author:
        return Author(self.agent, self.client, self.person)

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by.to_json(), "at": self.at, "file": self.file}


@dataclass(frozen=True, slots=True)
class Author:
    """Provenance of an op, set by the server: which agent product, raw client string, person (token owner), and for
    an op an import wrote with the export's author, the import (`imported`)."""

    agent: str = "cli"
    client: str = ""
    person: str = ""
    imported: Imported | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: v for k, v in (("agent", self.agent), ("client", self.client), ("person", self.person)) if v
        }
        if self.imported is not None:
            out["imported"] = self.imported.to_json()
        return out


_NO_AUTHOR: Final = Author()  # the default of an Op made without one (Author() is "cli")
LOCAL_AUTHOR = Author(agent="cli", client="hivenote")  # a Notebook or Graph made without an author (tests, scripts)


class LineSource(Protocol):
    """Where an op's log line can be read again (the storage layer's shard file): the line at byte offset `at` whose
    digest is `digest`, without its newline, or None when that file no longer holds it (compacted away)."""

    def line(self, at: int, digest: int) -> bytes | None: ...


class PayloadGone(LookupError):
    """A released op's payload is no longer in its shard (compaction dropped the line)."""


_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}  # one shared tuple per combination of field names


def shared_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The one tuple of these field names every released op shares."""
    return _NAMES.setdefault(names, names)


class Op:
    """One log line: `kind` with its payload `data`, written by `node` as its `seq`-th op at HLC `(wall, counter)`.

    Treat as immutable (a plain class with slots, not a frozen dataclass: a cold start builds one per line of every
    shard). A note op keeps its payload compact: the note id, the names of the fields it sets (one tuple shared by
    every op setting the same fields) and their values in a tuple (tags as a tuple too, shared with the note's view),
    not two dicts and a list; `data` builds the dict when asked. A note op the fold no longer needs the payload of
    (superseded in every field it set, or a trash, restore or purge, whose payload is only the id) is *released* once
    it knows where its line is (`src`, `at`): it keeps its note id and field names, and `data` reads the line again
    from the log when asked (a note's history, the rare purge fallback). A year of edits then costs a few hundred
    bytes an op, not its text."""

    __slots__ = (
        "_data",
        "_names",
        "_stamp",
        "at",
        "by",
        "counter",
        "digest",
        "kind",
        "node",
        "row",
        "seq",
        "src",
        "wall",
    )
    __hash__ = None  # type: ignore[assignment]  # as the dataclass it was: compared by value, never hashed

    def __init__(
        self,
        node: str,
        seq: int,
        wall: int,
        counter: int,
        kind: str,
        data: dict[str, Any] | tuple[Any, ...] | str,
        by: Author | None = None,
        digest: int = 0,
        names: tuple[str, ...] | None = None,
    ) -> None:
        self.node = node
        self.seq = seq
        self.wall = wall
        self.counter = counter
        self.kind = kind
        if type(data) is dict and kind in NOTE_OPS:
            data, names = _compact(kind, data)
        # A graph op's payload dict; a note op's compact payload `(id, values[, since])` with the field names in
        # `_names`; or (released) the note id alone.
        self._data = data
        self._names = names
        self.by = _NO_AUTHOR if by is None else by
        self.digest = digest  # line_digest of its log line (0 until encoded or decoded)
        self._stamp: Stamp | None = None if type(data) is str else Stamp(wall, counter, node, seq, digest)
        self.at = -1  # byte offset of its line in `src` (-1: not known)
        self.src: LineSource | None = None
        self.row = -1  # its row in `src` when that is a `Journal` (-1: none)

    @property
    def stamp(self) -> Stamp:
        """Its place in the total order (kept while the payload is; a released op makes it when asked)."""
        stamp = self._stamp
        if stamp is None:
            return Stamp(self.wall, self.counter, self.node, self.seq, self.digest)
        return stamp

    @property
    def data(self) -> dict[str, Any]:
        """The payload as on the line (a fresh dict for a note op: treat it as read-only all the same)."""
        data = self._data
        if type(data) is dict:
            return data
        if type(data) is tuple and ... not in data[1]:
            return _expand(self.kind, data, self._names or ())
        return self._read()  # released, or some values let go of (`keep_only`): never the placeholder itself

    @property
    def held(self) -> bool:
        """Whether the payload is in memory (False: released, read from the log on demand)."""
        return type(self._data) is not str

    @property
    def note_id(self) -> str:
        data = self._data
        if isinstance(data, tuple):
            held: str = data[0]
            return held
        if isinstance(data, str):
            return data
        note_id: str = data["id"]
        return note_id

    @property
    def field_names(self) -> tuple[str, ...]:
        """The fields a `note.set` sets (`replaces` among them when it sets the link), held or released."""
        return self._names or ()

    def field(self, name: str) -> Any:
        """The value a `note.set` gives field `name` (one it sets). A value it let go of (`keep_only`: a newer op
        decided the field when it was let go of) or a released op's is read from its line again: an op can decide a
        field again after that, in another fold of the same rows (the op cache keeps them so) where the newer op is
        missing (it was in a shard deleted since). The `...` placeholder is never a value."""
        data = self._data
        if type(data) is tuple:
            value = data[1][self._names.index(name)]  # type: ignore[union-attr]
            if value is not ...:
                return value
        return self._read()["fields"][name]

    def since(self, default: Any) -> Any:
        """A note op's `since` (the purge its writer had seen), or `default` when the line carries none."""
        data = self._data
        if type(data) is tuple:
            return data[2] if len(data) > 2 else default
        return self.data.get("since", default)

    def cached_payload(self) -> dict[str, Any] | tuple[Any, ...] | str:
        """What the op cache keeps: a graph op's payload, a note op's compact one, or a released op's note id
        (`cached_names` has a note op's field names)."""
        return self._data

    @property
    def cached_names(self) -> tuple[str, ...] | None:
        return self._names

    def keep_only(self, names: Iterable[str]) -> None:
        """Let go of the values of every field but `names` (the fields this `note.set` still decides; newer ops decide
        the others), when its line can be read again: `data` then reads the line. A note's first op often still
        decides its kind and project long after its title and body were rewritten."""
        data = self._data
        if self.src is None or type(data) is not tuple or self.kind != "note.set":
            return
        kept = _kept(data, self._names or (), names)
        if kept is not data:
            self._data = kept
            src = self.src
            if self.row >= 0 and isinstance(src, Journal):
                src.held[self.row] = kept

    def release(self, note_id: str | None = None) -> None:
        """Drop the payload of a note op whose line can be read again (`src` known); `note_id`, if given, is the same
        id as the payload's (shared with the note's record). No-op otherwise."""
        data = self._data
        if self.src is None or type(data) is not tuple:
            return
        self._stamp = None  # made again when asked: a released op is mostly its place in a note's history
        self._data = note_id if note_id is not None and note_id == data[0] else data[0]
        src = self.src
        if self.row >= 0 and isinstance(src, Journal):
            src.held[self.row] = self._data  # the journal keeps its row, not the op

    def _read(self) -> dict[str, Any]:
        src = self.src
        line = src.line(self.at, self.digest) if src is not None else None
        if line is None:
            raise PayloadGone(f"{self.node} seq {self.seq} is no longer in its shard")
        return decode_op(line).data

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Op):
            return NotImplemented
        return (self.node, self.seq, self.wall, self.counter, self.kind, self.data, self.by) == (
            other.node,
            other.seq,
            other.wall,
            other.counter,
            other.kind,
            other.data,
            other.by,
        )

    def __repr__(self) -> str:
        data = self.data if self.held else f"<released {self._data!r} {self._names!r}>"
        return (
            f"Op(node={self.node!r}, seq={self.seq!r}, wall={self.wall!r}, counter={self.counter!r}, "
            f"kind={self.kind!r}, data={data}, by={self.by!r}, digest={self.digest!r})"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "node": self.node,
            "seq": self.seq,
            "hlc": [self.wall, self.counter],
            "op": self.kind,
        }
        data = self.data
        out.update(data)
        if self.kind == "note.set" and "replaces" in data["fields"]:
            # On the line, beside `fields`: Hivenotes before the link read such a line as an edit of the other
            # fields (they ignore keys they do not know), where an unknown field name would make it corrupt.
            fields = dict(data["fields"])
            out["fields"] = fields
            out["replaces"] = fields.pop("replaces")
        by = self.by.to_json()
        if by:
            out["by"] = by
        return out

    def encode(self) -> bytes:
        """The op as one `\\n`-terminated UTF-8 log line (compact JSON, non-ASCII kept as is). Records the line's
        digest in the op (its identity from now on)."""
        line = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")).encode()
        self.digest = line_digest(line)
        self._stamp = Stamp(self.wall, self.counter, self.node, self.seq, self.digest)
        return line + b"\n"


def _compact(kind: str, data: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """A note op's payload dict as `(id, values[, since])` and its field names (shared)."""
    note_id = data["id"]
    if kind != "note.set":
        return (note_id, ()), ()
    fields: dict[str, Any] = data["fields"]
    values = tuple(tuple(v) if k == "tags" else v for k, v in fields.items())
    names = shared_names(tuple(fields))
    if "since" in data:
        since = data["since"]
        return (note_id, values, tuple(since) if type(since) is list else since), names
    return (note_id, values), names


def _kept(data: tuple[Any, ...], names: tuple[str, ...], keep: Iterable[str]) -> tuple[Any, ...]:
    """A `note.set`'s compact payload with the values of every field but `keep` let go of (`...`); `data` itself
    when that changes nothing."""
    wanted = set(keep)
    values = tuple(v if n in wanted else ... for n, v in zip(names, data[1], strict=True))
    return data if values == data[1] else (data[0], values, *data[2:])


def _expand(kind: str, data: tuple[Any, ...], names: tuple[str, ...]) -> dict[str, Any]:
    """The inverse of `_compact`: the payload as a dict (tags as a list, as on the line)."""
    out: dict[str, Any] = {"id": data[0]}
    if kind == "note.set":
        out["fields"] = {k: (list(v) if k == "tags" else v) for k, v in zip(names, data[1], strict=True)}
    if len(data) > 2:
        out["since"] = data[2]
    return out


_KIND_CODE: Final = {kind: code for code, kind in enumerate(OP_KINDS)}
_SET_CODE: Final = _KIND_CODE["note.set"]
# Where a `note.set`'s values hold the fields a filter looks at (kind, project, tags), by its field-name tuple (a
# log has few: they are shared), -1 for a field it does not set; and the view's value for one it does not set.
_FACET_SLOTS: dict[tuple[str, ...], tuple[int, int, int]] = {}


def _facet_slots(names: tuple[str, ...]) -> tuple[int, int, int]:
    def at(name: str) -> int:
        return names.index(name) if name in names else -1

    slots = _FACET_SLOTS[names] = (at("kind"), at("project"), at("tags"))
    return slots


_ROW_BITS: Final = 40  # a note's history refers to an op as (journal << _ROW_BITS) | row
_ROW_MASK: Final = (1 << _ROW_BITS) - 1


_INT64: Final = (1 << 63) - 1  # the largest value of a 64-bit signed column
_COLUMNS: Final = ("walls", "counters", "seqs", "digests", "ats", "kinds", "nodes", "bys", "names")
# Each column starts as the narrowest array its usual values fit in and is widened when one does not (`append` raises
# OverflowError): a row costs some 30 bytes instead of 54. The typecodes a column may have, narrowest first.
_TYPECODES: Final = (
    ("q",),
    ("B", "H", "I", "q"),
    ("I", "q"),
    ("Q",),
    ("I", "q"),
    ("B",),
    ("B", "H", "I"),
    ("B", "H", "I"),
    ("B", "H", "I"),
)


def graph_row(kind: str, data: dict[str, Any]) -> tuple[Any, ...]:
    """A graph op's payload as its journal row keeps it: a tuple of its values (`_GRAPH_KEYS`), not a dict (a graph of
    1M ops held 1M dicts of ~200 bytes each)."""
    return tuple(data.get(key, ... if key == "since" else 0) for key in _GRAPH_KEYS[kind])


def graph_data(kind: str, row: tuple[Any, ...]) -> dict[str, Any]:
    """The payload dict a `graph_row` was made from."""
    data = {}
    for key, value in zip(_GRAPH_KEYS[kind], row, strict=True):
        if value is ... or (value == 0 and type(value) is int and key in _INT_KEYS):
            continue
        data[key] = value
    return data


# The length of a `graph_row` of each op kind by its code (-1: a note op's), for the op cache's check of what it read.
GRAPH_ROW_LENGTHS: Final = tuple(len(_GRAPH_KEYS[kind]) if kind in _GRAPH_KEYS else -1 for kind in OP_KINDS)


class Journal:
    """Every op of one shard, by row (the order it was read or written in), in arrays: its stamp, kind, author,
    field names and line offset, and in `held` what the row keeps of its payload: a note op's compact payload while
    the fold may need it, its note id alone once released; a graph op's values as a tuple (`graph_row`). A note's
    history, its field registers and the graph's add registers refer to an op by its row (`Refs`), never by an object,
    so an op costs some thirty bytes and its payload, not an object, its ints and a stamp; `op(row)` makes the op when
    asked (a note's view, its history). The storage layer's shard file is one, and reads the lines back (`line`)."""

    __slots__ = (
        "_authors",
        "_by_code",
        "_name_code",
        "_names",
        "_node_code",
        "_nodes",
        "ats",
        "bys",
        "counters",
        "digests",
        "held",
        "kinds",
        "names",
        "nodes",
        "seqs",
        "walls",
    )

    def __init__(self) -> None:
        # A shard may carry any non-negative int in a stamp (a clock set far ahead, a hostile line): one beyond 64
        # bits makes the three stamp columns plain lists for this journal (`_widen`), which the op cache skips.
        # Narrow columns widen as values need (`_TYPECODES`).
        self.walls: array[int] | list[int] = array("q")
        self.counters: array[int] | list[int] = array("B")
        self.seqs: array[int] | list[int] = array("I")
        self.digests = array("Q")
        self.ats = array("I")
        self.kinds = array("B")
        self.nodes = array("B")  # codes into `_nodes`
        self.bys = array("B")  # codes into `_authors`
        self.names = array("B")  # codes into `_names` (a note op's field names; 0: none)
        self.held: list[tuple[Any, ...] | str | None] = []
        self._nodes: list[str] = []
        self._node_code: dict[str, int] = {}
        self._authors: list[Author] = []
        self._by_code: dict[Author, int] = {}
        self._names: list[tuple[str, ...] | None] = [None]
        self._name_code: dict[tuple[str, ...] | None, int] = {None: 0}

    def line(self, at: int, digest: int) -> bytes | None:
        """The line at byte `at` whose digest is `digest` (without its newline); None: not known here."""
        return None

    def __len__(self) -> int:
        return len(self.seqs)

    def add(self, op: Op, at: int) -> None:
        """Record `op`, whose line starts at byte `at`, as the next row (the op learns where it is)."""
        op.at, op.src, op.row = at, self, len(self.seqs)
        node_code = self._node_code.get(op.node)
        if node_code is None:
            node_code = self._node_code[op.node] = len(self._nodes)
            self._nodes.append(op.node)
        by_code = self._by_code.get(op.by)
        if by_code is None:
            by_code = self._by_code[op.by] = len(self._authors)
            self._authors.append(op.by)
        names = op.cached_names
        name_code = self._name_code.get(names)
        if name_code is None:
            name_code = self._name_code[names] = len(self._names)
            self._names.append(names)
        if op.wall > _INT64 or op.counter > _INT64 or op.seq > _INT64:
            self._widen()
        self.walls.append(op.wall)
        self.digests.append(op.digest)
        self.kinds.append(_KIND_CODE[op.kind])
        put = self._put
        put(self.counters, "counters", op.counter)
        put(self.seqs, "seqs", op.seq)
        put(self.ats, "ats", at)
        put(self.nodes, "nodes", node_code)
        put(self.bys, "bys", by_code)
        put(self.names, "names", name_code)
        payload = op.cached_payload()
        # A graph op's row keeps its payload as a tuple (`graph_row`), never the op: the state holds what the fold
        # needs of it (its stamp by this row), and the op cache what a restart folds again.
        self.held.append(graph_row(op.kind, payload) if op.cached_names is None else payload)  # type: ignore[arg-type]

    @property
    def wide(self) -> bool:
        """Some stamp beyond 64 bits: its columns are lists, and the op cache does not keep this journal."""
        return isinstance(self.walls, list)

    def _put(self, column: array[int] | list[int], name: str, value: int) -> None:
        """Append `value` to the column `name`, widened first when it does not fit."""
        try:
            column.append(value)
        except OverflowError:
            codes = _TYPECODES[_COLUMNS.index(name)]
            for code in codes[codes.index(column.typecode) + 1 :]:  # type: ignore[union-attr]  # lists never overflow
                wider = array(code, column)
                try:
                    wider.append(value)
                except OverflowError:
                    continue
                setattr(self, name, wider)
                return
            raise

    def _widen(self) -> None:
        if not self.wide:
            self.walls, self.counters, self.seqs = list(self.walls), list(self.counters), list(self.seqs)

    def stamp(self, row: int) -> Stamp:
        return Stamp(
            self.walls[row], self.counters[row], self._nodes[self.nodes[row]], self.seqs[row], self.digests[row]
        )

    def op(self, row: int) -> Op:
        """The op of `row`, made from the row (a released note op's payload is read back when asked)."""
        entry = self.held[row]
        kind = OP_KINDS[self.kinds[row]]
        names = self._names[self.names[row]]
        payload: dict[str, Any] | tuple[Any, ...] | str = {} if entry is None else entry
        if names is None and type(entry) is tuple:
            payload = graph_data(kind, entry)
        op = Op(
            self._nodes[self.nodes[row]],
            self.seqs[row],
            self.walls[row],
            self.counters[row],
            kind,
            payload,
            self._authors[self.bys[row]],
            self.digests[row],
            names,
        )
        op.at, op.src, op.row = self.ats[row], self, row
        return op

    def field_names(self, row: int) -> tuple[str, ...]:
        return self._names[self.names[row]] or ()

    def facets(self, row: int) -> Facets | None:
        """What a filter looks at in the note a `note.set` row writes alone (a note written once: not in the trash),
        without making its op (a pass over the notebook). None when the row holds not every value it sets (released,
        or some let go of) or sets no field: the caller reads the op."""
        entry = self.held[row]
        names = self._names[self.names[row]]
        if type(entry) is not tuple or self.kinds[row] != _SET_CODE or not names:
            return None
        values = entry[1]
        k, p, t = _FACET_SLOTS.get(names) or _facet_slots(names)
        kind: Any = values[k] if k >= 0 else "fact"
        project: Any = values[p] if p >= 0 else None
        tags: Any = values[t] if t >= 0 else ()
        if kind is ... or project is ... or tags is ...:  # let go of (`keep_only`)
            return None
        by, node = self._authors[self.bys[row]], self._nodes[self.nodes[row]]
        # `_make` is tuple's own constructor (a pass over 100k notes: the class's Python __new__ took 1.5 us a note)
        return Facets._make((kind, project, tags, False, by, node, by, node, entry[0]))

    def release(self, row: int, note_id: str) -> None:
        """Let a note op's row keep its note id alone (`Op.release`): the fold needs nothing of its payload."""
        if type(self.held[row]) is tuple:
            self.held[row] = note_id

    def keep_only(self, row: int, names: Iterable[str]) -> None:
        """Let a `note.set`'s row keep the values of `names` alone (`Op.keep_only`)."""
        entry = self.held[row]
        if type(entry) is tuple and OP_KINDS[self.kinds[row]] == "note.set":
            self.held[row] = _kept(entry, self.field_names(row), names)

    def unhold(self, start: int, end: int) -> None:
        """Let go of the graph ops of rows `start..end` (a shard read again from its start: the state holds what it
        needs of them; a note op's row keeps what the fold refers to, and the fold lets go of it as before)."""
        held, names = self.held, self.names
        for row in range(start, end):
            if names[row] == 0:  # a graph op (a note op's row keeps what the fold refers to)
                held[row] = None

    def tables(self) -> tuple[list[str], list[Author], list[tuple[str, ...] | None]]:
        """The node ids, authors and field-name tuples the code columns point into."""
        return self._nodes, self._authors, self._names

    def extend(
        self,
        columns: tuple[tuple[str, bytes], ...],
        tables: tuple[list[str], list[Author], list[tuple[str, ...] | None]],
        held: list[tuple[Any, ...] | str | None],
    ) -> None:
        """Append rows saved by `columns_of` (the op cache), their tables and held entries. Only into an empty
        journal (the codes are the saved ones)."""
        if len(self):
            raise ValueError("a journal is extended from a cache only while empty")
        if len(columns) != len(_COLUMNS):
            raise ValueError("the cached columns are not a journal's")
        for name, codes, (code, raw) in zip(_COLUMNS, _TYPECODES, columns, strict=True):
            if code not in codes:
                raise ValueError(f"the cached column {name} is not of a journal's types")
            column = array(code)
            column.frombytes(raw)
            setattr(self, name, column)
        self._nodes, self._authors, self._names = tables
        self._node_code = {node: code for code, node in enumerate(self._nodes)}
        self._by_code = {by: code for code, by in enumerate(self._authors)}
        self._name_code = {names: code for code, names in enumerate(self._names)}
        if any(len(column) != len(held) for column in self._columns()):
            raise ValueError("the cached columns disagree")
        self.held = held

    def columns_of(self, start: int) -> tuple[tuple[str, bytes], ...]:
        """Rows `start..` of every column, as its typecode and bytes (the op cache; not of a `wide` journal)."""
        return tuple((column.typecode, column[start:].tobytes()) for column in self._columns())

    def _columns(self) -> tuple[array[Any], ...]:
        if isinstance(self.walls, list) or isinstance(self.counters, list) or isinstance(self.seqs, list):
            raise ValueError("a journal with stamps beyond 64 bits has no byte columns")
        return (
            self.walls,
            self.counters,
            self.seqs,
            self.digests,
            self.ats,
            self.kinds,
            self.nodes,
            self.bys,
            self.names,
        )


class Refs:
    """The journals a state's note histories refer into: an op is one int, `(journal << 40) | row`."""

    __slots__ = ("_base", "_codes", "_last", "journals")

    def __init__(self) -> None:
        self.journals: list[Journal] = []
        self._codes: dict[int, int] = {}  # id(journal) -> its number (the journals are kept: ids stay theirs)
        self._last: Journal | None = None  # the journal of the last ref made, and its number shifted in place
        self._base = 0

    def ref(self, op: Op) -> int | None:
        """`op` as a row of its journal, or None when it is in none (an op made in memory)."""
        src = op.src
        if src is self._last and op.row >= 0:
            return self._base | op.row
        if op.row < 0 or not isinstance(src, Journal):
            return None
        code = self._codes.get(id(src))
        if code is None:
            code = self._codes[id(src)] = len(self.journals)
            self.journals.append(src)
        self._last, self._base = src, code << _ROW_BITS
        return self._base | op.row

    def row_ref(self, journal: Journal, row: int) -> int:
        """Row `row` of `journal` as a ref (`ref` of its op, without the op)."""
        if journal is not self._last:
            code = self._codes.get(id(journal))
            if code is None:
                code = self._codes[id(journal)] = len(self.journals)
                self.journals.append(journal)
            self._last, self._base = journal, code << _ROW_BITS
        return self._base | row

    def op(self, entry: Op | int) -> Op:
        if type(entry) is int:
            return self.journals[entry >> _ROW_BITS].op(entry & _ROW_MASK)
        assert isinstance(entry, Op)
        return entry

    def stamp(self, entry: Op | int) -> tuple[int, int, str, int, int]:
        """The entry's stamp (a plain tuple for a row: it compares as the `Stamp` it is)."""
        if type(entry) is int:
            j = self.journals[entry >> _ROW_BITS]
            row = entry & _ROW_MASK
            return (j.walls[row], j.counters[row], j._nodes[j.nodes[row]], j.seqs[row], j.digests[row])
        assert isinstance(entry, Op)
        return entry.stamp

    def digest(self, entry: int) -> int:
        """The row's op digest (a hash of the op's line)."""
        return self.journals[entry >> _ROW_BITS].digests[entry & _ROW_MASK]

    def digest_sum(self, entries: Sequence[int]) -> int:
        """The sum of these rows' op digests (each a hash of the op's line)."""
        journals = self.journals
        return sum(journals[entry >> _ROW_BITS].digests[entry & _ROW_MASK] for entry in entries)

    def field_names(self, entry: Op | int) -> tuple[str, ...]:
        if type(entry) is int:
            return self.journals[entry >> _ROW_BITS].field_names(entry & _ROW_MASK)
        assert isinstance(entry, Op)
        return entry.field_names

    def facets(self, entry: int) -> Facets | None:
        """`Journal.facets` of the row."""
        return self.journals[entry >> _ROW_BITS].facets(entry & _ROW_MASK)

    def release(self, entry: Op | int, note_id: str) -> None:
        """`Op.release` of the entry's op, on its row when it has one."""
        if type(entry) is int:
            self.journals[entry >> _ROW_BITS].release(entry & _ROW_MASK, note_id)
        else:
            assert isinstance(entry, Op)
            entry.release(note_id)

    def keep_only(self, entry: Op | int, names: Iterable[str]) -> None:
        """`Op.keep_only` of the entry's op, on its row when it has one."""
        if type(entry) is int:
            self.journals[entry >> _ROW_BITS].keep_only(entry & _ROW_MASK, names)
        else:
            assert isinstance(entry, Op)
            entry.keep_only(names)


def decode_op(line: bytes | str) -> Op:
    """Parse and validate one log line (without its newline). Raises `CorruptLine` / `UnknownOp`."""
    if len(line) > MAX_LINE_BYTES:
        raise CorruptLine(f"the line is {len(line)} bytes; no op is longer than {MAX_LINE_BYTES} (damage)")
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError too
        raise CorruptLine(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CorruptLine("not a JSON object")
    return op_from_json(raw, line_digest(line if isinstance(line, bytes) else line.encode()))


@functools.lru_cache(maxsize=4096)
def author(agent: str, client: str, person: str, imported: Imported | None = None) -> Author:
    return Author(agent, client, person, imported)  # a log has few distinct authors: share them


def _imported(raw: Any) -> Imported:
    """`by.imported` of a line: who imported the op, when, from which file (older Hivenotes ignore the key)."""
    by = raw.get("by") if type(raw) is dict else None
    at, file = (raw.get("at"), raw.get("file")) if type(raw) is dict else (None, None)
    if type(by) is not dict or type(at) is not int or at < 0 or type(file) is not str:
        raise CorruptLine("'by.imported' must be {by: {agent, client, person}, at: wall_ms, file}")
    agent, client, person = by.get("agent", ""), by.get("client", ""), by.get("person", "")
    if type(agent) is not str or type(client) is not str or type(person) is not str:
        raise CorruptLine("'by.imported.by' must map agent/client/person to strings")
    return Imported(agent, client, person, at, file)


def op_from_json(raw: dict[str, Any], digest: int = 0) -> Op:
    """Validate a decoded log object and build the Op (the inverse of `Op.to_json`). On the cold-start path."""
    v, kind = raw.get("v"), raw.get("op")
    if type(v) is not int:
        raise CorruptLine("missing format version 'v'")
    if v > FORMAT_VERSION or (type(kind) is str and kind not in _KNOWN):
        raise UnknownOp(f"op {kind!r} of format v{v} is newer than this Hivenote understands")
    if type(kind) is not str:
        raise CorruptLine("missing 'op'")
    node, seq, hlc = raw.get("node"), raw.get("seq"), raw.get("hlc")
    if type(node) is not str or not node:
        raise CorruptLine("missing 'node'")
    if type(seq) is not int or seq < 1:
        raise CorruptLine("'seq' must be a positive integer")
    if type(hlc) is not list or len(hlc) != 2:
        raise CorruptLine("'hlc' must be [wall_ms, counter]")
    wall, counter = hlc
    if type(wall) is not int or type(counter) is not int or wall < 0 or counter < 0:
        raise CorruptLine("'hlc' must be [wall_ms, counter]")
    names: tuple[str, ...] | None = None
    data: dict[str, Any] | tuple[Any, ...]
    if kind in NOTE_OPS:
        data, names = _note_payload(kind, raw)
    else:
        data = _payload(kind, raw)
    by_raw = raw.get("by")
    if by_raw is None:
        by = author("", "", "")
    else:
        if type(by_raw) is not dict:
            raise CorruptLine("'by' must map agent/client/person to strings")
        agent, client, person = by_raw.get("agent", ""), by_raw.get("client", ""), by_raw.get("person", "")
        if type(agent) is not str or type(client) is not str or type(person) is not str:
            raise CorruptLine("'by' must map agent/client/person to strings")
        imported = by_raw.get("imported")
        by = author(agent, client, person, None if imported is None else _imported(imported))
    return Op(sys.intern(node), seq, wall, counter, _KINDS[kind], data, by, digest, names)


def _note_payload(kind: str, raw: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """A note op's payload, compact (`Op`'s form): `(id, values[, since])` and the field names."""
    note_id = raw.get("id")
    if kind != "note.set":
        if not isinstance(note_id, str):
            raise CorruptLine(f"{kind} needs a string 'id'")
        return (note_id, ()), ()
    fields = raw.get("fields")
    if not isinstance(note_id, str) or not note_id:
        raise CorruptLine("note.set needs an 'id'")
    if not isinstance(fields, dict) or not fields:
        raise CorruptLine("note.set needs non-empty 'fields'")
    # Shared key and label strings: a big log repeats them in every line, and json.loads makes fresh copies each time.
    keys: list[str] = []
    values: list[Any] = []
    for name, value in fields.items():
        key = _FIELD_NAMES.get(name)
        if key is None:
            raise CorruptLine(f"unknown note field {name!r}")
        if key == "tags":
            if type(value) is not list or not all(type(t) is str for t in value):
                raise CorruptLine("'tags' must be a list of strings")
            value = tuple([sys.intern(t) for t in value])
        elif key == "project":
            if value is not None:
                if type(value) is not str:
                    raise CorruptLine("'project' must be a string or null")
                value = sys.intern(value)
        elif type(value) is not str:
            raise CorruptLine(f"{name!r} must be a string")
        elif key == "body" and _over_limit(value):
            raise CorruptLine(f"the body is over {MAX_TEXT_BYTES} bytes, the limit of every note (from any source)")
        elif key == "kind":
            value = sys.intern(value)
        keys.append(key)
        values.append(value)
    if "replaces" in raw:
        # The note this one replaces (an id), or null to drop the link: a register like the fields, so it is kept
        # with them (the fold, compaction and history see one more field).
        link = raw["replaces"]
        if link is not None and (type(link) is not str or not link):
            raise CorruptLine("'replaces' must be a note id or null")
        keys.append("replaces")
        values.append(link)
    names = _NAMES.get(tuple(keys)) or shared_names(tuple(keys))
    if "since" in raw:
        return (note_id, tuple(values), _since(raw["since"], kind)), names
    return (note_id, tuple(values)), names


def _payload(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    required, optional = _PAYLOAD[kind]
    data: dict[str, Any] = {}
    for key in required:
        value = raw.get(key)
        if not isinstance(value, str):
            raise CorruptLine(f"{kind} needs a string {key!r}")
        # A name, type or relation type is one object however many lines repeat it (an entity's observations each
        # name it: 680k lines of a graph held 100k names 680k times); the op cache keeps it so (marshal).
        data[key] = value if key in _TEXT_KEYS else sys.intern(value)
    for key in optional:
        if key in raw:
            value = raw[key]
            if type(value) is not int or value < 0:
                raise CorruptLine(f"{kind} {key!r} must be a non-negative integer")
            if value:
                data[key] = value
    if kind == "obs.add" and _over_limit(data["text"]):
        raise CorruptLine(f"the observation is over {MAX_TEXT_BYTES} bytes, the limit of every one (from any source)")
    if kind == "obs.add" and "since" in raw:
        data["since"] = _since(raw["since"], kind)
    return data


def _over_limit(text: str) -> bool:
    """Whether a note's body or an observation is over MAX_TEXT_BYTES (UTF-8), as the writer counts it."""
    return len(text) * 4 > MAX_TEXT_BYTES and len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES


def _since(value: Any, kind: str) -> tuple[int, int, str, int] | None:
    """The delete (obs.add: the entity's latest `entity.del`) or purge (note.set: the note's latest `note.purge`) the
    writer had seen, as the first four fields of its stamp; None: it had seen none."""
    if value is None:
        return None
    if (
        type(value) is not list
        or len(value) != 4
        or type(value[0]) is not int
        or type(value[1]) is not int
        or type(value[2]) is not str
        or type(value[3]) is not int
    ):
        raise CorruptLine(f"{kind} 'since' must be null or [wall_ms, counter, node, seq]")
    return (value[0], value[1], sys.intern(value[2]), value[3])


class Facets(NamedTuple):
    """What a list's filters look at (`Filters.admit`), as a note's view would say it, read from its record without
    making the view (a filtered list is a pass over the notebook: every view kept was ~400 bytes a note)."""

    kind: str
    project: str | None
    tags: tuple[str, ...]
    trashed: bool
    created_by: Author
    created_on: str
    updated_by: Author
    updated_on: str
    id: str  # the note's id: a time window asks the note's record when it changed (`Filters.admit`)


@dataclass(frozen=True, slots=True)
class Note:
    """A note as every reader sees it (MCP, REST, dashboard, CLI)."""

    id: str
    kind: str
    title: str
    body: str
    tags: tuple[str, ...]
    project: str | None
    created: int  # epoch ms
    updated: int
    created_by: Author
    created_on: str  # node id of the writer
    updated_by: Author
    updated_on: str
    trashed: bool = False
    revision: Stamp = NO_STAMP  # stamp of the latest op: orders notes updated in the same ms
    replaces: str | None = None  # the id of the note this one takes the place of (a superseded decision)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "body": self.body,
            "tags": list(self.tags),
            "project": self.project,
            "created": self.created,
            "updated": self.updated,
            "created_by": {**self.created_by.to_json(), "node": self.created_on},
            "updated_by": {**self.updated_by.to_json(), "node": self.updated_on},
            "trashed": self.trashed,
            "replaces": self.replaces,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Note:
        """The inverse of `to_json` (a note that came over the REST API)."""
        created, updated = data["created_by"], data["updated_by"]
        return cls(
            id=data["id"],
            kind=data["kind"],
            title=data["title"],
            body=data.get("body", ""),
            tags=tuple(data["tags"]),
            project=data["project"],
            created=data["created"],
            updated=data["updated"],
            created_by=Author(created.get("agent", ""), created.get("client", ""), created.get("person", "")),
            created_on=created["node"],
            updated_by=Author(updated.get("agent", ""), updated.get("client", ""), updated.get("person", "")),
            updated_on=updated["node"],
            trashed=data["trashed"],
            replaces=data.get("replaces"),
        )


@dataclass(frozen=True, slots=True)
class Version:
    """One op in a note's history: what it changed, who, where and when."""

    at: int
    node: str
    seq: int
    by: Author
    action: str  # "set", "trash", "restore", "purge"
    fields: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "node": self.node,
            "seq": self.seq,
            "by": self.by.to_json(),
            "action": self.action,
            "fields": self.fields,
        }


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    entityType: str
    observations: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "entityType": self.entityType, "observations": list(self.observations)}


@dataclass(frozen=True, slots=True)
class Relation:
    from_: str
    to: str
    relationType: str

    def to_json(self) -> dict[str, str]:
        return {"from": self.from_, "to": self.to, "relationType": self.relationType}
