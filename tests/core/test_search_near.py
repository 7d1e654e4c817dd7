"""The near pool (the notes holding most of a question's words, weighed against the meaning matches) and the near
list of a search by words alone are exactly the rules spelled out note by note, whatever shortcuts their counting
takes."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.fold import State
from hivenote.server.core.listing import NO_FILTERS, Filters
from hivenote.server.core.model import Author, Note, Op
from hivenote.server.core.search import (
    NEAR_LIMIT,
    _near_candidates,
    _near_scored,
    _score,
    _texts,
    inflection_stem,
    note_text,
)
from hivenote.server.core.timewindow import Window

words = st.sampled_from(["alpha", "alphas", "alphabet", "beta", "bet", "gamma", "gam", "delta", "ta", "café", "omega"])
terms = st.sampled_from(
    ["alpha", "alphas", "alphabets", "beta", "betamax", "gam", "delta", "deltaed", "cafe", "omega", "zeta", "ta"]
)


Notes = list[tuple[list[str], list[str], str | None, bool]]
notebooks = st.lists(
    st.tuples(
        st.lists(words, max_size=3), st.lists(words, max_size=5), st.sampled_from(["a", "b", None]), st.booleans()
    ),
    min_size=1,
    max_size=30,
)
queries = st.lists(terms, min_size=1, max_size=6)
some_filters = st.sampled_from(
    [
        NO_FILTERS,
        Filters(project="a"),
        Filters(trashed=True),
        # time windows (a note's ops are at 2i and 2i + 1 ms): its notes' probes narrowed to them, live or trashed
        Filters(window=Window(9, None)),
        Filters(window=Window(None, 7)),
        Filters(window=Window(5, 14), trashed=True),
        Filters(window=Window(3, 30), project="a"),
    ]
)


def folded(notes: Notes) -> State:
    """The notes (title words, body words, project, trashed) as a notebook."""
    state = State()
    for i, (title, body, project, trashed) in enumerate(notes, start=1):
        fields = {"kind": "fact", "title": " ".join(title) or "t", "body": " ".join(body), "project": project}
        state.apply(Op("n-0001", 2 * i, 2 * i, 0, "note.set", {"id": f"N{i:03}", "fields": fields}, Author()))
        if trashed:
            state.apply(Op("n-0001", 2 * i + 1, 2 * i + 1, 0, "note.trash", {"id": f"N{i:03}"}, Author()))
    return state


def probes_of(texts: dict[str, str], query: list[str]) -> list[str]:
    """Per term, its inflection stem or the stem's longest prefix of three letters or more some note holds."""
    probes = []
    for term in map(inflection_stem, query):
        held = [term[:end] for end in range(len(term), 2, -1) if any(term[:end] in t for t in texts.values())]
        if held:
            probes.append(held[0])
        elif len(term) < 3 and any(term in t for t in texts.values()):
            probes.append(term)
    return probes


def admits(filters: Filters, state: State, note: Note) -> bool:
    """`filters.admit`, with a window's test spelled out: a note is in it when one of its ops' times is."""
    window = filters.window
    in_window = window is None or any(map(window.contains, state.notes[note.id].walls()))
    return in_window and replace(filters, window=None, inside=None).admit(note)


def reference(state: State, query: list[str], filters: Filters, pool: int) -> dict[str, float]:
    """Per term, its inflection stem or the stem's longest prefix of three letters or more some note holds; a note's
    count is how many of those it holds; the `pool` best by count, then id (greater first), of the notes the filters
    let through (all of them, the trash too, with no filter), each with its count over the number of terms."""
    texts = {note.id: note_text(note) for note in state.iter_notes()}
    probes = probes_of(texts, query)
    counts = {}
    for note in state.iter_notes():
        if filters == NO_FILTERS or admits(filters, state, note):
            count = sum(probe in texts[note.id] for probe in probes)
            if count:
                counts[note.id] = count
    best = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:pool]
    return {key: count / len(query) for key, count in best}


@settings(max_examples=150, deadline=None)
@given(notebooks, queries, some_filters, st.integers(1, 8))
def test_the_near_pool_is_the_notes_holding_most_words(
    notes: Notes, query: list[str], filters: Filters, pool: int
) -> None:
    state = folded(notes)
    filters = filters.reading(state)  # NO_FILTERS when the window holds every note (the trash too, then)
    assert _near_scored(state, _texts(state), query, filters, pool) == reference(state, query, filters, pool)


def near_reference(state: State, query: list[str], filters: Filters) -> list[str]:
    """The probes as above; every note holding one that the filters let through (not the trash, with no filter) is
    scored (probes held, then relevance, then revision), and the NEAR_LIMIT best listed."""
    texts = {note.id: note_text(note) for note in state.iter_notes()}
    probes = probes_of(texts, query)
    scored = []
    for note in state.iter_notes():
        admitted = not note.trashed if filters == NO_FILTERS else admits(filters, state, note)
        if admitted and any(probe in texts[note.id] for probe in probes):
            relevance, matched = _score(texts[note.id], probes)
            scored.append(((matched, relevance, note.revision), note.id))
    return [note_id for _, note_id in sorted(scored, reverse=True)[:NEAR_LIMIT]]


@settings(max_examples=150, deadline=None)
@given(notebooks, queries, some_filters)
def test_the_near_list_of_words_alone_is_the_notes_holding_most_words_best_scored(
    notes: Notes, query: list[str], filters: Filters
) -> None:
    """Scored a level at a time from the notes holding the most probes down, until NEAR_LIMIT are scored: every note
    holding one was scored before (at 100k notes of English a question's common words hold most of them)."""
    state = folded(notes)
    filters = filters.reading(state)
    scored = _near_candidates(state, _texts(state), query, filters)
    got = [note_id for *_, note_id in sorted(scored, reverse=True)[:NEAR_LIMIT]]
    assert got == near_reference(state, query, filters)
