"""Views into the internals of shipped classes that only tests need: consistency checks and shortcuts that read
private state, kept here so the shipped code holds nothing that only tests call."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import IO, Any

from hivenote.server.core.fold import OccKey, State
from hivenote.server.core.model import Op
from hivenote.server.core.textindex import _COMPACT_SLACK, _DEAD, _MISSING, SubstringIndex
from hivenote.server.mcp.common import SessionLimits
from hivenote.server.sync.replica import Replicas, classify_lines


def apply_all(state: State, ops: Iterable[Op]) -> int:
    """Fold `ops` into `state`; how many were new."""
    return sum(1 for op in ops if state.apply(op))


def added_op(state: State, occ: OccKey) -> Op | None:
    """The add that decides an entity occurrence, made from its journal row (None: in no journal yet)."""
    add = state.ent_add.get(occ)
    return None if add is None or type(add[0]) is not int else state._refs.op(add[0])


def docs_with_token(index: SubstringIndex[Any], token: str) -> set[Any]:
    """Exactly the keys whose text has `token` as a whole whitespace-separated token."""
    return set(map(index._keys.__getitem__, index.numbers_with_tokens([token])))


def open_sessions(limits: SessionLimits) -> int:
    """MCP sessions the SDK's session manager holds now."""
    return len(limits._live())


def invariant_errors(index: SubstringIndex[Any]) -> list[str]:
    """The index's internal consistency problems, empty when healthy; O(index size)."""
    errors: list[str] = []
    keys = index._keys
    numbered = {n: k for n, k in enumerate(keys) if k is not _MISSING}
    if {k: n for n, k in numbered.items()} != index._numbers or len(index._texts) != len(keys):
        errors.append("keys, numbers and texts disagree")
    if sorted(index._free) != [n for n, k in enumerate(keys) if k is _MISSING]:
        errors.append("free numbers are not exactly the empty slots")
    if any(index._texts[n] for n in index._free):
        errors.append("a free number has a text")
    expected: dict[str, set[int]] = {}
    for number in numbered:
        for tok in index._texts[number].split():
            expected.setdefault(tok, set()).add(number)
    vocab: list[str] = []
    for blob in index._chunks:
        if not blob.endswith("\n") or "\n\n" in blob or blob.startswith("\n"):
            errors.append(f"malformed chunk {blob[:40]!r}")
        vocab.extend(blob.split("\n")[:-1])
    if index._chunks and index._last_chunk_len != index._chunks[-1].count("\n"):
        errors.append("last chunk length is off")
    if len(index._pending) >= index._pending_size:
        errors.append("pending list was not frozen")
    vocab.extend(index._pending)
    if vocab != list(index._post):
        errors.append("chunks and pending disagree with the postings' vocabulary order")
    dead = 0
    for tok, p in index._post.items():
        live_numbers = expected.pop(tok, set())
        if not isinstance(p, array):
            if live_numbers != {index._numbers.get(p)} or tok in index._dirty:
                errors.append(f"bare postings of {tok!r} are wrong")
            continue
        if p is _DEAD:
            dead += 1
        elif p.typecode != "I" or len(p) < 2 or any(n >= len(keys) for n in p):
            errors.append(f"postings of {tok!r} are not an array of numbers of two or more entries")
        live = index._dirty.get(tok, len(p))
        if live != len(live_numbers):
            errors.append(f"live count of {tok!r} is {live}, expected {len(live_numbers)}")
        if tok not in index._dirty and (len(set(p)) != len(p) or set(p) != live_numbers):
            errors.append(f"clean postings of {tok!r} are not exact")
        if not live_numbers <= set(p):
            errors.append(f"postings of {tok!r} miss live documents")
        if len(p) > 2 * len(live_numbers) + _COMPACT_SLACK:
            errors.append(f"postings of {tok!r} were not compacted")
    if _DEAD:
        errors.append("the dead tokens' shared array was appended to")
    if expected:
        errors.append(f"tokens missing from the vocabulary: {sorted(expected)[:5]}")
    if any(index._post.get(tok, _DEAD) is _DEAD for tok in index._dirty):
        errors.append("a dead or unknown token is marked dirty")
    if dead != index._dead:
        errors.append(f"dead count is {index._dead}, expected {dead}")
    if dead > max(index._chunk_size, len(index._post) - dead):
        errors.append("vocabulary was not rebuilt")
    return errors


def classify(held: bytes, got: bytes, *, own: bool = False) -> str:
    """`classify_lines` for two copies in memory."""
    return classify_lines(held.splitlines, got.splitlines, own=own)


def spooled(replicas: Replicas, data: bytes) -> IO[bytes]:
    """A spool file (`Replicas.spool`) holding the complete lines of `data`, a copy in memory, as transports hand it."""
    copy = replicas.spool()
    copy.write(data[: data.rfind(b"\n") + 1])
    return copy


def settle(replicas: Replicas, node: str, data: bytes) -> str:
    """`Replicas.settle_copy` for a copy in memory."""
    with spooled(replicas, data) as copy:
        return replicas.settle_copy(node, copy)


def add_branch(replicas: Replicas, node: str, data: bytes) -> str:
    """`Replicas.add_branch_copy` for a copy in memory."""
    with spooled(replicas, data) as copy:
        return replicas.add_branch_copy(node, copy)


def replace(replicas: Replicas, node: str, data: bytes) -> None:
    """`Replicas.replace_copy` for a copy in memory."""
    with spooled(replicas, data) as copy:
        replicas.replace_copy(node, copy)
