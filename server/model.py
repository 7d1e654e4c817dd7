"""The notebook's values: ops (one log line each), their stamps, and the note/graph views folded from them.

Pure: imports only the standard library. Encoding and decoding of a log line live here so every reader
(store, import, sync) agrees on what a valid op is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

FORMAT_VERSION: Final = 1

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
)

# Payload keys of each op kind: (required string keys, optional non-negative int keys).
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
}
_BY_KEYS: Final = ("agent", "client", "person")


class Stamp(NamedTuple):
    """The total order of ops: hybrid logical clock, then writer node and sequence number (no ties)."""

    wall: int
    counter: int
    node: str
    seq: int


class CorruptLine(ValueError):
    """A log line that is not a valid op. The fold skips and counts it; it is never deleted."""


class UnknownOp(CorruptLine):
    """A well-formed line written by a newer Hivenote (unknown `v` or op kind): skipped, reported apart."""


@dataclass(frozen=True, slots=True)
class Author:
    """Provenance of an op, set by the server: which agent product, raw client string, person (token owner)."""

    agent: str = "cli"
    client: str = ""
    person: str = ""

    def to_json(self) -> dict[str, str]:
        return {k: v for k, v in (("agent", self.agent), ("client", self.client), ("person", self.person)) if v}


@dataclass(frozen=True, slots=True)
class Op:
    """One log line: `kind` with its payload `data`, written by `node` as its `seq`-th op at HLC `(wall, counter)`."""

    node: str
    seq: int
    wall: int
    counter: int
    kind: str
    data: dict[str, Any]
    by: Author = field(default_factory=Author)

    @property
    def stamp(self) -> Stamp:
        return Stamp(self.wall, self.counter, self.node, self.seq)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "node": self.node,
            "seq": self.seq,
            "hlc": [self.wall, self.counter],
            "op": self.kind,
        }
        out.update(self.data)
        by = self.by.to_json()
        if by:
            out["by"] = by
        return out

    def encode(self) -> bytes:
        """The op as one `\\n`-terminated UTF-8 log line (compact JSON, non-ASCII kept as is)."""
        return (json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def decode_op(line: bytes | str) -> Op:
    """Parse and validate one log line (without its newline). Raises `CorruptLine` / `UnknownOp`."""
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError too
        raise CorruptLine(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CorruptLine("not a JSON object")
    return op_from_json(raw)


def op_from_json(raw: dict[str, Any]) -> Op:
    """Validate a decoded log object and build the Op (the inverse of `Op.to_json`)."""
    v = raw.get("v")
    if type(v) is not int:
        raise CorruptLine("missing format version 'v'")
    kind = raw.get("op")
    if v > FORMAT_VERSION or (isinstance(kind, str) and kind not in OP_KINDS):
        raise UnknownOp(f"op {kind!r} of format v{v} is newer than this Hivenote understands")
    if not isinstance(kind, str):
        raise CorruptLine("missing 'op'")
    node, seq, hlc = raw.get("node"), raw.get("seq"), raw.get("hlc")
    if not isinstance(node, str) or not node:
        raise CorruptLine("missing 'node'")
    if type(seq) is not int or seq < 1:
        raise CorruptLine("'seq' must be a positive integer")
    if (
        not isinstance(hlc, list)
        or len(hlc) != 2
        or type(hlc[0]) is not int
        or type(hlc[1]) is not int
        or hlc[0] < 0
        or hlc[1] < 0
    ):
        raise CorruptLine("'hlc' must be [wall_ms, counter]")
    data = _payload(kind, raw)
    by_raw = raw.get("by", {})
    if not isinstance(by_raw, dict) or any(not isinstance(by_raw.get(k, ""), str) for k in _BY_KEYS):
        raise CorruptLine("'by' must map agent/client/person to strings")
    by = Author(by_raw.get("agent", ""), by_raw.get("client", ""), by_raw.get("person", ""))
    return Op(node, seq, hlc[0], hlc[1], kind, data, by)


def _payload(kind: str, raw: dict[str, Any]) -> dict[str, Any]:
    if kind == "note.set":
        note_id, fields = raw.get("id"), raw.get("fields")
        if not isinstance(note_id, str) or not note_id:
            raise CorruptLine("note.set needs an 'id'")
        if not isinstance(fields, dict) or not fields:
            raise CorruptLine("note.set needs non-empty 'fields'")
        for name, value in fields.items():
            if name not in NOTE_FIELDS:
                raise CorruptLine(f"unknown note field {name!r}")
            if name == "tags":
                if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                    raise CorruptLine("'tags' must be a list of strings")
            elif name == "project":
                if value is not None and not isinstance(value, str):
                    raise CorruptLine("'project' must be a string or null")
            elif not isinstance(value, str):
                raise CorruptLine(f"{name!r} must be a string")
        return {"id": note_id, "fields": fields}
    required, optional = _PAYLOAD[kind]
    data: dict[str, Any] = {}
    for key in required:
        value = raw.get(key)
        if not isinstance(value, str):
            raise CorruptLine(f"{kind} needs a string {key!r}")
        data[key] = value
    for key in optional:
        if key in raw:
            value = raw[key]
            if type(value) is not int or value < 0:
                raise CorruptLine(f"{kind} {key!r} must be a non-negative integer")
            if value:
                data[key] = value
    return data


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
        }


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
