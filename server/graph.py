"""The knowledge-graph use-cases with the official memory server's exact semantics (its KnowledgeGraphManager):
create_entities skips existing names but not in-batch duplicates, add_observations fails on an unknown entity
and changes nothing, relations to missing entities are accepted, deletes cascade.

Plus paged / names-only reads for big graphs (REST and CLI; MCP only when a setting enables them).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .core.errors import EntityNotFound, InvalidInput
from .core.fold import State
from .core.graphsearch import open_graph, search_graph
from .core.model import LOCAL_AUTHOR, Author, Entity, Relation
from .storage.store import Payload, Store


@dataclass(frozen=True, slots=True)
class GraphPage:
    """Part of a graph read: entities (or only their names) and the relations touching them."""

    entities: list[Entity]
    relations: list[Relation]
    total_entities: int
    names_only: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.names_only:
            return {
                "names": [e.name for e in self.entities],
                "relations": [r.to_json() for r in self.relations],
                "total": self.total_entities,
            }
        return {
            "entities": [e.to_json() for e in self.entities],
            "relations": [r.to_json() for r in self.relations],
            "total": self.total_entities,
        }


def graph_json(entities: Iterable[Entity], relations: Iterable[Relation]) -> dict[str, Any]:
    return {"entities": [e.to_json() for e in entities], "relations": [r.to_json() for r in relations]}


# Sizes a graph write takes (UTF-8 bytes), in the graph tools, REST, the CLI and imports alike: an observation is a
# fact, not a file (one import wrote a 50 MB line); names, types and relation types are labels.
MAX_OBSERVATION_BYTES = 64 * 1024
MAX_NAME_BYTES = 1024


def _check_text(what: str, value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} contains an unpaired surrogate; send valid Unicode text") from None
    return value


def size_issue(what: str, value: str, limit: int) -> str | None:
    """What is wrong with `value` as `what` if it is over `limit` UTF-8 bytes (None when it fits)."""
    if len(value) * 4 <= limit:  # cannot be over: skip encoding
        return None
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    advice = (
        "keep one fact per observation and split longer text" if limit == MAX_OBSERVATION_BYTES else "use a short label"
    )
    return f"{what} is {size} bytes; the limit is {limit} bytes ({limit // 1024} KiB): {advice}"


def entity_issue(e: Entity) -> str | None:
    """The first size limit an entity breaks (its name, its type, one of its observations), or None."""
    checks = [("entity name", e.name, MAX_NAME_BYTES), ("entity type", e.entityType, MAX_NAME_BYTES)]
    checks += [
        (f"observation {i} of {e.name[:80]!r}", o, MAX_OBSERVATION_BYTES) for i, o in enumerate(e.observations, 1)
    ]
    return next((issue for what, text, limit in checks if (issue := size_issue(what, text, limit))), None)


def relation_issue(r: Relation) -> str | None:
    """The first size limit a relation breaks (its ends are entity names, its type a label), or None."""
    checks = (("relation 'from'", r.from_), ("relation 'to'", r.to), ("relation type", r.relationType))
    return next((issue for what, text in checks if (issue := size_issue(what, text, MAX_NAME_BYTES))), None)


def _refuse(issue: str | None) -> None:
    if issue is not None:
        raise InvalidInput(f"{issue}. Nothing was saved.")


class Graph:
    """The official memory server's nine operations over a `Store`."""

    def __init__(self, store: Store, *, author: Author = LOCAL_AUTHOR) -> None:
        self.store = store
        self.author = author  # who writes when a call names no `by` (the server always names one)

    def _write(self, decide: Any, by: Author | None) -> None:
        self.store.write(decide, by or self.author)

    def create_entities(self, entities: Sequence[Entity], *, by: Author | None = None) -> list[Entity]:
        for e in entities:
            _check_text("entity", "".join((e.name, e.entityType, *e.observations)))
            _refuse(entity_issue(e))
        added: list[Entity] = []

        def decide(state: State) -> list[Payload]:
            added.clear()
            existing = {e.name for e in entities if state.occurrences(e.name)}
            batch = Counter[str]()
            payloads: list[Payload] = []
            for e in entities:
                if e.name in existing:
                    continue
                k = batch[e.name]
                batch[e.name] += 1
                payloads.append(("entity.add", _with(k, "k", {"name": e.name, "type": e.entityType})))
                seen = Counter[str]()
                for text in e.observations:
                    payloads.append(("obs.add", _obs(e.name, k, text, seen[text], state)))
                    seen[text] += 1
                added.append(e)
            return payloads

        self._write(decide, by)
        return added

    def create_relations(self, relations: Sequence[Relation], *, by: Author | None = None) -> list[Relation]:
        for r in relations:
            _check_text("relation", r.from_ + r.to + r.relationType)
            _refuse(relation_issue(r))
        added: list[Relation] = []

        def decide(state: State) -> list[Payload]:
            added.clear()
            existing = {r for r in relations if state.relation_exists(r.from_, r.to, r.relationType)}
            batch = Counter[Relation]()
            payloads: list[Payload] = []
            for r in relations:
                if r in existing:
                    continue
                # j must not collide with a live copy; only in-batch duplicates get here, so count from 0.
                j = batch[r]
                batch[r] += 1
                payloads.append(("rel.add", _with(j, "j", {"from": r.from_, "to": r.to, "type": r.relationType})))
                added.append(r)
            return payloads

        self._write(decide, by)
        return added

    def add_observations(
        self, additions: Sequence[tuple[str, Sequence[str]]], *, by: Author | None = None
    ) -> list[tuple[str, list[str]]]:
        """Returns (entityName, addedObservations) per request item. An unknown entity fails the whole call."""
        for name, contents in additions:
            _check_text("observation", name + "".join(contents))
            for i, text in enumerate(contents, 1):
                _refuse(size_issue(f"observation {i} of {name[:80]!r}", text, MAX_OBSERVATION_BYTES))
        results: list[tuple[str, list[str]]] = []

        def decide(state: State) -> list[Payload]:
            results.clear()
            payloads: list[Payload] = []
            present: dict[tuple[str, int], list[str]] = {}
            for name, contents in additions:
                occs = state.occurrences(name)
                if not occs:
                    raise EntityNotFound(name)
                occ = occs[0]
                have = present.setdefault(occ, state.observations(occ))
                fresh = [c for c in contents if c not in have]
                counts = Counter(have)
                for text in fresh:
                    payloads.append(("obs.add", _obs(occ[0], occ[1], text, counts[text], state)))
                    counts[text] += 1
                have.extend(fresh)
                results.append((name, fresh))
            return payloads

        self._write(decide, by)
        return results

    def delete_entities(self, names: Sequence[str], *, by: Author | None = None) -> None:
        def decide(state: State) -> list[Payload]:
            wanted = dict.fromkeys(names)
            return [
                ("entity.del", {"name": name})
                for name in wanted
                if state.occurrences(name) or state.relations_touching([name])
            ]

        self._write(decide, by)

    def delete_observations(self, deletions: Sequence[tuple[str, Sequence[str]]], *, by: Author | None = None) -> None:
        def decide(state: State) -> list[Payload]:
            payloads: list[Payload] = []
            done: set[tuple[str, int, str]] = set()
            for name, texts in deletions:
                occs = state.occurrences(name)
                if not occs:
                    continue
                name, k = occs[0]
                have = set(state.observations(occs[0]))
                for text in texts:
                    if text in have and (name, k, text) not in done:
                        done.add((name, k, text))
                        payloads.append(("obs.del", _with(k, "k", {"entity": name, "text": text})))
            return payloads

        self._write(decide, by)

    def delete_relations(self, relations: Sequence[Relation], *, by: Author | None = None) -> None:
        def decide(state: State) -> list[Payload]:
            wanted = [r for r in dict.fromkeys(relations) if state.relation_exists(r.from_, r.to, r.relationType)]
            return [("rel.del", {"from": r.from_, "to": r.to, "type": r.relationType}) for r in wanted]

        self._write(decide, by)

    # -- reads --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def if_free(self) -> Iterator[bool]:
        """Whether no writer or follower holds the store right now; if so it is held for the block. Lets an event
        loop read something small at once, where a worker thread's hand-offs would cost more than the read."""
        free = self.store.lock.acquire(blocking=False)
        try:
            yield free
        finally:
            if free:
                self.store.lock.release()

    def entities_at_most(self) -> int:
        """An upper bound on the live entities (every entity ever added, deleted or not): cheap, for sizing work."""
        return len(self.store.state.ent_add)

    def read_graph(self) -> tuple[list[Entity], list[Relation]]:
        with self.store.reading() as state:
            return state.graph()

    def search_nodes(self, query: str) -> tuple[list[Entity], list[Relation]]:
        with self.store.reading() as state:
            return search_graph(state, query)

    def open_nodes(self, names: Sequence[str]) -> tuple[list[Entity], list[Relation]]:
        with self.store.reading() as state:
            return open_graph(state, names)

    def page(
        self, query: str | None = None, *, limit: int | None = None, offset: int = 0, names_only: bool = False
    ) -> GraphPage:
        """A bounded read for big graphs: `limit` entities from `offset` (of the whole graph or of a search),
        with the relations touching them."""
        if limit is not None and limit < 1:
            raise InvalidInput("limit must be at least 1")
        if offset < 0:
            raise InvalidInput("offset must not be negative")
        with self.store.reading() as state:
            entities, _ = state.graph() if query is None else search_graph(state, query)
            chosen = entities[offset : None if limit is None else offset + limit]
            relations = state.relations_touching({e.name for e in chosen})
            return GraphPage(chosen, relations, len(entities), names_only)


def _with(value: int, key: str, data: dict[str, Any]) -> dict[str, Any]:
    if value:
        data[key] = value
    return data


def _obs(entity: str, k: int, text: str, j: int, state: State) -> dict[str, Any]:
    data: dict[str, Any] = {"entity": entity, "text": text}
    if k:
        data["k"] = k
    if j:
        data["j"] = j
    data["since"] = state.entity_epoch(entity)  # the incarnation of the entity it belongs to (OPLOG.md)
    return data
