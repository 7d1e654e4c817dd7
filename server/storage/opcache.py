"""A parsed copy of each shard's ops, so a restart does not re-parse every log line.

Derived data only, kept outside `log/` (never synced, never exported): a missing, damaged or outdated cache
is ignored and the log is read as usual. Each entry is used only if the shard still holds the very bytes (a
SHA-256 of everything up to the cached offset) it was read from, and its ops still go through the fold like any
others.
"""

from __future__ import annotations

import hashlib
import marshal
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.model import NOTE_OPS, Op, author, shared_names
from .files import private_dir, write_whole
from .gcpause import collector_paused

MAGIC = b"hivenote-opcache-5\n"  # 5: note ops as (id, values[, since]) and field names; released ones as id and names


@dataclass
class ShardEntry:
    name: str
    offset: int
    line_no: int
    digest: bytes  # SHA-256 of the shard's bytes up to `offset`: the cache is used only for that very prefix
    health: tuple[int, int, int, list[tuple[int, str]]]  # ops, bad, unknown, first bad lines
    ops: list[Op] = field(default_factory=list)


def _digest(payload: bytes | memoryview) -> bytes:
    return hashlib.blake2b(payload, digest_size=16).digest()


def save(path: Path, entries: list[ShardEntry]) -> None:
    """Write the cache atomically: a temp file with a random name made exclusively beside it (never through a link
    planted there; 0600), renamed over, so concurrent writers cannot mix; removed again when the write fails. The
    cache folder is this user's only (it holds every note's text)."""
    with collector_paused():  # one tuple per op, beside a folded notebook that can be over a GB of objects
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
            [
                (o.node, o.seq, o.wall, o.counter, o.kind, o.cached_payload(), o.by.agent, o.by.client, o.by.person)
                + ((o.cached_names,) if o.cached_names is not None else ())  # a note op: its field names too
                for o in e.ops
            ],
            array("Q", [o.digest for o in e.ops]).tobytes(),  # one bytes object: quicker to save and load than ints
            array("q", [o.at for o in e.ops]).tobytes(),  # where each line is, so released ops can read it back
        )
        for e in entries
    ]


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
        for name, offset, line_no, digest, health, ops, digests, places in rows:
            hashes, ats = array("Q"), array("q")
            hashes.frombytes(digests)
            ats.frombytes(places)
            if len(hashes) != len(ops) or len(ats) != len(ops):
                return {}
            built = []
            for row, h, at in zip(ops, hashes, ats, strict=True):
                if len(row) == 9:
                    n, s, w, c, k, d, a, cl, p = row
                    op = Op(n, s, w, c, k, d, author(a, cl, p), h)
                else:  # a note op: compact (id, values[, since]), or released (its note id alone), and field names
                    n, s, w, c, k, d, a, cl, p, names = row
                    if k not in NOTE_OPS or type(names) is not tuple:
                        return {}
                    if type(d) is str:
                        if at < 0:
                            return {}
                    elif (
                        type(d) is not tuple or not 2 <= len(d) <= 3 or type(d[0]) is not str or len(d[1]) != len(names)
                    ):
                        return {}
                    op = Op(n, s, w, c, k, d, author(a, cl, p), h, shared_names(names))
                op.at = at
                built.append(op)
            entries[name] = ShardEntry(
                name,
                offset,
                line_no,
                digest,
                (health[0], health[1], health[2], [(line, reason) for line, reason in health[3]]),
                built,
            )
        return entries
    except (ValueError, TypeError, EOFError, IndexError):
        return {}
