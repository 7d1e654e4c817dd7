"""What the notebook's memory relies on (issue 18): a note op holds its payload compact (no dicts, no lists: a tuple of
values beside a field-name tuple every such op shares), a note's view shares the op's values, and the payload as a
reader sees it (`Op.data`, the log line) is what it always was."""

from __future__ import annotations

import gc
import random
import sys
from array import array
from dataclasses import replace
from typing import Any

import pytest

from hivenote.server.core import fold, listing
from hivenote.server.core.fold import State
from hivenote.server.core.listing import NO_FILTERS, Filters, list_notes, note_counts
from hivenote.server.core.model import Author, Journal, Op, decode_op, line_digest
from hivenote.server.core.search import note_index, refresh_note_index, search_notes, words
from tests.support.notes import note_fields


def reachable(value: Any) -> list[Any]:
    """Every container reachable from `value` through tuples, lists and dicts (itself included)."""
    out: list[Any] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (tuple, list, dict)):
            out.append(item)
            todo.extend(item.values() if isinstance(item, dict) else item)
            if isinstance(item, dict):
                todo.extend(item)
    return out


def written(**data: Any) -> Op:
    op = Op("alpha-0001", 1, 100, 0, "note.set", data, Author(agent="cursor"))
    return decode_op(op.encode()[:-1])  # as read from the log


def test_a_note_op_holds_its_payload_in_tuples_and_its_view_shares_them() -> None:
    fields = {"kind": "fact", "title": "Use Drizzle", "body": "not Prisma", "tags": ["db", "orm"], "project": "shop"}
    since = [5, 0, "beta-0002", 7]
    for op in (
        written(id="N", fields=fields, since=since),
        Op("alpha-0001", 1, 100, 0, "note.set", {"id": "N", "fields": fields, "since": since}),  # as a writer makes it
    ):
        held = reachable(op.cached_payload())
        assert held and not [c for c in held if isinstance(c, (dict, list))], held
        assert op.field_names is Op("x", 2, 1, 0, "note.set", {"id": "M", "fields": dict(fields)}).field_names
        assert op.data == {"id": "N", "fields": fields, "since": tuple(since)}  # what readers always saw
        state = State()
        state.apply(op)
        note = state.note("N")
        assert note is not None and note.tags == ("db", "orm")
        assert any(note.tags is c for c in held)  # one tuple of tags, not one in the op and one in the view


def test_a_compact_op_writes_the_same_line() -> None:
    line = (
        b'{"v":1,"node":"alpha-0001","seq":3,"hlc":[100,2],"op":"note.set","id":"N","fields":{"title":"t","tags":[]},'
        b'"since":null,"replaces":"M","by":{"agent":"cursor"}}'
    )
    op = decode_op(line)
    assert op.encode() == line + b"\n"
    assert op.field("replaces") == "M" and op.field("tags") == () and op.since("none") is None


class Lines(Journal):
    """A journal whose lines are kept in memory (the storage layer's shard file reads them from the file)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[int, bytes] = {}

    def line(self, at: int, digest: int) -> bytes | None:
        line = self.lines.get(at)
        return line if line is not None and line_digest(line) == digest else None


def test_a_note_op_in_a_journal_is_a_row_and_no_object_held_or_released() -> None:
    journal, state = Lines(), State()
    for seq in range(1, 52):
        fields: dict[str, Any] = {"title": f"v{seq}"} if seq > 1 else {"title": "v1", "body": "kept", "kind": "fact"}
        payload = {"id": "N", "fields": fields} if seq < 51 else {"id": "N"}
        line = Op("alpha-0001", seq, 100 + seq, 0, "note.set" if seq < 51 else "note.trash", payload).encode()[:-1]
        op = decode_op(line)
        journal.lines[seq * 1000] = line
        journal.add(op, seq * 1000)
        state.apply(op)
    del op
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is Op and o.src is journal]  # rows, no op objects
    # The ops that decide a field keep their payloads in their rows: the first its body and kind (the title is v50's),
    # the 50th its title; a released op's row keeps its note id alone.
    assert journal.held[0] == ("N", (..., "kept", "fact"))
    assert journal.held[49] == ("N", ("v50",))
    assert [*journal.held[1:49], *journal.held[50:]] == ["N"] * 49
    assert isinstance(state.notes["N"].ops, array)  # the history: rows
    history = state.history("N")  # made again from the rows, the fields read back from the lines
    assert [v.fields.get("title") for v in history[:-1]] == [f"v{seq}" for seq in range(1, 51)]
    assert history[-1].action == "trash"
    note = state.note("N")
    assert note is not None and (note.title, note.body, note.trashed, note.created) == ("v50", "kept", True, 101)


def test_a_note_written_once_in_a_journal_keeps_its_row_alone_as_its_history() -> None:
    """An array per note for a history of one op was 80 bytes a note (8 MB at 100k notes); the row its `fields`
    already holds is the history. A second op makes it an array, and both read as before."""
    journal, state = Lines(), State()
    for seq, fields in ((1, {"title": "one", "body": "b"}), (2, {"title": "two"})):
        line = Op("alpha-0001", seq, 100 + seq, 0, "note.set", {"id": "N", "fields": fields}).encode()[:-1]
        op = decode_op(line)
        journal.lines[seq * 1000] = line
        journal.add(op, seq * 1000)
        state.apply(op)
        rec = state.notes["N"]
        if seq == 1:
            assert type(rec.ops) is int and rec.ops is rec.fields and rec.entries() == (rec.ops,)
            once = (rec.mark(), state.note("N"))
    assert isinstance(rec.ops, array) and len(rec.entries()) == 2 and rec.mark() != once[0]
    assert once[1] is not None and once[1].title == "one"
    note = state.note("N")
    assert note is not None and (note.title, note.body, note.created) == ("two", "b", 101)
    assert [v.fields for v in state.history("N")] == [{"title": "one", "body": "b"}, {"title": "two"}]


def test_a_note_written_once_keeps_no_dict_of_its_fields() -> None:
    state = State()
    first = written(id="N", fields={"kind": "fact", "title": "t", "body": "b", "tags": [], "project": None})
    state.apply(first)
    assert state.notes["N"].fields is first  # one op decides every field: no dict per note
    second = Op("alpha-0001", 2, 200, 0, "note.set", {"id": "N", "fields": {"title": "u"}})
    state.apply(second)
    assert state.notes["N"].deciding() == {
        "kind": first,
        "title": second,
        "body": first,
        "tags": first,
        "project": first,
    }
    note = state.note("N")
    assert note is not None and (note.title, note.body) == ("u", "b")


def test_a_journal_row_is_some_thirty_bytes_and_a_column_widens_for_a_value_that_does_not_fit() -> None:
    journal = Journal()
    journal.add(Op("alpha-0001", 1, 100, 0, "note.set", {"id": "N", "fields": {"title": "t"}}), 0)
    assert sum(column.itemsize for column in journal._columns()) <= 30  # 54 when every column was 32 or 64 bits
    # A seq and an offset beyond 32 bits, a counter beyond 8, and more than 256 writers: each column widens alone.
    journal.add(Op("beta-0002", 5_000_000_000, 200, 300, "note.set", {"id": "N", "fields": {"title": "u"}}), 1 << 33)
    for i in range(300):
        journal.add(Op(f"node-{i}", 1, 300 + i, 0, "note.trash", {"id": "N"}), 1 << 34)
    assert (journal.seqs[0], journal.counters[0], journal.ats[0], journal.nodes[0]) == (1, 0, 0, 0)
    assert (journal.seqs[1], journal.counters[1], journal.ats[1]) == (5_000_000_000, 300, 1 << 33)
    assert journal.nodes[-1] == 301 and journal.stamp(1) == (200, 300, "beta-0002", 5_000_000_000, 0)
    # The op cache keeps each column's type: the copy reads the same rows; a column of another type is refused.
    copy = Journal()
    copy.extend(journal.columns_of(0), journal.tables(), list(journal.held))
    assert copy.columns_of(0) == journal.columns_of(0) and copy.stamp(1) == journal.stamp(1)
    damaged = list(journal.columns_of(0))
    damaged[2] = ("d", damaged[2][1])
    with pytest.raises(ValueError, match="seqs"):
        Journal().extend(tuple(damaged), journal.tables(), list(journal.held))


def test_the_note_index_keeps_note_numbers_in_flat_buffers_not_objects() -> None:
    """At 100k notes the search index's postings were lists of note ids (a pointer an entry: 36 MB) and the duplicate
    hint's one array of note numbers per (kind, project, title word) (137k small arrays, each keyed by a string: 26
    MB). Now a postings entry is a 4-byte number in an array, and the hint keeps one bytearray per title word of
    6-byte entries: no Python object per entry, nor one per kind and project."""
    state = State()
    rnd = random.Random(3)
    titles = []
    for seq in range(1, 2001):
        fields = note_fields(rnd)
        titles.append(fields["title"])
        state.apply(Op("seed-0001", seq, seq, 0, "note.set", {"id": f"N{seq:05}", "fields": dict(fields)}, Author()))
    refresh_note_index(state)
    derived = note_index(state)
    index = derived.texts
    postings = list(index._post.values())
    arrays = [p for p in postings if isinstance(p, array)]
    assert arrays and all(p.typecode == "I" for p in arrays)
    assert all(isinstance(p, array) or p in index for p in postings)  # else the bare id of a token's only note
    # No postings object refers to an object per entry (an array refers to its type alone).
    assert not any(r for p in postings for r in gc.get_referents(p) if r is not array)
    entries = sum(len(p) for p in arrays)
    assert sum(sys.getsizeof(p) for p in arrays) < 4.5 * entries + 96 * len(arrays)  # headers, room to grow
    hint = derived.title_words
    assert set(hint) == {word for title in titles for word in words(title)}  # keyed by the word alone
    assert all(type(p) is bytearray for p in hint.values())
    assert sum(len(p) for p in hint.values()) == 6 * sum(len(words(title)) for title in titles)


def kept_views(state: State) -> int:
    return sum(1 for rec in state.notes.values() if rec.view is not False)


def test_passes_over_the_whole_notebook_keep_no_view_and_a_page_keeps_its_own() -> None:
    """A note's view (`Note`) costs ~400 bytes beside its ops. At 100k notes, indexing the notebook, the first list
    and the status counts each kept every note's view (+44 MB, and 2.2 s for that first list); a question in an
    agent's own words did too (its common words hold most notes). Now each of these makes the views of what it
    shows alone, and still says what it said when it read every view."""
    state = State()
    rnd = random.Random(5)
    seq = 0
    for i in range(1500):
        seq += 1
        fields = dict(note_fields(rnd))
        state.apply(Op("seed-0001", seq, seq, 0, "note.set", {"id": f"N{i:05}", "fields": fields}, Author()))
    for i in rnd.sample(range(1500), 300):  # edits and trash, newer than the notes they touch
        seq += 1
        data: dict[str, Any] = {"id": f"N{i:05}"}
        if i % 3 == 0:
            data["fields"] = {"title": f"Edited deploy {i}"}
        state.apply(Op("seed-0001", seq, seq, 0, "note.set" if i % 3 == 0 else "note.trash", data, Author()))
    refresh_note_index(state)
    assert kept_views(state) == 0

    page, total = list_notes(state, limit=20)
    trash, in_trash = list_notes(state, Filters(trashed=True), limit=20)
    counts = note_counts(state)
    assert kept_views(state) == 40  # the two pages
    everything = [rec.note(keep=False) for rec in state.notes.values()]
    live = sorted((n for n in everything if n and not n.trashed), key=lambda n: n.revision, reverse=True)
    trashed = sorted((n for n in everything if n and n.trashed), key=lambda n: n.revision, reverse=True)
    assert (page, total) == (live[:20], len(live))
    assert (trash, in_trash) == (trashed[:20], len(trashed))
    assert counts == {False: len(live), True: len(trashed)}

    for rec in state.notes.values():
        rec.view = False
    hits = search_notes(state, "deploy", limit=10).hits
    near = search_notes(state, "deploy drizzle nowhereword", limit=10).near
    assert hits and near
    assert kept_views(state) <= len(hits) + len(near)
    assert all(not n.trashed for n in hits + near)
    assert hits[0].title.startswith("Edited deploy")  # a title's whole word, newest first
    assert list_notes(state, NO_FILTERS, limit=20) == (page, total)


@pytest.mark.parametrize("rows", [True, False], ids=["journal rows", "ops in memory"])
def test_a_filtered_list_or_search_keeps_the_views_of_its_page_alone(
    monkeypatch: pytest.MonkeyPatch, rows: bool
) -> None:
    """A list or a search filtered by kind, project, tag, agent, person or machine (the dashboard's filters, an
    agent's `project=`) admitted each note by its view and kept every view it made: at 100k notes a project's list
    kept ~40 MB more. Now a filter reads what it looks at from the note's record, and the answers are the ones every
    view gives, for notes written once, edited by another writer, in the trash, and purged then written again; ops
    read from a log (journal rows, as a server holds them) or made in memory."""
    state = State()
    journal = Lines()
    rnd = random.Random(11)
    writers = [("alpha-0001", Author(agent="cursor", person="ana")), ("beta-0002", Author(agent="codex", person="bo"))]
    seqs = dict.fromkeys((node for node, _ in writers), 0)
    wall = 0

    def apply(kind: str, data: dict[str, Any], data_since: Any = None) -> None:
        nonlocal wall
        node, by = rnd.choice(writers)
        seqs[node] += 1
        wall += 1
        if data_since is not None:
            data["since"] = data_since
        op = Op(node, seqs[node], wall, 0, kind, data, by)
        if rows:
            line = op.encode()[:-1]
            op = decode_op(line)
            journal.lines[wall] = line
            journal.add(op, wall)
        state.apply(op)

    for i in range(1200):
        apply("note.set", {"id": f"N{i:05}", "fields": dict(note_fields(rnd))})
    for i in rnd.sample(range(1200), 400):  # edits of some fields, trash, a purge then a fresh note
        note_id = f"N{i:05}"
        if i % 4 == 0:
            apply("note.set", {"id": note_id, "fields": {"project": rnd.choice(["web", None]), "tags": ["deploy"]}})
        elif i % 4 == 1:
            apply("note.trash", {"id": note_id})
        elif i % 4 == 2:
            apply("note.set", {"id": note_id, "fields": {"title": f"Deploy edited {i}", "kind": "decision"}})
        else:
            apply("note.purge", {"id": note_id})
            purge = state.notes[note_id].purge
            assert purge is not None
            since = [purge.wall, purge.counter, purge.node, purge.seq]
            if i % 8 == 3:
                apply("note.set", {"id": note_id, "fields": {"title": "Deploy again", "project": "web"}}, since)
    refresh_note_index(state)
    for rec in state.notes.values():
        rec.view = False

    every = [n for rec in state.notes.values() if (n := rec.note(keep=False)) is not None]
    kinds: list[Filters] = [
        Filters(project="web"),
        Filters(project="web", trashed=True),
        Filters(kind="decision"),
        Filters(tag="deploy"),
        Filters(agent="codex"),
        Filters(person="ana", project="shop-api"),
        Filters(node="beta-0002", kind="fact"),
    ]
    for filters in kinds:
        admitted = sorted((n for n in every if filters.admit(n)), key=lambda n: n.revision, reverse=True)
        assert admitted, filters
        page, total = list_notes(state, filters, limit=15)
        assert (page, total) == (admitted[:15], len(admitted)), filters
        assert kept_views(state) <= 15, filters
        result = search_notes(state, "deploy", filters, limit=10)
        expected = [n for n in admitted if "deploy" in (n.title + " " + n.body + " " + " ".join(n.tags)).lower()]
        assert result.total == len(expected), filters
        assert {n.id for n in result.hits} <= {n.id for n in expected}
        assert kept_views(state) <= 15 + 10 + len(result.near), filters
        for rec in state.notes.values():
            rec.view = False

    # The next page of the same list reads no note (nothing changed since its first); a change is seen by the next.
    web = Filters(project="web")
    admitted = sorted((n for n in every if web.admit(n)), key=lambda n: n.revision, reverse=True)
    assert list_notes(state, web, limit=10) == (admitted[:10], len(admitted))
    asked: list[str] = []
    facets = state.facets

    def counted(note_id: str) -> Any:
        asked.append(note_id)
        return facets(note_id)

    monkeypatch.setattr(state, "facets", counted)
    assert list_notes(state, web, limit=10, offset=10) == (admitted[10:20], len(admitted))
    assert not asked
    # A change: the next list reads the notes it touched alone (a dashboard's filtered list after an agent's write),
    # over lists the filter skipped too (the order patched twice), and the whole notebook again only when the
    # patches kept do not reach back to the list it has.
    apply("note.set", {"id": admitted[3].id, "fields": {"project": "shop-api"}})
    list_notes(state, limit=1)
    apply("note.set", {"id": "NEW", "fields": {"title": "New web note", "project": "web"}})
    apply("note.trash", {"id": admitted[5].id})
    page, total = list_notes(state, web, limit=4)
    assert [n.id for n in page] == ["NEW", admitted[0].id, admitted[1].id, admitted[2].id]
    assert total == len(admitted) - 1 and sorted(asked) == sorted(["NEW", admitted[3].id, admitted[5].id])
    assert list_notes(state, replace(web, trashed=True), limit=1)[0][0].id == admitted[5].id
    again = [n for rec in state.notes.values() if (n := rec.note(keep=False)) is not None and web.admit(n)]
    assert list_notes(state, web, limit=200)[0] == sorted(again, key=lambda n: n.revision, reverse=True)[:200]
    asked.clear()
    for i in range(listing.KEPT_PATCHES + 1):
        apply("note.set", {"id": f"MORE{i}", "fields": {"title": "More", "project": "shop-api"}})
        list_notes(state, limit=1)
    assert list_notes(state, web, limit=5)[1] == len(again) and len(asked) > len(again)


def test_paging_through_the_whole_notebook_keeps_a_bounded_number_of_views(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page keeps its views for the next call; a reader paging through every note (a dashboard scrolled to the end,
    an export by pages) kept every note's view for good (~40 MB at 100k notes). Now at most KEPT_VIEWS are kept, the
    oldest made dropped first, and every page says what it said."""
    monkeypatch.setattr(fold, "KEPT_VIEWS", 400, raising=False)
    state = State()
    rnd = random.Random(8)
    for i in range(3000):
        fields = dict(note_fields(rnd))
        state.apply(Op("seed-0001", i + 1, i + 1, 0, "note.set", {"id": f"N{i:05}", "fields": fields}, Author()))
    every = sorted(
        (n for rec in state.notes.values() if (n := rec.note(keep=False)) is not None),
        key=lambda n: n.revision,
        reverse=True,
    )
    for offset in range(0, 3000, 100):
        page, total = list_notes(state, limit=100, offset=offset)
        assert (page, total) == (every[offset : offset + 100], 3000)
        assert kept_views(state) <= 400
    kept = {rec.id for rec in state.notes.values() if rec.view is not False}
    assert len(kept) >= 300 and kept <= {n.id for n in every[-400:]}  # the pages read last
    again = state.note(every[0].id)  # dropped long ago: made again, the same note
    assert again == every[0] and state.notes[every[0].id].view is again


def test_a_page_far_from_the_front_is_the_same_with_stale_entries_in_the_order() -> None:
    """The list's order keeps an edited note's older entry until a rebuild (skipped as stale); a page far from the
    front drops them first and skips to its place in C. Every page, of the notes and of the trash, is what sorting
    every view says, whether the order has stale entries or not."""
    state = State()
    rnd = random.Random(9)
    seq = 0

    def apply(kind: str, data: dict[str, Any]) -> None:
        nonlocal seq
        seq += 1
        state.apply(Op("seed-0001", seq, seq, 0, kind, data, Author()))

    for i in range(900):
        apply("note.set", {"id": f"N{i:04}", "fields": dict(note_fields(rnd))})
    for round_ in range(3):
        list_notes(state, limit=5)  # the order exists: what follows patches it
        for i in rnd.sample(range(900), 60):
            kind = rnd.choice(["note.set", "note.trash", "note.restore", "note.purge"])
            apply(
                kind,
                {"id": f"N{i:04}", "fields": {"title": f"r{round_}"}} if kind == "note.set" else {"id": f"N{i:04}"},
            )
        every = [n for rec in state.notes.values() if (n := rec.note(keep=False)) is not None]
        for trashed in (False, True):
            expected = sorted((n for n in every if n.trashed == trashed), key=lambda n: n.revision, reverse=True)
            for offset in (0, 7, 130, len(expected) - 3, len(expected) + 5):
                page, total = list_notes(state, Filters(trashed=trashed), limit=50, offset=offset)
                assert (page, total) == (expected[offset : offset + 50], len(expected)), (round_, trashed, offset)
