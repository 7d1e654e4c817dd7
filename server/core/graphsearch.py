"""Search over the knowledge graph with the official memory server's semantics: case-insensitive substring over
name, type and observations (index-backed), exact-name opens; relations touching the matches.

Pure: imports only the standard library.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .fold import OccKey, State
from .model import Entity, Relation
from .textindex import SubstringIndex


@dataclass
class EntityIndex:
    """The entities' search index, derived from a State and kept with it (`State.derived`): the fold puts the
    name of every entity an op touches in `pending`."""

    pending: set[str]
    texts: SubstringIndex[OccKey] = field(default_factory=SubstringIndex)


def _new_index(state: State) -> EntityIndex:
    index = EntityIndex(pending=set(state.ent_ks))  # made late: every entity is still to index
    state.name_feeds.append(index.pending)
    return index


def refresh_entity_index(state: State) -> EntityIndex:
    derived = state.derived(EntityIndex, _new_index)
    index = derived.texts
    for name in derived.pending:
        for k in state.ent_ks.get(name, ()):
            occ = (name, k)
            if state.entity_alive(occ):
                entity = state.entity(occ)
                text = "\n".join((entity.name, entity.entityType, *entity.observations))
                index.set(occ, text.lower())
            else:
                index.discard(occ)
    derived.pending.clear()
    return derived


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
    index = refresh_entity_index(state).texts
    pieces = q.split()
    occs: Iterable[OccKey]
    if pieces:
        pieces.sort(key=index.count_estimate)
        # The index's numbers of entities until the matches are known: a set of ints fills faster than one of keys.
        numbers = index.candidate_numbers(pieces[0])
        for piece in pieces[1:]:
            numbers = {number for number in numbers if piece in index.text_at(number)}
        occs = map(index.key_at, numbers)
    else:  # whitespace only: no index can help, and such queries are rare
        occs = [occ for occ in state.ent_add if state.entity_alive(occ)]
    matched = [occ for occ in occs if _matches(state.entity(occ), q)]
    entities = state.sorted_entities(matched)
    return entities, state.relations_touching({occ[0] for occ in matched})


def open_graph(state: State, names: Iterable[str]) -> tuple[list[Entity], list[Relation]]:
    """The official `open_nodes`: exact names, missing ones skipped; relations touching any of them."""
    occs = [occ for name in set(names) for occ in state.occurrences(name)]
    return state.sorted_entities(occs), state.relations_touching({occ[0] for occ in occs})
