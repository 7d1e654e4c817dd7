"""Search over the knowledge graph with the official memory server's semantics: case-insensitive substring over
name, type and observations, exact-name opens; relations touching the matches.

The entities' texts are one lowered string (`EntityTexts`), each entity's name, type and observations a segment of it,
searched with `str.find`: the official rule is a substring, which a token index answers only through candidates that
are then tested anyway, and a graph of 100k entities with 680k observations took 9 s to index at its first search
(the string: under 1 s) and held its texts twice. A segment only says where to look: every hit is tested against the
entity as the state has it now, and the entities an op touched since the string was made are tested directly until
enough of them make it worth making again.

Pure: imports only the standard library.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from .fold import OccKey, State
from .model import Entity, Relation

_SEPARATOR = "\x00"
REBUILD_SLACK = 256  # touched entities tested directly before the string is made again (and 5% of the entities)


@dataclass
class EntityTexts:
    """The entities' texts, derived from a State and kept with it (`State.derived`): the fold puts the name of every
    entity an op touches in `pending`, whose entities are tested directly (their segment may be out of date)."""

    pending: set[str]
    built: bool = False
    blob: str = ""
    ends: array[int] = field(default_factory=lambda: array("Q"))  # where each segment ends in `blob`
    occs: list[OccKey] = field(default_factory=list)  # whose each segment is


def _new_texts(state: State) -> EntityTexts:
    texts = EntityTexts(pending=set())
    state.name_feeds.append(texts.pending)
    return texts


def _segment(state: State, occ: OccKey) -> str:
    """An entity's name, type and every observation it was given (live or not: a hit is tested anyway), lowered."""
    members = state.obs_add.get(occ, {})
    texts = (member if isinstance(member, str) else member[0] for member in members)
    return "\n".join((occ[0], state.entity_type(occ), *texts)).lower()


def refresh_entity_texts(state: State) -> EntityTexts:
    texts = state.derived(EntityTexts, _new_texts)
    if texts.built and len(texts.pending) <= max(REBUILD_SLACK, len(texts.occs) // 20):
        return texts
    occs = [occ for occ in state.ent_add if state.entity_alive(occ)]
    segments = [_segment(state, occ) for occ in occs]
    ends, at = array("Q"), 0
    for segment in segments:
        at += len(segment)
        ends.append(at)
        at += len(_SEPARATOR)
    texts.blob, texts.ends, texts.occs = _SEPARATOR.join(segments), ends, occs
    texts.pending.clear()
    texts.built = True
    return texts


def _candidates(state: State, texts: EntityTexts, q: str) -> list[OccKey]:
    """The entities whose segment holds `q`, and every entity touched since the segments were made."""
    blob, ends, occs, pending = texts.blob, texts.ends, texts.occs, texts.pending
    found: list[OccKey] = []
    find, pos, count = blob.find, 0, len(occs)
    while (at := find(q, pos)) >= 0:
        i = bisect.bisect_right(ends, at)
        if i >= count:
            break
        if occs[i][0] not in pending:
            found.append(occs[i])
        pos = ends[i] + len(_SEPARATOR)
    for name in pending:
        found.extend((name, k) for k in state.ent_ks.get(name, ()))
    return found


def _matches(entity: Entity, q: str) -> bool:
    return (
        q in entity.name.lower() or q in entity.entityType.lower() or any(q in o.lower() for o in entity.observations)
    )


def search_graph(state: State, query: str) -> tuple[list[Entity], list[Relation]]:
    """The official `search_nodes`: case-insensitive substring over name, type and observations; relations
    with either end among the matches."""
    q = query.lower()
    if not q:  # every entity matches; relations only where an end is an entity, as for any other query
        entities, _ = state.graph()
        return entities, state.relations_touching({e.name for e in entities})
    occs = _candidates(state, refresh_entity_texts(state), q)
    matched = [occ for occ in occs if state.entity_alive(occ) and _matches(state.entity(occ), q)]
    entities = state.sorted_entities(matched)
    return entities, state.relations_touching({occ[0] for occ in matched})


def open_graph(state: State, names: Iterable[str]) -> tuple[list[Entity], list[Relation]]:
    """The official `open_nodes`: exact names, missing ones skipped; relations touching any of them."""
    occs = [occ for name in set(names) for occ in state.occurrences(name)]
    return state.sorted_entities(occs), state.relations_touching({occ[0] for occ in occs})
