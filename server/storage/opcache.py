"""A parsed copy of each shard's ops, so a restart does not re-parse every log line.

Derived data only, kept outside `log/` (never synced, never exported): a missing, damaged or outdated cache
is ignored and the log is read as usual. Each entry is used only if the shard still holds the very bytes (a
SHA-256 of everything up to the cached offset) it was read from, and its ops still go through the fold like any
others.
"""

from __future__ import annotations

import hashlib
import marshal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..core.model import GRAPH_ROW_LENGTHS, NOTE_OPS, OP_KINDS, Author, Imported, Journal, author, shared_names
from .files import private_dir, write_whole
from .gcpause import collector_paused

# 7: a shard's ops as columns (a journal's, each with its typecode) and one payload per op, no row tuples
# 8: an author may carry the import that wrote its op (`Author.imported`)
# 9: a graph op's payload as its journal row (`graph_row`: a tuple of values), its labels interned
MAGIC = b"hivenote-opcache-9\n"

Tables = tuple[list[str], list[Author], list[tuple[str, ...] | None]]  # node ids, authors, field-name tuples


def _no_tables() -> Tables:
    return [], [], [None]


@dataclass
class ShardEntry:
    name: str
    offset: int
    line_no: int
    digest: bytes  # SHA-256 of the shard's bytes up to `offset`: the cache is used only for that very prefix
    health: tuple[int, int, int, list[tuple[int, str]]]  # ops, bad, unknown, first bad lines
    # `Journal.columns_of`: every op's stamp, kind, author, names and offset, each column as its typecode and bytes
    columns: tuple[tuple[str, bytes], ...] = ()
    tables: Tables = field(default_factory=lambda: _no_tables())
    # per op: a graph op's row (`graph_row`), a note op's compact payload, or (released) its note id
    payloads: list[Any] = field(default_factory=list)


def _digest(payload: bytes | memoryview) -> bytes:
    return hashlib.blake2b(payload, digest_size=16).digest()


def save(path: Path, entries: list[ShardEntry]) -> None:
    """Write the cache atomically: a temp file with a random name made exclusively beside it (never through a link
    planted there; 0600), renamed over, so concurrent writers cannot mix; removed again when the write fails. The
    cache folder is this user's only (it holds every note's text)."""
    with collector_paused():
        payload = marshal.dumps(_rows(entries))
    private_dir(path.parent)  # in the data dir, which must exist: a deleted one is not made again for a cache
    write_whole(path, (MAGIC, _digest(payload), payload), durable=False)  # derived data: a lost one is re-read


def _rows(entries: list[ShardEntry]) -> list[Any]:
    return [
        (
            e.name,
            e.offset,
            e.line_no,
            e.digest,
            e.health,
            e.columns,
            e.tables[0],
            [(a.agent, a.client, a.person, _imported_row(a.imported)) for a in e.tables[1]],
            e.tables[2],
            e.payloads,
        )
        for e in entries
    ]


def _imported_row(imported: Imported | None) -> tuple[str, str, str, int, str] | None:
    if imported is None:
        return None
    return (imported.agent, imported.client, imported.person, imported.at, imported.file)


_NOTE_CODES: Final = frozenset(code for code, kind in enumerate(OP_KINDS) if kind in NOTE_OPS)


def load(path: Path) -> dict[str, ShardEntry]:
    """The cached entries by shard name; empty when there is no usable cache."""
    try:
        blob = path.read_bytes()
    except OSError:
        return {}
    start = len(MAGIC) + 16
    payload = memoryview(blob)[start:]  # no copy of a cache that can be tens of MB
    if not blob.startswith(MAGIC) or _digest(payload) != blob[len(MAGIC) : start]:
        return {}
    try:
        rows: Any = marshal.loads(payload)
        entries = {}
        for name, offset, line_no, digest, health, columns, nodes, authors, names, payloads in rows:
            tables: Tables = (
                list(nodes),
                [author(a, c, p, None if i is None else Imported(*i)) for a, c, p, i in authors],
                [None if n is None else shared_names(n) for n in names],
            )
            if not _valid(columns, tables, payloads):
                return {}
            entries[name] = ShardEntry(
                name,
                offset,
                line_no,
                digest,
                (health[0], health[1], health[2], [(line, reason) for line, reason in health[3]]),
                tuple(columns),
                tables,
                payloads,
            )
        return entries
    except (ValueError, TypeError, EOFError, IndexError):
        return {}


def _valid(columns: tuple[tuple[str, bytes], ...], tables: Tables, payloads: list[Any]) -> bool:
    """Whether the columns fit together and each payload is of its op's kind (a note op's compact one or note id)."""
    probe = Journal()
    probe.extend(columns, tables, [None] * len(payloads))  # raises ValueError when the lengths disagree
    if probe.kinds and max(probe.kinds) >= len(OP_KINDS):
        return False
    for codes, table in ((probe.nodes, tables[0]), (probe.bys, tables[1]), (probe.names, tables[2])):
        if codes and max(codes) >= len(table):
            return False
    note, lengths = _NOTE_CODES, GRAPH_ROW_LENGTHS
    for code, payload in zip(probe.kinds, payloads, strict=True):
        if code in note:
            if type(payload) is not str and (type(payload) is not tuple or type(payload[0]) is not str):
                return False
        elif type(payload) is not tuple or len(payload) != lengths[code]:
            return False
    return True


def fill(entry: ShardEntry, journal: Journal) -> None:
    """Put the entry's rows into an empty journal (the fold takes them from there: `State.apply_rows`)."""
    journal.extend(entry.columns, entry.tables, entry.payloads)
    entry.payloads = []
