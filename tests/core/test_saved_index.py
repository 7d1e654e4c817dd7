"""The warm note index saved for the next start (`saved_index`, `adopt_index`): a later state of the very same ops
takes it as its own, warm at once (no note indexed again, no stand-in scanned), and from there every search and
duplicate hint answers exactly as an index built note by note, whatever is written after."""

from __future__ import annotations

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


def warm(steps: list[Step]) -> State:
    state = State()
    apply(state, steps)
    search.refresh_note_index(state)
    return state


def saved_from(steps: list[Step]) -> search.SavedIndex:
    """What a warm state of `steps` saves."""
    saved = search.saved_index(warm(steps))
    assert saved is not None
    return saved


def adopted(steps: list[Step]) -> State:
    """A fresh state of `steps` that took the index a warm state of the same steps saved."""
    saved = saved_from(steps)
    state = State()
    apply(state, steps)
    assert search.adopt_index(state, saved)
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
def test_an_adopted_index_answers_as_one_built_note_by_note_whatever_is_written_after(
    before: list[Step], after: list[Step], asked: list[tuple[list[str], bool]], budget: int, limit: int
) -> None:
    """Taken, the index is warm at once and holds what the saved one held; whatever is written after, and however
    far the index has caught up with it, every search (hits, near matches, total, reasons, the replaced notes) and
    duplicate hint is exactly that of an index built note by note."""
    state = adopted(before)
    assert not search.note_index(state).pending  # warm: nothing to index
    assert search.note_index(state).texts.dump() == search.note_index(warm(before)).texts.dump()
    apply(state, after, first_seq=len(before) + 1)
    search.refresh_note_index(state, budget=budget)
    built = warm(before + after)
    for terms, trashed in asked:
        query = " ".join(terms)
        got = search.search_notes(state, query, Filters(trashed=trashed), limit=limit)
        assert got == search.search_notes(built, query, Filters(trashed=trashed), limit=limit)
        for kind, project in (("fact", None), ("decision", "alpha-api"), ("fact", "ph")):
            hint = {"kind": kind, "project": project, "title": query or "alpha", "threshold": 0.3}
            assert search.similar_notes(state, **hint) == search.similar_notes(built, **hint)  # type: ignore[arg-type]


NOTES = search.COLD_INDEX * 2


def big() -> list[Step]:
    return [
        ("note.set", i, {"fields": {"title": f"note {i} about deploy" if i % 7 == 0 else f"note {i}", "body": "x"}})
        for i in range(NOTES)
    ]


def test_a_search_right_after_adoption_builds_no_text_and_reads_only_the_notes_it_lists() -> None:
    """No note is indexed again and no stand-in is built: the only notes the first search reads (builds a view of)
    are among those it matched."""
    state = adopted(big())
    result = search.search_notes(state, "deploy", limit=5)
    assert result.total == len(range(0, NOTES, 7))
    assert search.note_index(state).scan is None
    read = {note_id for note_id, record in state.notes.items() if record.view is not False}
    assert read and read <= {f"N{i}" for i in range(0, NOTES, 7)}


def test_an_index_saved_for_other_ops_or_into_a_started_index_is_refused() -> None:
    saved = saved_from(big())
    state = State()
    apply(state, big()[:-1])  # one op fewer: another notebook
    assert not search.adopt_index(state, saved)
    assert search.note_index(state).pending == set(state.notes)  # nothing taken
    state = State()
    apply(state, big())
    search.refresh_note_index(state, budget=10)  # its own index started
    assert not search.adopt_index(state, saved)
    state = State()
    apply(state, big())
    assert not search.adopt_index(state, saved._replace(texts=saved.texts._replace(texts=[])))  # parts that do not fit
    assert search.adopt_index(state, saved)
