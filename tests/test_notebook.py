"""Notebook use-cases: validation with clear errors that change nothing, partial updates, trash, history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hivenote.server.core.errors import InvalidInput, NoteNotFound
from hivenote.server.core.listing import Filters
from hivenote.server.core.model import Author, Entity, Relation
from hivenote.server.graph import Graph
from hivenote.server.notebook import MAX_BODY_BYTES, Notebook
from hivenote.server.storage.store import Store


def log_size(store: Store) -> int:
    assert store.shard_path is not None
    return store.shard_path.stat().st_size if store.shard_path.exists() else 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "opinion"}, "kind must be one of fact, decision, preference, project"),
        ({"title": ""}, "title is required"),
        ({"title": "x" * 201}, "keep it to 200"),
        ({"title": "line\nbreak"}, "control character U+000A"),
        ({"body": "x" * (MAX_BODY_BYTES + 1)}, "the limit is 65536"),
        ({"body": "bell\x07"}, "control character U+0007"),
        ({"body": "lone \ud800 surrogate"}, "unpaired surrogate"),
        ({"tags": [f"t{i}" for i in range(21)]}, "at most 20"),
        ({"tags": [""]}, "non-empty label"),
        ({"project": "/home/me/shop-api"}, "use 'shop-api' instead of '/home/me/shop-api'"),
        ({"project": "./shop-api"}, "not a file path"),
        ({"project": "C:\\code\\shop-api"}, "use 'shop-api'"),
        ({"project": "~/code/api"}, "use 'api'"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message_and_writes_nothing(
    store: Store, fields: dict[str, object], message: str
) -> None:
    notebook = Notebook(store)
    args: dict[str, object] = {"kind": "fact", "title": "ok", **fields}
    before = log_size(store)
    with pytest.raises(InvalidInput, match=re.escape(message)):
        notebook.remember(**args)  # type: ignore[arg-type]
    assert log_size(store) == before
    assert list(store.state.iter_notes()) == []


def test_unicode_is_kept_exactly(store: Store) -> None:
    notebook = Notebook(store)
    title = "Café \u0301 ﬁ 🐝 𝔘𝔫𝔦"  # noqa: RUF001 - combining mark, ligature, astral plane: kept as is
    body = "Zeile 1\r\nZeile 2\tmit Tab\n\u200b"
    note = notebook.remember(kind="fact", title=title, body=body).note
    assert (note.title, note.body) == (title, body)
    with Store(store.data_dir, readonly=True) as again:
        reread = again.state.note(note.id)
        assert reread is not None and (reread.title, reread.body) == (title, body)


def test_limits_are_inclusive(store: Store) -> None:
    notebook = Notebook(store)
    note = notebook.remember(
        kind="fact", title="x" * 200, body="é" * (MAX_BODY_BYTES // 2), tags=[f"t{i}" for i in range(20)]
    ).note
    assert len(note.tags) == 20


def test_update_changes_only_the_named_fields_and_a_no_op_writes_nothing(store: Store) -> None:
    notebook = Notebook(store)
    note = notebook.remember(kind="decision", title="t", body="b", tags=["a"], project="shop-api").note
    updated = notebook.update(note.id, body="b2")
    assert (updated.title, updated.body, updated.tags, updated.project) == ("t", "b2", ("a",), "shop-api")
    before = log_size(store)
    same = notebook.update(note.id, body="b2", title="t")
    assert log_size(store) == before and same == updated
    cleared = notebook.update(note.id, project="", tags=[])
    assert (cleared.project, cleared.tags) == (None, ())
    with pytest.raises(InvalidInput, match="nothing to update"):
        notebook.update(note.id)


def test_update_of_an_unknown_note_says_how_to_find_one(store: Store) -> None:
    with pytest.raises(NoteNotFound, match="Search or list notes"):
        Notebook(store).update("01NOPE", title="x")


def test_ids_resolve_from_a_unique_prefix(store: Store) -> None:
    notebook = Notebook(store)
    note = notebook.remember(kind="fact", title="prefix me").note
    assert notebook.get(note.id[:12].lower()).id == note.id
    with pytest.raises(NoteNotFound):
        notebook.get(note.id[:3])


def test_a_whole_id_resolves_in_any_case_and_a_prefix_must_be_unique_after_a_start_from_the_op_cache(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with Store(data) as store:
        ids = [Notebook(store).remember(kind="fact", title=f"note {i}").note.id for i in range(3)]
    for start in ("log", "op cache"):  # the second start folds from the cache the first one wrote
        with Store(data) as store:
            notebook = Notebook(store)
            assert [notebook.get(i.lower()).id for i in ids] == ids, start
            assert notebook.get(ids[1][:20]).id == ids[1], start
            shared = ids[0][:6]  # the top of the time they were made: the same unless a 262 s boundary fell between
            if all(i.startswith(shared) for i in ids):
                with pytest.raises(NoteNotFound, match="start with it"):
                    notebook.get(shared)
            with pytest.raises(NoteNotFound):  # as long as an id, and no note's: nothing else can start with it
                notebook.get("0" * len(ids[0]))
            with pytest.raises(NoteNotFound):  # longer than any id
                notebook.get(ids[0] + "X")


def test_forget_restore_purge_follow_the_trash(store: Store) -> None:
    notebook = Notebook(store)
    note = notebook.remember(kind="fact", title="temporary").note
    with pytest.raises(InvalidInput, match="not in the trash; forget it first"):
        notebook.purge(note.id)
    assert notebook.forget(note.id).trashed
    assert notebook.search("temporary").hits == []
    assert [n.id for n in notebook.list(Filters(trashed=True))[0]] == [note.id]
    assert not notebook.restore(note.id).trashed
    assert [n.id for n in notebook.search("temporary").hits] == [note.id]
    notebook.forget(note.id)
    assert notebook.purge(note.id) == note.id
    with pytest.raises(NoteNotFound):
        notebook.get(note.id)
    assert notebook.list(Filters(trashed=True))[0] == []


def test_forget_twice_and_restore_of_a_live_note_change_nothing(store: Store) -> None:
    notebook = Notebook(store)
    note = notebook.remember(kind="fact", title="x").note
    notebook.forget(note.id)
    size = log_size(store)
    notebook.forget(note.id)
    notebook.restore(note.id)
    notebook.restore(note.id)
    assert log_size(store) > size  # only the first restore wrote
    assert len(notebook.history(note.id)) == 3


def test_history_records_every_version_with_its_author(store: Store) -> None:
    notebook = Notebook(store)
    ana = Author(agent="cursor", client="cursor-vscode 1.7", person="ana")
    note = notebook.remember(kind="decision", title="Use Drizzle", by=ana).note
    claude = Author(agent="claude-code", client="claude-code 2.1")
    notebook.update(note.id, title="Use Drizzle, not Prisma", by=claude)
    notebook.forget(note.id, by=claude)
    versions = notebook.history(note.id)
    assert [(v.action, v.by.agent) for v in versions] == [
        ("set", "cursor"),
        ("set", "claude-code"),
        ("trash", "claude-code"),
    ]
    assert versions[1].fields == {"title": "Use Drizzle, not Prisma"}
    final = notebook.get(note.id)
    assert (final.created_by.person, final.updated_by.agent, final.created_on) == ("ana", "claude-code", store.node)


def test_remember_hints_at_notes_that_look_like_the_same_fact(store: Store) -> None:
    notebook = Notebook(store)
    first = notebook.remember(
        kind="decision", title="Use Drizzle, not Prisma", body="Prisma was slow in cold starts", project="shop-api"
    ).note
    again = notebook.remember(kind="decision", title="Use Drizzle not Prisma for the ORM", project="shop-api")
    assert [n.id for n in again.similar] == [first.id]
    elsewhere = notebook.remember(kind="decision", title="Use Drizzle, not Prisma", project="other-app")
    assert elsewhere.similar == []
    unrelated = notebook.remember(kind="decision", title="Deploy on Fridays is forbidden", project="shop-api")
    assert unrelated.similar == []


def test_counts_split_live_and_trashed_notes(store: Store) -> None:
    notebook = Notebook(store)
    a = notebook.remember(kind="fact", title="a").note
    notebook.remember(kind="fact", title="b")
    notebook.forget(a.id)
    assert notebook.counts() == {"notes": 1, "trashed": 1, "entities": 0, "relations": 0}


def test_counts_of_the_graph_make_no_entity(store: Store) -> None:
    """The status counts were the length of the whole graph, made and kept (every entity with its observations) by a
    status poll after each write: now counted from the live entities' order and relations."""
    graph = Graph(store)
    graph.create_entities([Entity(f"e{i}", "thing", (f"obs {i}",)) for i in range(5)])
    graph.create_relations([Relation("e0", "e1", "knows"), Relation("e1", "e2", "knows")])
    graph.delete_entities(["e4"])
    graph.delete_relations([Relation("e1", "e2", "knows")])
    counts = Notebook(store).counts()
    assert store.state._graph_cache is None  # no entity made
    entities, relations = graph.read_graph()
    assert (counts["entities"], counts["relations"]) == (len(entities), len(relations)) == (4, 1)
