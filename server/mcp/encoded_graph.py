"""read_graph's answer as the bytes the MCP SDK would write for it (the text inside a JSON string, the structured
content as a JSON object), kept for the graph version it shows. Each entity and relation is encoded once and kept
while it lives, and each of the two arrays while its items stay the same objects, so a read after a write encodes
only what the write changed."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

import pydantic_core

from ..core.fold import State
from ..core.model import Entity, Relation
from ..storage.store import Store
from .wire import array_layout, entity_text, graph_layout, relation_text

# Past this, a graph is encoded for each read and nothing is kept: the answer, its arrays and their items would be
# held three times over between reads, too much memory for the time it saves.
KEEP_MAX_BYTES: Final = 4 << 20

Item = TypeVar("Item", Entity, Relation)
Pieces = tuple[bytes, bytes]  # an item's text escaped for a JSON string, and its compact JSON


def _escaped(text: str) -> bytes:
    """`text` as it sits inside a JSON string the SDK writes (pydantic's serializer, quotes left off)."""
    return pydantic_core.to_json(text)[1:-1]


def _entity(e: Entity) -> Pieces:
    return _escaped(entity_text(e)), pydantic_core.to_json(e.to_json())


def _relation(r: Relation) -> Pieces:
    return _escaped(relation_text(r)), pydantic_core.to_json(r.to_json())


def _entity_key(e: Entity) -> Hashable:
    # The fold keeps an entity as the same object until an op touches its name (`State._entities`). The kept array
    # holds every object keyed so, so no id can be reused while its entry lives.
    return id(e)


def _relation_key(r: Relation) -> Hashable:
    return (r.from_, r.to, r.relationType)  # rebuilt by the fold whenever relations change: kept by value


class _Array(Generic[Item]):
    """One of the answer's arrays, encoded: each item's pieces by key, and the whole array for the items it was
    last encoded for. Items only appended since (new entities and relations come last) keep the others' pieces in
    place: only the new ones are looked at."""

    def __init__(self, encode: Callable[[Item], Pieces], key: Callable[[Item], Hashable]) -> None:
        self._encode: Callable[[Item], Pieces] = encode
        self._key: Callable[[Item], Hashable] = key
        self._items: list[Item] = []
        self._pieces: dict[Hashable, Pieces] = {}
        self._texts: list[bytes] = []
        self._compacts: list[bytes] = []
        self.encoded: Pieces = (b"[]", b"[]")

    def update(self, items: list[Item]) -> Pieces:
        known = len(self._items)
        if len(items) >= known and all(map(operator.is_, items, self._items)):  # the kept items are a prefix
            if len(items) == known:
                return self.encoded
            texts, compacts, by_key = self._texts[:], self._compacts[:], dict(self._pieces)
        else:
            known, texts, compacts, by_key = 0, [], [], {}
        old = self._pieces
        for item in items[known:]:
            key = self._key(item)
            pieces = by_key.get(key) or old.get(key) or self._encode(item)
            by_key[key] = pieces
            texts.append(pieces[0])
            compacts.append(pieces[1])
        self._items, self._pieces, self._texts, self._compacts = items, by_key, texts, compacts
        self.encoded = array_layout(texts, _escaped), b"".join((b"[", b",".join(compacts), b"]"))
        return self.encoded

    def clear(self) -> None:
        self._items, self._pieces, self._texts, self._compacts, self.encoded = [], {}, [], [], (b"[]", b"[]")


class EncodedGraph:
    """The whole graph, encoded, for the version of the state it was read at."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one build at a time: builds share the kept pieces
        self._answer: tuple[State, int, bytes, bytes] | None = None
        self._entities = _Array(_entity, _entity_key)
        self._relations = _Array(_relation, _relation_key)

    def current(self, state: State) -> tuple[bytes, bytes] | None:
        """The kept answer if the graph has not moved since (the event loop can answer at once); else None."""
        answer = self._answer
        if answer is not None and answer[0] is state and answer[1] == state.graph_version:
            return answer[2], answer[3]
        return None

    def read(self, store: Store) -> tuple[bytes, bytes]:
        """read_graph's answer at the store's current version: its text as it sits inside a JSON string (escaped, no
        quotes), and its structured content as a JSON object."""
        with self._lock:
            with store.reading() as state:
                if (kept := self.current(state)) is not None:
                    return kept
                version = state.graph_version
                entities, relations = state.graph()
            ent_text, ent_json = self._entities.update(entities)
            rel_text, rel_json = self._relations.update(relations)
            text = graph_layout(ent_text, rel_text, _escaped)
            structured = b"".join((b'{"entities":', ent_json, b',"relations":', rel_json, b"}"))
            if len(text) + len(structured) <= KEEP_MAX_BYTES:
                self._answer = (state, version, text, structured)
            else:
                self._answer = None
                self._entities.clear()
                self._relations.clear()
            return text, structured
