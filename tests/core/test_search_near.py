"""The near pool (the notes holding most of a question's words, weighed against the meaning matches) is exactly the
rule spelled out note by note, whatever shortcuts its counting takes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core.fold import State
from hivenote.server.core.listing import NO_FILTERS, Filters
from hivenote.server.core.model import Author, Op
from hivenote.server.core.search import _near_scored, _texts, inflection_stem, note_text

words = st.sampled_from(["alpha", "alphas", "alphabet", "beta", "bet", "gamma", "gam", "delta", "ta", "café", "omega"])
terms = st.sampled_from(
    ["alpha", "alphas", "alphabets", "beta", "betamax", "gam", "delta", "deltaed", "cafe", "omega", "zeta", "ta"]
)


def reference(state: State, query: list[str], filters: Filters, pool: int) -> dict[str, float]:
    """Per term, its inflection stem or the stem's longest prefix of three letters or more some note holds; a note's
    count is how many of those it holds; the `pool` best by count, then id (greater first), of the notes the filters
    let through (all of them, the trash too, with no filter), each with its count over the number of terms."""
    texts = {note.id: note_text(note) for note in state.iter_notes()}
    probes = []
    for term in map(inflection_stem, query):
        held = [term[:end] for end in range(len(term), 2, -1) if any(term[:end] in t for t in texts.values())]
        if held:
            probes.append(held[0])
        elif len(term) < 3 and any(term in t for t in texts.values()):
            probes.append(term)
    counts = {}
    for note in state.iter_notes():
        if filters == NO_FILTERS or filters.admit(note):
            count = sum(probe in texts[note.id] for probe in probes)
            if count:
                counts[note.id] = count
    best = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)[:pool]
    return {key: count / len(query) for key, count in best}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(words, max_size=3), st.lists(words, max_size=5), st.sampled_from(["a", "b", None]), st.booleans()
        ),
        min_size=1,
        max_size=30,
    ),
    st.lists(terms, min_size=1, max_size=6),
    st.sampled_from([NO_FILTERS, Filters(project="a"), Filters(trashed=True)]),
    st.integers(1, 8),
)
def test_the_near_pool_is_the_notes_holding_most_words(
    notes: list[tuple[list[str], list[str], str | None, bool]], query: list[str], filters: Filters, pool: int
) -> None:
    state = State()
    for i, (title, body, project, trashed) in enumerate(notes, start=1):
        fields = {"kind": "fact", "title": " ".join(title) or "t", "body": " ".join(body), "project": project}
        state.apply(Op("n-0001", 2 * i, 2 * i, 0, "note.set", {"id": f"N{i:03}", "fields": fields}, Author()))
        if trashed:
            state.apply(Op("n-0001", 2 * i + 1, 2 * i + 1, 0, "note.trash", {"id": f"N{i:03}"}, Author()))
    assert _near_scored(state, _texts(state), query, filters, pool) == reference(state, query, filters, pool)
