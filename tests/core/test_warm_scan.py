"""While the search index warms (a server just started on a big notebook), searches answer from a scan of every
note's text: built once and kept while nothing is written, dropped once the index is warm (so it holds no memory
after warm-up)."""

from __future__ import annotations

from hivenote.server.core import search
from hivenote.server.core.fold import State
from hivenote.server.core.model import Author, Op

NOTES = search.COLD_INDEX * 2  # more than one query's share of indexing: the index stays cold for a while


def notebook() -> State:
    state = State()
    for i in range(1, NOTES + 1):
        fields = {"kind": "fact", "title": f"note {i} about deploy" if i % 7 == 0 else f"note {i}", "body": "text"}
        state.apply(Op("alpha-0001", i, 1000 + i, 0, "note.set", {"id": f"N{i:05d}", "fields": fields}, Author()))
    return state


def test_the_scan_a_cold_index_answers_from_is_built_once_and_dropped_when_warm() -> None:
    state = notebook()
    first = search._texts(state)
    assert isinstance(first, search._Scan)
    assert search._texts(state) is first  # the next query scans the same texts instead of building them again
    expected = {f"N{i:05d}" for i in range(7, NOTES + 1, 7)}
    assert {n.id for n in search.search_notes(state, "deploy", limit=200).hits} <= expected
    assert search.search_notes(state, "deploy", limit=200).total == len(expected)
    state.apply(Op("alpha-0001", NOTES + 1, 9_999_999, 0, "note.set", {"id": "NEW", "fields": {"title": "deploy"}}))
    assert search._texts(state) is not first  # a write: built again (it must hold the new note)
    assert search.search_notes(state, "deploy", limit=200).total == len(expected) + 1
    search.refresh_note_index(state)  # the server's warm-up finishes
    assert search.note_index(state).scan is None  # the stand-in is not kept once the index is warm
    assert search._texts(state) is search.note_index(state).texts


def test_the_index_keeps_the_scans_texts_instead_of_building_them_again() -> None:
    """The warm-up's texts are the scan's very strings: built once, and nothing is freed among the index's objects
    when the scan goes (freeing them there left ~30 MB of a 100k-note server's heap pinned for good)."""
    state = notebook()
    scan = search._texts(state)
    assert isinstance(scan, search._Scan)
    last = next(iter(search.note_index(state).pending))  # not indexed yet when the scan was built
    text = scan.text(last)
    search.refresh_note_index(state)
    assert search.note_index(state).texts.text(last) is text
