"""The texts a warm index saved for the next start (`saved_texts`, `adopt_texts`): while the next start's index
warms, searches read them instead of building every note's text, answer exactly as the warm index does (writes made
since included), and nothing of them is held once the index is warm."""

from __future__ import annotations

import itertools
import sys
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core import search
from hivenote.server.core.fold import State
from hivenote.server.core.listing import Filters
from hivenote.server.core.model import Author, Op

Step = tuple[str, int, dict[str, object] | None]


def apply(state: State, steps: list[Step], first_seq: int = 1) -> None:
    for seq, (kind, note, data) in enumerate(steps, start=first_seq):
        state.apply(Op("n-0001", seq, 1000 + seq, 0, kind, {"id": f"N{note}", **(data or {})}, Author()))


def encoded(texts: list[str]) -> tuple[bytes, array[int]]:
    """The texts as the cache file holds them: UTF-8, one after the other, with where each ends."""
    parts = [text.encode() for text in texts]
    return b"".join(parts), array("Q", itertools.accumulate(map(len, parts)))


def saved_from(steps: list[Step]) -> tuple[bytes, list[str], list[str], list[str], dict[str, str]]:
    """What a warm state of `steps` saves: (ops key, ids, texts, trashed, links)."""
    old = State()
    apply(old, steps)
    search.refresh_note_index(old)
    saved = search.saved_texts(old)
    assert saved is not None
    return saved


def adopted(steps: list[Step]) -> State:
    """A fresh state of `steps` holding the texts a warm state of the same steps saved."""
    key, ids, texts, trashed, links = saved_from(steps)
    state = State()
    apply(state, steps)
    assert search.adopt_texts(state, key, ids, *encoded(texts), trashed, links)
    return state


words = st.sampled_from(["alpha", "alphabet", "x-alpha", "café", "Ωmega", "ph", "ac", "fact", "ace"])
fields = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["fact", "decision"]),
        "title": st.lists(words, min_size=1, max_size=3).map(" ".join),
        "tags": st.lists(words, max_size=2),
        "project": st.sampled_from([None, "alpha-api", "ph"]),
        "body": st.lists(words, max_size=4).map(" ".join),
    }
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("note.set"), st.integers(0, 7), fields.map(lambda f: {"fields": f})),
        st.tuples(  # a note that replaces another
            st.just("note.set"),
            st.integers(0, 7),
            st.tuples(fields, st.integers(0, 7)).map(lambda fr: {"fields": fr[0], "replaces": f"N{fr[1]}"}),
        ),
        st.tuples(st.sampled_from(["note.trash", "note.restore", "note.purge"]), st.integers(0, 7), st.none()),
    ),
    max_size=25,
)
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["al", "alpha", "ph", "ac", "é", "cafe", "fact", "Ω", "alphax", "zzz"]), max_size=3),
        st.booleans(),
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(steps, steps, queries, st.integers(0, 3), st.integers(1, 6))
def test_searches_while_the_index_warms_from_saved_texts_answer_as_the_warm_index(
    before: list[Step], after: list[Step], asked: list[tuple[list[str], bool]], budget: int, limit: int
) -> None:
    """Whatever was written since the texts were saved, and however far the index has warmed, every search (hits,
    near matches, total, reasons, the replaced notes) is exactly the warm index's."""
    state = adopted(before)
    apply(state, after, first_seq=len(before) + 1)
    search.refresh_note_index(state, budget=budget)
    warm = State()
    apply(warm, before + after)
    search.refresh_note_index(warm)
    for terms, trashed in asked:
        query = " ".join(terms)
        got = search.search_notes(state, query, Filters(trashed=trashed), limit=limit)
        assert got == search.search_notes(warm, query, Filters(trashed=trashed), limit=limit)


NOTES = search.COLD_INDEX * 2  # more than one query's share of indexing: the index stays cold for a while


def big() -> list[Step]:
    return [
        ("note.set", i, {"fields": {"title": f"note {i} about deploy" if i % 7 == 0 else f"note {i}", "body": "x"}})
        for i in range(NOTES)
    ]


def test_a_search_while_the_index_warms_builds_no_text_and_reads_only_the_notes_it_lists() -> None:
    """The first search after a start reads the saved texts: no scan of every note's text is built, and the only
    notes it reads (builds a view of) are among those it matched (at 100k notes the scan read all of them, ~2 s)."""
    state = adopted(big())
    result = search.search_notes(state, "deploy", limit=5)
    assert result.total == len(range(0, NOTES, 7))
    assert search.note_index(state).scan is None
    read = {note_id for note_id, record in state.notes.items() if record.view is not False}
    assert read and read <= {f"N{i}" for i in range(0, NOTES, 7)}


def test_writes_while_the_index_warms_keep_the_saved_texts_and_are_found() -> None:
    state = adopted(big())
    stand_in = search._texts(state)
    assert isinstance(stand_in, search._Saved)
    apply(state, [("note.set", 1, {"fields": {"title": "deploy now"}}), ("note.purge", 7, None)], first_seq=NOTES + 1)
    assert search._texts(state) is stand_in  # not built again: it knows the notes written since
    hits = search.search_notes(state, "deploy", limit=NOTES).hits
    assert "N1" in {n.id for n in hits} and "N7" not in {n.id for n in hits}


def test_saved_texts_for_other_ops_are_refused() -> None:
    key, ids, texts, trashed, links = saved_from(big())
    state = State()
    apply(state, big()[:-1])  # one op fewer: another notebook
    assert not search.adopt_texts(state, key, ids, *encoded(texts), trashed, links)
    assert search.note_index(state).saved is None
    blob, ends = encoded(texts)
    state = State()
    apply(state, big())
    assert not search.adopt_texts(state, key, ids, blob[:-1], ends, trashed, links)  # cut short


def test_nothing_of_the_saved_texts_is_held_once_the_index_is_warm() -> None:
    """Memory after warm-up is the index's alone: the buffer of saved texts (34 MB at 100k notes) and its change
    feed go, and the index's texts are strings of their own, not views into it."""
    key, ids, texts, trashed, links = saved_from(big())
    blob, ends = encoded(texts)
    state = State()
    apply(state, big())
    feeds = len(state.note_feeds)
    refs = sys.getrefcount(blob)
    assert search.adopt_texts(state, key, ids, blob, ends, trashed, links)
    search.search_notes(state, "deploy")
    search.refresh_note_index(state)
    assert search.note_index(state).saved is None
    assert sys.getrefcount(blob) == refs
    assert len(state.note_feeds) == feeds + 2  # the index's and the links' own, not the stand-in's
