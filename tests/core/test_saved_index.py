"""The warm note index saved for the next start (`saved_index`, `adopt_index`): a later state takes it as its own,
warm at once for every note whose ops are the ones it was saved with (all of them when the state holds the very same
ops; else the notes another machine or a later write changed are indexed again), and from there every search and
duplicate hint answers exactly as an index built note by note, whatever is written after."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hivenote.server.core import search
from hivenote.server.core.fold import State
from hivenote.server.core.listing import Filters
from hivenote.server.core.model import Author, Journal, Op
from tests.support import strategies

Step = tuple[str, int, dict[str, object] | None]
ME, OTHER = "n-0001", "n-0002"


class Folded:
    """A state whose ops are rows of each writer's journal, as a store's are (a note's history is then rows)."""

    def __init__(self) -> None:
        self.state = State()
        self.journals: dict[str, Journal] = {}
        self.wall = 1000

    def write(self, steps: list[Step], node: str = ME) -> Folded:
        journal = self.journals.setdefault(node, Journal())
        for kind, note, data in steps:
            self.wall += 1
            op = Op(node, len(journal) + 1, self.wall, 0, kind, {"id": f"N{note}", **(data or {})}, Author())
            op.encode()  # its line's digest
            journal.add(op, 0)
            self.state.apply(op)
        return self


def warm(steps: list[Step], elsewhere: list[Step] | None = None) -> State:
    state = Folded().write(steps).write(elsewhere or [], OTHER).state
    search.refresh_note_index(state)
    return state


def saved_from(steps: list[Step]) -> search.SavedIndex:
    """What a warm state of `steps` saves."""
    saved = search.saved_index(warm(steps))
    assert saved is not None
    return saved


def adopted(steps: list[Step], elsewhere: list[Step] | None = None) -> Folded:
    """A fresh state of `steps` (and of another machine's `elsewhere`, written after the index was saved) that took
    the index a warm state of `steps` saved."""
    saved = saved_from(steps)
    folded = Folded().write(steps).write(elsewhere or [], OTHER)
    assert search.adopt_index(folded.state, saved)
    return folded


fields = strategies.note_fields(["alpha", "alphabet", "x-alpha", "café", "Ωmega", "ph", "ac", "fact", "ace"])
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
@given(steps, steps, steps, queries, st.integers(0, 3), st.integers(1, 6))
def test_an_adopted_index_answers_as_one_built_note_by_note_whatever_is_written_after(
    before: list[Step],
    elsewhere: list[Step],
    after: list[Step],
    asked: list[tuple[list[str], bool]],
    budget: int,
    limit: int,
) -> None:
    """Taken, the index is warm at once but for the notes another machine's ops (`elsewhere`, folded before it was
    taken) changed; whatever is written after, and however far the index has caught up, every search (hits, near
    matches, total, reasons, the replaced notes) and duplicate hint is exactly that of an index built note by note."""
    folded = adopted(before, elsewhere)
    state = folded.state
    touched = {f"N{note}" for _, note, _ in elsewhere}
    unlisted = {note_id for note_id in state.notes if state.note(note_id) is None}  # a trash of no note, say
    assert search.note_index(state).pending <= touched | unlisted  # none but the notes the other machine changed
    if not elsewhere:
        assert search.note_index(state).texts.dump() == search.note_index(warm(before)).texts.dump()
    folded.write(after)
    search.refresh_note_index(state, budget=budget)
    if not search.note_index(state).pending:  # warm: each note's mark is its record's now, as saved
        saved = search.saved_index(state)
        assert saved is not None
        records = state.notes
        assert saved.marks.tolist() == [0 if key is None else records[key].mark() for key in saved.texts.keys]
        assert saved.recent.tolist() == [  # and each note's recency, as its revision says
            0 if key is None or (listed := state.listed(key)) is None else search._recency(listed[0])
            for key in saved.texts.keys
        ]
    built_after = Folded().write(before).write(elsewhere, OTHER).write(after).state
    search.refresh_note_index(built_after)
    for terms, trashed in asked:
        query = " ".join(terms)
        got = search.search_notes(state, query, Filters(trashed=trashed), limit=limit)
        assert got == search.search_notes(built_after, query, Filters(trashed=trashed), limit=limit)
        for kind, project in (("fact", None), ("decision", "alpha-api"), ("fact", "ph")):
            hint = {"kind": kind, "project": project, "title": query or "alpha", "threshold": 0.3}
            assert search.similar_notes(state, **hint) == search.similar_notes(built_after, **hint)  # type: ignore[arg-type]


NOTES = search.COLD_INDEX * 2


def big() -> list[Step]:
    return [
        ("note.set", i, {"fields": {"title": f"note {i} about deploy" if i % 7 == 0 else f"note {i}", "body": "x"}})
        for i in range(NOTES)
    ]


def test_a_search_right_after_adoption_builds_no_text_and_reads_only_the_notes_it_lists() -> None:
    """No note is indexed again and no stand-in is built: the only notes the first search reads (builds a view of)
    are among those it matched."""
    state = adopted(big()).state
    result = search.search_notes(state, "deploy", limit=5)
    assert result.total == len(range(0, NOTES, 7))
    assert search.note_index(state).scan is None
    read = {note_id for note_id, record in state.notes.items() if record.view is not False}
    assert read and read <= {f"N{i}" for i in range(0, NOTES, 7)}


def test_an_index_saved_before_other_ops_came_is_taken_for_the_notes_they_did_not_change() -> None:
    """The usual start of a notebook on several machines: the others wrote while this one was off. Only the notes
    their ops touched are indexed again (an edit, an older op that sets a field no newer one did, a purge, a trash, a
    new note), and a search finds each as it is now."""
    changes: list[Step] = [
        ("note.set", 1, {"fields": {"title": "deploy on fridays"}}),
        ("note.purge", 7, None),
        ("note.trash", 14, None),
        ("note.set", NOTES + 1, {"fields": {"title": "a new note about deploy"}}),
    ]
    saved = saved_from(big())
    folded = Folded().write(big()).write(changes, OTHER)
    assert saved.key != folded.state.ops_key()
    assert search.adopt_index(folded.state, saved)
    assert search.note_index(folded.state).pending == {"N1", "N7", "N14", f"N{NOTES + 1}"}
    hits = {note.id for note in search.search_notes(folded.state, "deploy", limit=NOTES).hits}
    assert {"N1", f"N{NOTES + 1}"} <= hits and not {"N7", "N14"} & hits
    built = warm(big(), changes)
    for query in ("deploy", "note", "fridays", "new"):
        assert search.search_notes(folded.state, query, limit=20) == search.search_notes(built, query, limit=20)


def test_an_older_op_that_sets_a_field_no_newer_one_did_changes_the_notes_mark() -> None:
    """An op stamped before the note's newest (another machine's clock was behind) still changes what the note reads
    when it sets a field nothing newer set: the mark counts every op of the history, not only the newest."""
    first = Folded().write([("note.set", 1, {"fields": {"title": "alpha"}})])
    mark = first.state.notes["N1"].mark()
    late = Op(OTHER, 1, 10, 0, "note.set", {"id": "N1", "fields": {"tags": ["beta"]}}, Author())  # wall 10: older
    late.encode()
    first.journals.setdefault(OTHER, Journal()).add(late, 0)
    first.state.apply(late)
    assert first.state.notes["N1"].mark() not in (mark, 0)
    assert first.state.note("N1") is not None and first.state.note("N1").tags == ("beta",)  # type: ignore[union-attr]


def test_a_history_that_lost_an_op_and_gained_another_has_another_mark() -> None:
    """Compaction drops the ops that decide nothing any more: a note that lost one that way and gained another (from
    another machine) holds as many ops as before and reads differently, so the mark is of which ops, not how many."""

    def state_of(*specs: tuple[int, dict[str, object]]) -> State:
        state, journal = State(), Journal()
        for seq, fields in specs:
            op = Op(ME, seq, 1000 + seq, 0, "note.set", {"id": "N1", "fields": fields}, Author())
            op.encode()
            journal.add(op, 0)
            state.apply(op)
        return state

    before = state_of((1, {"title": "x"}), (2, {"title": "y"}))
    after = state_of((2, {"title": "y"}), (3, {"body": "z"}))
    assert len(before.notes["N1"].entries()) == len(after.notes["N1"].entries())
    assert before.notes["N1"].mark() != after.notes["N1"].mark()
    assert state_of((1, {"title": "x"}), (2, {"title": "y"})).notes["N1"].mark() == before.notes["N1"].mark()


def test_notes_whose_ops_are_in_no_journal_have_no_mark_and_are_always_indexed_again() -> None:
    saved = saved_from(big())
    state = State()
    for seq, (kind, note, data) in enumerate(big(), start=1):  # the same notes, from ops made in memory
        state.apply(Op(ME, seq, 1000 + seq, 0, kind, {"id": f"N{note}", **(data or {})}, Author()))
    assert state.notes["N1"].mark() == 0
    assert search.adopt_index(state, saved)
    assert search.note_index(state).pending == set(state.notes)


def test_an_index_with_parts_that_do_not_fit_or_into_a_started_index_is_refused() -> None:
    saved = saved_from(big())
    state = Folded().write(big()).state
    search.refresh_note_index(state, budget=10)  # its own index started
    assert not search.adopt_index(state, saved)
    state = Folded().write(big()).state
    assert not search.adopt_index(state, saved._replace(texts=saved.texts._replace(texts=[])))
    assert not search.adopt_index(state, saved._replace(marks=saved.marks[:-1]))
    assert search.note_index(state).pending == set(state.notes)  # nothing taken
    assert search.adopt_index(state, saved)
