"""Search over the folded state: notes (every term must match; field-weighted rank, then recency; near matches
kept apart) and the knowledge graph (the official memory server's substring semantics), both index-backed.

Pure: imports only the standard library. Indexes live in the `State` and are brought up to date lazily from
the ids the fold marked as changed, so a query never rescans the whole notebook.
"""

from __future__ import annotations

import heapq
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from .fold import OccKey, State
from .model import Entity, Note, Relation

# Field weights: a term in the title says more than the same term deep in the body.
WEIGHTS = (("title", 4.0), ("tags", 3.0), ("project", 3.0), ("kind", 2.0), ("body", 1.0))
DEFAULT_LIMIT = 10
MAX_LIMIT = 200
TOKEN_BUDGET = 1500  # default result size, in estimated model tokens of the one-line summaries
NEAR_LIMIT = 5
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


def fold_text(text: str) -> str:
    """Case- and accent-insensitive form used for note search (NFKD, drop combining marks, casefold)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@dataclass(frozen=True, slots=True)
class Filters:
    kind: str | None = None
    project: str | None = None
    tag: str | None = None
    agent: str | None = None
    person: str | None = None
    node: str | None = None
    trashed: bool = False  # True: only the trash; False: only live notes

    def admit(self, note: Note) -> bool:
        return (
            note.trashed == self.trashed
            and (self.kind is None or note.kind == self.kind)
            and (self.project is None or note.project == self.project)
            and (self.tag is None or self.tag in note.tags)
            and (self.agent is None or self.agent in (note.created_by.agent, note.updated_by.agent))
            and (self.person is None or self.person in (note.created_by.person, note.updated_by.person))
            and (self.node is None or self.node in (note.created_on, note.updated_on))
        )


NO_FILTERS = Filters()


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Note]
    near: list[Note]  # closest partial matches, only when nothing matched every term
    total: int  # how many notes matched every term (hits may be fewer: limit / token budget)


def estimated_tokens(note: Note) -> int:
    """Rough size of a note's one-line summary for a model (4 characters a token, plus framing)."""
    return 24 + (len(note.title) + len(note.project or "") + sum(len(t) + 2 for t in note.tags)) // 4


def _bounded(notes: Iterable[Note], limit: int | None) -> list[Note]:
    if limit is not None:
        return list(notes)[: max(0, min(limit, MAX_LIMIT))]
    out: list[Note] = []
    used = 0
    for note in notes:
        cost = estimated_tokens(note)
        if out and (len(out) >= DEFAULT_LIMIT or used + cost > TOKEN_BUDGET):
            break
        out.append(note)
        used += cost
    return out


def refresh_note_index(state: State) -> None:
    """Bring the note index up to date with every note the fold changed since the last call."""
    index = state.note_index
    for note_id in state.changed_notes:
        note = state.note(note_id)
        if note is None:
            index.discard(note_id)
        else:
            fields = (note.title, note.body, " ".join(note.tags), note.project or "", note.kind)
            index.set(note_id, fold_text("\n".join(fields)))
    state.changed_notes.clear()


def _field_texts(note: Note) -> tuple[tuple[str, float], ...]:
    values = {
        "title": note.title,
        "tags": " ".join(note.tags),
        "project": note.project or "",
        "kind": note.kind,
        "body": note.body,
    }
    return tuple((fold_text(values[name]), weight) for name, weight in WEIGHTS)


def _score(note: Note, terms: list[str]) -> tuple[float, int]:
    """(relevance, terms matched): each term counts its best field, doubled for a whole-word match."""
    fields = _field_texts(note)
    total = 0.0
    matched = 0
    for term in terms:
        best = 0.0
        for text, weight in fields:
            if weight > best and term in text:
                word = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None
                best = weight * (2.0 if word else 1.0)
        if best:
            matched += 1
            total += best
    return total, matched


def _ranked(notes: Iterable[Note], terms: list[str], limit: int) -> list[Note]:
    scored = ((_score(n, terms)[0], n.updated, n.id, n) for n in notes)
    return [item[3] for item in heapq.nlargest(limit, scored, key=lambda s: (s[0], s[1], s[2]))]


def search_notes(state: State, query: str, filters: Filters = NO_FILTERS, limit: int | None = None) -> SearchResult:
    """Notes matching every term of `query` (substring, case/accent-insensitive), best first."""
    terms = fold_text(query).split()
    if not terms:
        notes, total = list_notes(state, filters, limit=limit)
        return SearchResult(notes, [], total)
    refresh_note_index(state)
    index = state.note_index
    ordered = sorted(terms, key=index.count_estimate)
    candidates = index.candidates(ordered[0])
    for term in ordered[1:]:
        if not candidates:
            break
        candidates = {key for key in candidates if term in (index.text(key) or "")}
    matches = [n for n in (state.note(key) for key in candidates) if n is not None and filters.admit(n)]
    cap = MAX_LIMIT if limit is None else max(0, min(limit, MAX_LIMIT))
    hits = _bounded(_ranked(matches, terms, cap), limit)
    near = [] if matches else _near(state, terms, filters)
    return SearchResult(hits, near, len(matches))


def _near(state: State, terms: list[str], filters: Filters) -> list[Note]:
    """Closest notes when nothing matched every term: most terms matched, or a term's longest matching prefix."""
    index = state.note_index
    probes: list[str] = []
    for term in terms:
        probe = term
        while len(probe) >= 3 and not index.candidates(probe):
            probe = probe[:-1]
        if len(probe) >= 3 or (probe == term and index.candidates(probe)):
            probes.append(probe)
    keys: set[str] = set()
    for probe in probes:
        keys |= index.candidates(probe)
    notes = [n for n in (state.note(k) for k in keys) if n is not None and filters.admit(n)]
    scored = []
    for note in notes:
        relevance, matched = _score(note, probes)
        scored.append((matched, relevance, note.updated, note.id, note))
    return [item[4] for item in heapq.nlargest(NEAR_LIMIT, scored, key=lambda s: s[:4])]


def list_notes(
    state: State, filters: Filters = NO_FILTERS, *, limit: int | None = None, offset: int = 0
) -> tuple[list[Note], int]:
    """Notes passing `filters`, most recently updated first; returns (page, total)."""
    notes = [n for n in state.iter_notes() if filters.admit(n)]
    notes.sort(key=lambda n: (n.updated, n.id), reverse=True)
    page = notes[offset:]
    return (_bounded(page, limit) if limit is None else page[: max(0, min(limit, MAX_LIMIT))]), len(notes)


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", fold_text(text)) if len(w) > 2 and w not in _STOPWORDS}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def similar_notes(
    state: State,
    *,
    kind: str,
    project: str | None,
    title: str,
    body: str,
    exclude: str | None = None,
    threshold: float = 0.5,
) -> list[Note]:
    """Live notes of the same kind and project that look like the same fact: most title words shared (or
    most words overall), so the caller can suggest updating that note instead of adding a near-copy."""
    refresh_note_index(state)
    my_title, mine = words(title), words(f"{title} {body}")
    probe = my_title or mine
    if not probe:
        return []
    index = state.note_index
    keys: set[str] = set()
    for word in sorted(probe, key=index.count_estimate)[:6]:
        keys |= index.candidates(word)
    found: list[tuple[float, Note]] = []
    for key in keys:
        note = state.note(key)
        if note is None or note.trashed or note.id == exclude or note.kind != kind or note.project != project:
            continue
        likeness = max(_jaccard(my_title, words(note.title)), _jaccard(mine, words(f"{note.title} {note.body}")))
        if likeness >= threshold:
            found.append((likeness, note))
    found.sort(key=lambda item: (-item[0], -item[1].updated))
    return [note for _, note in found[:3]]


# -- knowledge graph ------------------------------------------------------------------------------


def refresh_entity_index(state: State) -> None:
    index = state.entity_index
    for name in state.changed_names:
        for k in state.ent_ks.get(name, ()):
            occ = (name, k)
            if state.entity_alive(occ):
                entity = state.entity(occ)
                text = "\n".join((entity.name, entity.entityType, *entity.observations))
                index.set(occ, text.lower())
            else:
                index.discard(occ)
    state.changed_names.clear()


def _matches(entity: Entity, q: str) -> bool:
    return (
        q in entity.name.lower() or q in entity.entityType.lower() or any(q in o.lower() for o in entity.observations)
    )


def search_graph(state: State, query: str) -> tuple[list[Entity], list[Relation]]:
    """The official `search_nodes`: case-insensitive substring over name, type and observations; relations
    with either end among the matches."""
    q = query.lower()
    if not q:
        return state.graph()
    refresh_entity_index(state)
    pieces = q.split()
    occs: Iterable[OccKey]
    if pieces:
        index = state.entity_index
        pieces.sort(key=index.count_estimate)
        found = index.candidates(pieces[0])
        for piece in pieces[1:]:
            found = {occ for occ in found if piece in (index.text(occ) or "")}
        occs = found
    else:  # whitespace only: no index can help, and such queries are rare
        occs = [occ for occ in state.ent_add if state.entity_alive(occ)]
    matched = [occ for occ in occs if _matches(state.entity(occ), q)]
    entities = state.sorted_entities(matched)
    return entities, state.relations_touching({occ[0] for occ in matched})


def open_graph(state: State, names: Iterable[str]) -> tuple[list[Entity], list[Relation]]:
    """The official `open_nodes`: exact names, missing ones skipped; relations touching any of them."""
    occs = [occ for name in set(names) for occ in state.occurrences(name)]
    return state.sorted_entities(occs), state.relations_touching({occ[0] for occ in occs})
