"""Time-aware recall over notes written at known times: a window on lists, searches and histories (edits, trash and
restore count; a note changed only before and after the window is not in it), the agent and person filters, and a
notebook export imported with its own times and authors."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hivenote.server.core.errors import InvalidInput
from hivenote.server.core.listing import Filters
from hivenote.server.core.model import Author, CorruptLine, Imported, Op, decode_op
from hivenote.server.core.timewindow import Window, read_window
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.transfer import ImportSummary, export_notebook, import_notes, parse_notebook

BERLIN = ZoneInfo("Europe/Berlin")
CURSOR = Author("cursor", "cursor-vscode 1.7", "ann")
CODEX = Author("codex", "codex-cli 0.5", "bob")
ME = Author("cli", "hivenote-cli", "me")


def at(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=BERLIN).timestamp() * 1000)


class Clock:
    def __init__(self, start: str) -> None:
        self.now = at(start)

    def set(self, text: str) -> None:
        self.now = at(text)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock("2026-12-01T09:00")


@pytest.fixture
def notebook(tmp_path: Path, clock: Clock) -> Iterator[Notebook]:
    with Store(tmp_path / "data", now_ms=clock) as store:
        yield Notebook(store)


def window(since: str | None, until: str | None, clock: Clock) -> Window:
    got = read_window(since, until, now_ms=clock.now, tz=BERLIN)
    assert got is not None
    return got


def titles(notebook: Notebook, filters: Filters, query: str | None = None) -> list[str]:
    if query is None:
        return [n.title for n in notebook.list(filters, limit=50)[0]]
    return [n.title for n in notebook.search(query, filters, 50).hits]


def test_a_window_finds_the_notes_created_or_changed_in_it_in_lists_and_searches(
    notebook: Notebook, clock: Clock
) -> None:
    clock.set("2026-12-01T09:00")  # Tuesday
    old = notebook.remember(kind="fact", title="Redis note from Tuesday", by=CURSOR).note
    clock.set("2026-12-03T23:50")  # Thursday, just before midnight
    late = notebook.remember(kind="fact", title="Redis note late Thursday", by=CODEX).note
    clock.set("2026-12-04T00:10")  # Friday, just after midnight
    early = notebook.remember(kind="decision", title="Redis note early Friday", by=CURSOR).note
    clock.set("2026-12-04T12:00")
    notebook.update(old.id, body="edited on Friday", by=CODEX)
    clock.set("2026-12-06T10:00")  # Sunday
    trashed = notebook.remember(kind="fact", title="Redis note trashed Monday", by=CURSOR).note
    clock.set("2026-12-07T08:00")  # Monday
    notebook.forget(trashed.id, by=CURSOR)
    clock.set("2026-12-07T09:30")

    # A window that crosses midnight: 23:00 Thursday to 01:00 Friday.
    night = Filters(window=window("2026-12-03T23:00", "2026-12-04T01:00", clock))
    assert titles(notebook, night) == ["Redis note early Friday", "Redis note late Thursday"]
    assert titles(notebook, night, "redis") == ["Redis note early Friday", "Redis note late Thursday"]
    # Thursday alone ends at midnight, Friday starts there.
    assert titles(notebook, Filters(window=window("thursday", "thursday", clock))) == [late.title]
    assert titles(notebook, Filters(window=window("friday", "friday", clock))) == [old.title, early.title]
    # The Tuesday note was created before Thursday and edited after it: it did not change on Thursday.
    assert old.title not in titles(notebook, Filters(window=window("thursday", "thursday", clock)), "redis")
    # since=yesterday (Sunday) on Monday: the trashed note changed in it, and it is in the trash.
    yesterday = window("yesterday", None, clock)
    assert titles(notebook, Filters(window=yesterday)) == []
    assert titles(notebook, Filters(window=yesterday, trashed=True)) == [trashed.title]
    notebook.restore(trashed.id, by=CODEX)
    assert titles(notebook, Filters(window=window("2026-12-07T09:29", None, clock))) == [trashed.title]
    # Newest first in a list, ranked inside the window in a search; other filters apply with the window.
    week = window("last week", None, clock)
    assert titles(notebook, Filters(window=week)) == [trashed.title, old.title, early.title, late.title]
    assert titles(notebook, Filters(window=week, kind="decision"), "redis") == [early.title]
    assert titles(notebook, Filters(window=week, agent="codex"), "redis") == [trashed.title, old.title, late.title]
    assert titles(notebook, Filters(window=week, person="bob")) == [trashed.title, old.title, late.title]
    assert titles(notebook, Filters(window=window(None, "thursday", clock))) == [old.title, late.title]
    assert notebook.list(Filters(window=week))[1] == 4  # the total counts the window's notes only


def test_a_windowed_list_reads_only_the_notes_of_its_window(notebook: Notebook, clock: Clock) -> None:
    """The recency order keeps each note's latest change: the window's notes are a slice of it, and no other note's
    record or view is read (a window costs its notes, not a pass over the notebook)."""
    for day in range(1, 8):
        clock.set(f"2026-11-{day:02d}T12:00")
        notebook.remember(kind="fact", title=f"Note of November {day}")
    clock.set("2026-11-07T18:00")
    assert notebook.list()[1] == 7  # the order is made (a pass over the notebook, once)
    state = notebook.store.state
    read: list[str] = []
    listed, facets, note = state.listed, state.facets, state.note

    def counting(real: Callable[[str], object]) -> Callable[[str], object]:
        def read_one(note_id: str) -> object:
            read.append(note_id)
            return real(note_id)

        return read_one

    state.listed, state.facets, state.note = counting(listed), counting(facets), counting(note)  # type: ignore[assignment]
    try:
        notes, total = notebook.list(Filters(window=window("2026-11-06", None, clock)))
    finally:
        state.listed, state.facets, state.note = listed, facets, note  # type: ignore[method-assign]
    assert [n.title for n in notes] == ["Note of November 7", "Note of November 6"] and total == 2
    assert set(read) <= {n.id for n in notes}


def test_the_history_shows_the_same_window_on_a_notes_versions(notebook: Notebook, clock: Clock) -> None:
    note = notebook.remember(kind="fact", title="v1").note
    clock.set("2026-12-02T10:00")
    notebook.update(note.id, title="v2")
    clock.set("2026-12-03T10:00")
    notebook.update(note.id, title="v3")
    notebook.forget(note.id)
    clock.set("2026-12-04T10:00")
    assert [v.fields.get("title", v.action) for v in notebook.history(note.id)] == ["v1", "v2", "v3", "trash"]
    shown = notebook.history(note.id, window("yesterday", None, clock))
    assert [v.fields.get("title", v.action) for v in shown] == ["v3", "trash"]
    assert [v.fields["title"] for v in notebook.history(note.id, window("2026-12-02", "2026-12-02", clock))] == ["v2"]


def test_an_unreadable_phrase_changes_nothing_and_lists_what_works(notebook: Notebook, clock: Clock) -> None:
    notebook.remember(kind="fact", title="still here")
    size = notebook.store.shard_path.stat().st_size if notebook.store.shard_path else 0
    with pytest.raises(InvalidInput, match=r"cannot read since .the other day. as a time; use .*yesterday.*2h"):
        notebook.window("the other day")
    with pytest.raises(InvalidInput, match="cannot read until 'soonish'"):
        notebook.window(None, "soonish")
    assert notebook.store.shard_path is not None and notebook.store.shard_path.stat().st_size == size
    assert [n.title for n in notebook.list()[0]] == ["still here"]


# -- import keeps times and authors ---------------------------------------------------------------------------------


def _export(tmp_path: Path, clock: Clock) -> tuple[str, dict[str, str]]:
    """An export written by two agents over a week: a note created Monday by Cursor and edited Wednesday by Codex, one
    written Tuesday, and one trashed on Thursday."""
    with Store(tmp_path / "source", now_ms=clock) as store:
        source = Notebook(store)
        clock.set("2026-11-23T10:00")
        edited = source.remember(kind="decision", title="Use Drizzle", project="shop-api", by=CURSOR).note
        clock.set("2026-11-24T10:00")
        plain = source.remember(kind="fact", title="Deploys on Fridays", by=CURSOR).note
        clock.set("2026-11-25T10:00")
        source.update(edited.id, body="Cold starts.", by=CODEX)
        gone = source.remember(kind="fact", title="Old rule", by=CODEX).note
        clock.set("2026-11-26T10:00")
        source.forget(gone.id, by=CURSOR)
        text = json.dumps(export_notebook(store.state, node=store.node, now_ms=clock.now))
    return text, {"edited": edited.id, "plain": plain.id, "gone": gone.id}


def _import(notebook: Notebook, text: str) -> ImportSummary:
    summary = ImportSummary("notebook")
    import_notes(notebook, parse_notebook(text)[0], summary, by=ME, source="notebook-2026-11-26.json")
    return summary


def test_an_imported_export_keeps_each_notes_times_and_authors(tmp_path: Path, clock: Clock) -> None:
    text, ids = _export(tmp_path, clock)
    exported = {n["id"]: n for n in json.loads(text)["notes"]}
    clock.set("2026-12-07T09:00")
    with Store(tmp_path / "target", now_ms=clock) as store:
        notebook = Notebook(store)
        assert _import(notebook, text).added == {"notes": 3}
        for note_id in ids.values():
            note, was = notebook.get(note_id), exported[note_id]
            assert (note.created, note.updated, note.trashed) == (was["created"], was["updated"], was["trashed"])
            for key in ("created_by", "updated_by"):
                mine = getattr(note, key)
                assert (mine.agent, mine.client, mine.person) == tuple(
                    was[key][k] for k in ("agent", "client", "person")
                )
        edited = notebook.get(ids["edited"])
        assert (edited.created_by.agent, edited.updated_by.agent) == ("cursor", "codex")
        # The import itself is in the history: who imported, when, from which file.
        versions = notebook.history(ids["edited"])
        assert [(v.at, v.by.agent) for v in versions] == [
            (at("2026-11-23T10:00"), "cursor"),
            (at("2026-11-25T10:00"), "codex"),
        ]
        for version in versions:
            assert version.by.imported is not None
            assert version.by.imported.to_json() == {
                "by": ME.to_json(),
                "at": at("2026-12-07T09:00"),
                "file": "notebook-2026-11-26.json",
            }
        # A time window over the imported notebook finds what was written then, not "everything, just now".
        assert titles(notebook, Filters(window=window("2026-11-24", "2026-11-24", clock))) == ["Deploys on Fridays"]
        assert titles(notebook, Filters(window=window("today", None, clock))) == []
        assert titles(notebook, Filters(window=window("2026-11-26", "2026-11-26", clock), trashed=True)) == ["Old rule"]
        assert titles(notebook, Filters(agent="codex", window=window("2026-11-25", None, clock))) == ["Use Drizzle"]
    with Store(tmp_path / "target", now_ms=clock) as again:  # as read back from the log (and the op cache)
        versions = Notebook(again).history(ids["edited"])
        assert all(v.by.imported is not None and v.by.imported.file == "notebook-2026-11-26.json" for v in versions)
        assert again.state.note(ids["plain"]) is not None


def test_importing_again_changes_nothing_and_a_newer_note_keeps_its_version(tmp_path: Path, clock: Clock) -> None:
    text, ids = _export(tmp_path, clock)
    clock.set("2026-12-07T09:00")
    with Store(tmp_path / "target", now_ms=clock) as store:
        notebook = Notebook(store)
        _import(notebook, text)
        size = store.shard_path.stat().st_size if store.shard_path else 0
        again = _import(notebook, text)
        assert not again.added and again.skipped["notes"] == 3
        assert store.shard_path is not None and store.shard_path.stat().st_size == size
        # Edited here after the export: the import keeps this version.
        clock.set("2026-12-07T10:00")
        notebook.update(ids["plain"], title="Deploys on Thursdays", by=CODEX)
        assert _import(notebook, text).skipped["notes"] == 3
        assert notebook.get(ids["plain"]).title == "Deploys on Thursdays"
    # A notebook holding an older version of a note takes the export's newer one, as its own time and author.
    doc = json.loads(text)
    older = [dict(n) for n in doc["notes"] if n["id"] == ids["edited"]]
    older[0] |= {"body": "", "updated": older[0]["created"], "updated_by": older[0]["created_by"]}
    clock.set("2026-12-08T09:00")
    with Store(tmp_path / "third", now_ms=clock) as store:
        notebook = Notebook(store)
        _import(notebook, json.dumps({**doc, "notes": older}))
        assert notebook.get(ids["edited"]).body == ""
        summary = _import(notebook, text)
        assert summary.added == {"updated": 1, "notes": 2}
        note = notebook.get(ids["edited"])
        assert (note.body, note.updated, note.updated_by.agent) == ("Cold starts.", at("2026-11-25T10:00"), "codex")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"created": "yesterday"}, "'created' must be a time in epoch milliseconds"),
        ({"updated": -1}, "'updated' must be a time in epoch milliseconds"),
        ({"updated": 5, "created": 10}, "'updated' must not be before its 'created'"),
        ({"created_by": "cursor"}, "'created_by' must be an object"),
        ({"updated_by": {"agent": 7}}, "'updated_by' must hold agent, client and person"),
    ],
)
def test_an_export_with_bad_times_or_authors_is_refused_before_anything_is_written(
    tmp_path: Path, clock: Clock, change: dict[str, object], message: str
) -> None:
    text, _ = _export(tmp_path, clock)
    doc = json.loads(text)
    doc["notes"][0] |= change
    with pytest.raises(Exception, match=message):
        parse_notebook(json.dumps(doc))


def test_an_export_without_times_is_imported_as_written_now_by_the_importer(tmp_path: Path, clock: Clock) -> None:
    doc = {"format": "hivenote-notebook", "version": 1, "notes": [{"id": "01OLD", "kind": "fact", "title": "Bare"}]}
    clock.set("2026-12-07T09:00")
    with Store(tmp_path / "target", now_ms=clock) as store:
        notebook = Notebook(store)
        _import(notebook, json.dumps(doc))
        note = notebook.get("01OLD")
        assert (note.created, note.created_by.agent, note.created_by.person) == (at("2026-12-07T09:00"), "cli", "me")


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=12)


@given(_TEXT, _TEXT, _TEXT, st.integers(0, 2**53), _TEXT, st.integers(0, 2**45))
def test_an_imported_ops_author_and_import_read_back_from_its_line(
    agent: str, client: str, person: str, imported_at: int, file: str, wall: int
) -> None:
    by = Author("cursor", "cursor 1", "ann", Imported(agent, client, person, imported_at, file))
    op = Op("laptop-7f3a", 3, wall, 0, "note.set", {"id": "01X", "fields": {"title": "t"}, "since": None}, by)
    line = op.encode()
    again = decode_op(line.rstrip(b"\n"))
    assert again.by == by and again.wall == wall
    assert json.loads(line)["by"]["imported"] == {
        "by": Author(agent, client, person).to_json(),
        "at": imported_at,
        "file": file,
    }


@pytest.mark.parametrize(
    "imported",
    [{"at": 1, "file": "x"}, {"by": {}, "at": -1, "file": "x"}, {"by": {"agent": 1}, "at": 1, "file": "x"}, "x"],
)
def test_a_damaged_import_record_makes_its_line_corrupt_not_the_fold(imported: object) -> None:
    line = {"v": 1, "node": "n-0001", "seq": 1, "hlc": [1, 0], "op": "note.set", "id": "01X"}
    line |= {"fields": {"title": "t"}, "by": {"agent": "cursor", "imported": imported}}
    with pytest.raises(CorruptLine, match="imported"):
        decode_op(json.dumps(line))


_STEPS = st.lists(
    st.tuples(st.sampled_from(["new", "edit", "trash", "restore"]), st.integers(0, 9), st.integers(0, 6 * 3600)),
    min_size=1,
    max_size=14,
)
_BOUND = st.none() | st.integers(0, 3 * 24 * 3600)


_EDITED_LATER = [("new", 0, 10), ("new", 0, 10), ("new", 0, 10), ("edit", 2, 100)]  # notes at 10, 20, 30 s; the third
# edited at 130 s


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_STEPS, _BOUND, _BOUND)
@example(_EDITED_LATER, None, 60)  # the third note is in the window by its creation alone, changed after it
@example(_EDITED_LATER, 20, None)  # the second note's only change is the window's start
@example(_EDITED_LATER, 10, 20)  # the first note's only change is the start, the second's the (excluded) end
def test_a_window_holds_exactly_the_notes_with_a_change_in_it(
    steps: list[tuple[str, int, int]], since_s: int | None, until_s: int | None
) -> None:
    """Whatever the writes and the window: a list, in the order of the unwindowed list, and a search hold the notes
    with a version in the window (`history`), in and out of the trash, and nothing else."""
    base = at("2026-12-01T00:00")
    clock = [base]
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "data", now_ms=lambda: clock[0]) as store:
        notebook = Notebook(store)
        made: list[str] = []
        for action, pick, step in steps:
            clock[0] += step * 1000
            if action == "new" or not made:
                made.append(notebook.remember(kind="fact", title=f"Note {len(made)} zebra").note.id)
            elif action == "edit":
                notebook.update(made[pick % len(made)], body=f"edit at {clock[0]}")
            else:
                getattr(notebook, "forget" if action == "trash" else "restore")(made[pick % len(made)])
            if step % 2:  # the order kept between lists, patched after writes (stale entries and all)
                notebook.list(limit=1)
            if step % 3 == 0:  # a window with an end: the edited notes found, then kept up to date
                notebook.list(Filters(window=Window(None, base + 3_600_000)), limit=1)
        since = None if since_s is None else base + since_s * 1000
        until = None if until_s is None else base + until_s * 1000
        if since is not None and until is not None and since >= until:
            return
        span = Window(since, until)
        for trashed in (False, True):
            everything = [n.id for n in notebook.list(Filters(trashed=trashed), limit=200)[0]]
            wanted = [i for i in everything if any(span.contains(v.at) for v in notebook.history(i))]
            listed, total = notebook.list(Filters(trashed=trashed, window=span), limit=200)
            assert [n.id for n in listed] == wanted and total == len(wanted)
            for offset in (1, 3):
                paged, _ = notebook.list(Filters(trashed=trashed, window=span), limit=2, offset=offset)
                assert [n.id for n in paged] == wanted[offset : offset + 2]
            found = notebook.search("zebra", Filters(trashed=trashed, window=span), 200)
            assert sorted(n.id for n in found.hits) == sorted(wanted) and found.total == len(wanted)
            # ranked as without the window, a page as a page of that (the window's notes ranked head first)
            ranked = [n.id for n in notebook.search("zebra", Filters(trashed=trashed), 200).hits if n.id in wanted]
            assert [n.id for n in found.hits] == ranked
            assert [n.id for n in notebook.search("zebra", Filters(trashed=trashed, window=span), 2).hits] == ranked[:2]
