"""Import and export: the official memory.jsonl byte for byte (checked against the recorded official server's
file), the notebook document, format detection, the CLI commands, and round trips as properties."""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.cli.main import main
from hivenote.server.core.errors import EntityNotFound, ImportRejected, InvalidInput
from hivenote.server.core.model import Author, Entity, Note, Relation
from hivenote.server.graph import Graph
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.transfer import (
    ImportSummary,
    detect_format,
    export_memory_jsonl,
    export_notebook,
    import_graph,
    import_notes,
    parse_memory_jsonl,
    parse_notebook,
)
from tests.support.official import Exchange, FileContents, Transcript, answer, call_tool, compact, load_transcript

IMPORTER = Author(agent="import", client="tests")

# Written by hand in the official format (what JavaScript's JSON.stringify writes): quotes, backslashes, control
# characters as \t / \n / \u0001, non-ASCII and U+2028 raw; in-file duplicate entities, observations and relations.
TRICKY = "\n".join(
    [
        r'{"type":"entity","name":"Zoë \"Z\" O\\Brien","entityType":"person","observations":["naïve ☕","tab\there",'
        r'"two\nlines","ctrl \u0001 char","☕","☕"]}',
        r'{"type":"entity","name":"Dup","entityType":"a","observations":[]}',
        r'{"type":"entity","name":"Dup","entityType":"b","observations":["x","x"]}',
        '{"type":"entity","name":"東京","entityType":"city","observations":["line\u2028separator 🎉"]}',
        r'{"type":"entity","name":"","entityType":"","observations":[""]}',
        r'{"type":"relation","from":"Zoë \"Z\" O\\Brien","to":"東京","relationType":"lives_in"}',
        r'{"type":"relation","from":"Dup","to":"Nobody","relationType":"ghost_of"}',
        r'{"type":"relation","from":"Dup","to":"Nobody","relationType":"ghost_of"}',
        r'{"type":"relation","from":"Dup","to":"Dup","relationType":"self"}',
    ]
)
GOOD = '{"type":"entity","name":"Alice","entityType":"person","observations":["Likes TEA"]}'
GOOD_RELATION = '{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}'


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return load_transcript()


def _export(store: Store) -> str:
    with store.reading() as state:
        return export_memory_jsonl(*state.graph())


def _import_jsonl(store: Store, text: str, *, skip_bad: bool = False) -> ImportSummary:
    entities, relations, bad = parse_memory_jsonl(text, skip_bad=skip_bad)
    summary = ImportSummary("memory-jsonl", rejected=bad)
    import_graph(Graph(store), entities, relations, summary, by=IMPORTER)
    return summary


def _counts(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary with zero counts left out (relations are counted even when none were added or skipped)."""
    return {k: {n: c for n, c in v.items() if c} if k in ("added", "skipped") else v for k, v in summary.items()}


def _shard(store: Store) -> bytes:
    assert store.shard_path is not None
    return store.shard_path.read_bytes() if store.shard_path.exists() else b""


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _graph_at(data_dir: Path) -> tuple[list[Entity], list[Relation]]:
    with Store(data_dir, readonly=True) as store:
        return Graph(store).read_graph()


# -- memory.jsonl export against the official server ---------------------------------------------------


def test_export_after_every_recorded_step_is_the_official_file_byte_for_byte(
    store: Store, transcript: Transcript
) -> None:
    graph = Graph(store)
    checked = 0
    for step in transcript.steps:
        if isinstance(step, Exchange):
            if step.is_error:
                with pytest.raises(EntityNotFound):
                    call_tool(graph, step.tool, step.arguments)
            else:
                answer(graph, step)
            continue
        assert isinstance(step, FileContents)
        # No file yet is the official server's empty graph; it writes "" for one (entities and relations joined).
        assert _export(store) == (step.content or ""), step.label
        checked += 1
    assert checked == 4


def test_the_official_files_import_into_an_empty_store_and_export_unchanged(
    tmp_path: Path, transcript: Transcript
) -> None:
    files = [f.content for f in transcript.files if f.content]
    assert len(files) == 3
    for number, content in enumerate(files):
        with Store(tmp_path / str(number)) as store:
            _import_jsonl(store, content)
            assert _export(store) == content


def test_a_file_with_escapes_unicode_and_duplicates_round_trips_byte_for_byte(store: Store) -> None:
    summary = _import_jsonl(store, TRICKY)
    assert _export(store) == TRICKY
    assert not TRICKY.endswith("\n")
    assert _counts(summary.to_json()) == {
        "format": "memory-jsonl",
        "added": {"entities": 5, "observations": 10, "relations": 4},
        "skipped": {},
        "rejected": [],
    }
    entities, relations = Graph(store).read_graph()
    assert entities[0] == Entity(
        'Zoë "Z" O\\Brien', "person", ("naïve ☕", "tab\there", "two\nlines", "ctrl \x01 char", "☕", "☕")
    )
    assert [e.entityType for e in entities if e.name == "Dup"] == ["a", "b"]
    assert relations.count(Relation("Dup", "Nobody", "ghost_of")) == 2


def test_export_writes_raw_non_ascii_and_javascript_escapes(store: Store) -> None:
    Graph(store).create_entities([Entity("Ünï", "t\x7f", ('q"b\\s\x08\x0c\r\x1f', "\u2028 😀"))])
    assert _export(store) == (
        '{"type":"entity","name":"Ünï","entityType":"t\x7f","observations":["q\\"b\\\\s\\b\\f\\r\\u001f","\u2028 😀"]}'
    )


def test_importing_the_same_file_twice_changes_nothing(store: Store) -> None:
    _import_jsonl(store, TRICKY)
    before, shard = Graph(store).read_graph(), _shard(store)
    again = _import_jsonl(store, TRICKY)
    assert Graph(store).read_graph() == before
    assert _shard(store) == shard  # not even a no-op line was written
    assert _counts(again.to_json()) == {
        "format": "memory-jsonl",
        "added": {},
        "skipped": {"entities": 5, "relations": 4},
        "rejected": [],
    }


def test_importing_into_a_graph_adds_only_what_is_missing(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ("Likes TEA",))])
    summary = _import_jsonl(
        store,
        '{"type":"entity","name":"Alice","entityType":"robot","observations":["Likes TEA","Plays chess"]}\n'
        + GOOD_RELATION,
    )
    assert graph.read_graph() == (
        [Entity("Alice", "person", ("Likes TEA", "Plays chess"))],
        [Relation("Alice", "Bob", "knows")],
    )
    assert (+summary.added, +summary.skipped) == (
        {"observations": 1, "relations": 1},
        {"entities": 1},
    )


def test_a_big_file_with_a_duplicate_name_far_apart_round_trips(store: Store) -> None:
    lines = [f'{{"type":"entity","name":"E{i}","entityType":"t","observations":[]}}' for i in range(600)]
    lines[0] = lines[599] = '{"type":"entity","name":"Dup","entityType":"t","observations":["o"]}'
    text = "\n".join(lines)
    _import_jsonl(store, text)
    assert _export(store) == text


def test_a_big_file_with_a_duplicate_relation_far_apart_round_trips(store: Store) -> None:
    lines = [f'{{"type":"relation","from":"A","to":"X{i}","relationType":"r"}}' for i in range(600)]
    lines[0] = lines[599] = GOOD_RELATION
    text = "\n".join(lines)
    _import_jsonl(store, text)
    assert _export(store) == text


# -- bad lines -----------------------------------------------------------------------------------------

BAD_LINES = {
    "invalid JSON": ('{"type":"entity","name":"B",', "not valid JSON"),
    "wrong type": ('{"type":"node","name":"B","entityType":"t","observations":[]}', "'type' must be"),
    "no type": ('{"name":"B","entityType":"t","observations":[]}', "'type' must be"),
    "missing entityType": ('{"type":"entity","name":"B","observations":[]}', "'entityType'"),
    "observation not a string": ('{"type":"entity","name":"B","entityType":"t","observations":[1]}', "observations"),
    "missing to": ('{"type":"relation","from":"A","relationType":"r"}', "'to'"),
    "not an object": ('["entity","B"]', "not a JSON object"),
}


@pytest.mark.parametrize(("line", "reason"), list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_line_is_reported_with_its_number(line: str, reason: str) -> None:
    with pytest.raises(ImportRejected) as raised:
        parse_memory_jsonl("\n".join([GOOD, "", line, GOOD_RELATION]))
    assert raised.value.line == 3
    assert reason in raised.value.reason
    assert str(raised.value).startswith(f"line 3: {raised.value.reason}. Nothing was imported")


@pytest.mark.parametrize(("line", "reason"), list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_bad_line_imports_nothing_through_the_cli(tmp_path: Path, line: str, reason: str) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text("\n".join([GOOD, GOOD_RELATION, line]), encoding="utf-8")
    code, out, err = _cli("--data-dir", str(tmp_path / "data"), "import", str(source))
    assert (code, out) == (1, "")
    assert err.startswith("hivenote: line 3: ") and reason in err
    assert _graph_at(tmp_path / "data") == ([], [])


def test_skip_bad_imports_the_good_lines_and_lists_the_bad_ones(store: Store) -> None:
    text = "\n".join([GOOD, BAD_LINES["invalid JSON"][0], GOOD_RELATION, "", BAD_LINES["missing to"][0]])
    summary = _import_jsonl(store, text, skip_bad=True)
    assert [line for line, _ in summary.rejected] == [2, 5]
    assert "not valid JSON" in summary.rejected[0][1] and "'to'" in summary.rejected[1][1]
    assert Graph(store).read_graph() == (
        [Entity("Alice", "person", ("Likes TEA",))],
        [Relation("Alice", "Bob", "knows")],
    )


def test_blank_lines_are_ignored_but_still_counted(store: Store) -> None:
    text = f"\n\n{GOOD}\n   \n\t\n{GOOD_RELATION}\n\n"
    _import_jsonl(store, text)
    assert _export(store) == f"{GOOD}\n{GOOD_RELATION}"
    with pytest.raises(ImportRejected) as raised:
        parse_memory_jsonl(text + "oops")
    assert raised.value.line == 8


def test_the_line_that_breaks_the_official_server_is_rejected_with_its_number(transcript: Transcript) -> None:
    case = transcript.appendix[1]
    assert case.title.startswith("a malformed line in the JSONL file")
    (response,) = case.responses.values()
    message = response["result"]["content"][0]["text"]
    # The official server fails every later call with JSON.parse's message, which quotes the line.
    found = re.search(r'"(.*)" is not valid JSON', message)
    assert found is not None
    with pytest.raises(ImportRejected) as raised:
        parse_memory_jsonl(f"{GOOD}\n{found.group(1)}\n{GOOD_RELATION}")
    assert raised.value.line == 2


def test_an_entity_with_a_lone_surrogate_is_rejected_with_its_line_number(tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(
        GOOD + '\n{"type":"entity","name":"B\\ud83d","entityType":"t","observations":[]}', encoding="utf-8"
    )
    code, _, err = _cli("--data-dir", str(tmp_path / "data"), "import", str(source))
    assert code == 1 and "line 2" in err
    assert _graph_at(tmp_path / "data") == ([], [])


def test_a_relation_with_a_lone_surrogate_imports_nothing(tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text(GOOD + '\n{"type":"relation","from":"A","to":"B\\udc00","relationType":"r"}', encoding="utf-8")
    code, _, err = _cli("--data-dir", str(tmp_path / "data"), "import", str(source))
    assert code == 1 and "line 2" in err
    assert _graph_at(tmp_path / "data") == ([], [])


# -- the notebook document -----------------------------------------------------------------------------


def _fill_notebook(store: Store) -> None:
    notebook = Notebook(store)
    notebook.remember(
        kind="decision",
        title="Use Drizzle, not Prisma",
        body='Prisma\'s client was too slow.\n\tCold starts ☕ "quoted" back\\slash',
        tags=["db", "orm"],
        project="shop-api",
    )
    notebook.remember(kind="fact", title="Ünïcode title 東京", tags=["i18n"])
    trashed = notebook.remember(kind="preference", title="Tabs, not spaces").note
    notebook.forget(trashed.id)
    purged = notebook.remember(kind="fact", title="Gone for good").note
    notebook.forget(purged.id)
    notebook.purge(purged.id)
    edited = notebook.remember(kind="project", title="Old title", project="shop-api").note
    notebook.update(edited.id, title="New title", tags=["renamed"], project="")
    restored = notebook.remember(kind="fact", title="Back from the trash").note
    notebook.forget(restored.id)
    notebook.restore(restored.id)
    notebook.remember(kind="decision", title="Spaces after all", replaces=trashed.id)
    _import_jsonl(store, TRICKY)


def _notes(store: Store) -> dict[str, tuple[Any, ...]]:
    with store.reading() as state:
        notes: list[Note] = list(state.iter_notes())
    return {n.id: (n.kind, n.title, n.body, n.tags, n.project, n.trashed, n.replaces) for n in notes}


def _notebook_text(store: Store) -> str:
    with store.reading() as state:
        return json.dumps(export_notebook(state, node=store.node, now_ms=1_764_495_000_000), indent=2)


def _import_notebook(store: Store, text: str, *, skip_bad: bool = False) -> ImportSummary:
    notes, entities, relations, bad = parse_notebook(text, skip_bad=skip_bad)
    summary = ImportSummary("notebook", rejected=bad)
    import_notes(Notebook(store), notes, summary, by=IMPORTER)
    import_graph(Graph(store), entities, relations, summary, by=IMPORTER)
    return summary


def test_a_notebook_export_imported_into_a_fresh_store_reproduces_every_note_and_the_graph(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as source:
        _fill_notebook(source)
        text, notes, graph = _notebook_text(source), _notes(source), Graph(source).read_graph()
    doc = json.loads(text)
    assert (doc["format"], doc["version"], doc["exported_at"]) == ("hivenote-notebook", 1, 1_764_495_000_000)
    assert len(notes) == 6 and sum(1 for n in notes.values() if n[5]) == 1
    assert sum(1 for n in notes.values() if n[6]) == 1  # the replaces link travels in the export
    with Store(tmp_path / "b") as target:
        summary = _import_notebook(target, text)
        assert _notes(target) == notes
        assert Graph(target).read_graph() == graph
        assert _export(target) == TRICKY
    assert (summary.added["notes"], summary.added["entities"], summary.added["relations"]) == (6, 5, 4)


def test_importing_a_notebook_twice_adds_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as source:
        _fill_notebook(source)
        text = _notebook_text(source)
    with Store(tmp_path / "b") as target:
        _import_notebook(target, text)
        notes, graph, shard = _notes(target), Graph(target).read_graph(), _shard(target)
        again = _import_notebook(target, text)
        assert (_notes(target), Graph(target).read_graph(), _shard(target)) == (notes, graph, shard)
    assert +again.added == {}
    assert +again.skipped == {"notes": 6, "entities": 5, "relations": 4}


def _notebook_with(notes: list[Any]) -> str:
    return json.dumps({"format": "hivenote-notebook", "version": 1, "notes": notes, "graph": {"entities": []}})


def _note(title: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"ID-{title}", "kind": "fact", "title": title, "body": "", "tags": [], "project": None, **fields}


BAD_NOTES = {
    "unknown kind": (_note("c", kind="memo"), "kind must be one of"),
    "empty title": (_note(" "), "title is required"),
    "path as project": (_note("c", project="/home/me/shop-api"), "not a file path"),
    "no id": ({"kind": "fact", "title": "c"}, "needs an 'id'"),
    "not an object": ("just text", "must be a JSON object"),
}


@pytest.mark.parametrize(("bad", "reason"), list(BAD_NOTES.values()), ids=list(BAD_NOTES))
def test_a_bad_note_rejects_the_whole_notebook_with_its_number(tmp_path: Path, bad: Any, reason: str) -> None:
    source = tmp_path / "backup.json"
    source.write_text(_notebook_with([_note("a"), _note("b"), bad, _note("d")]), encoding="utf-8")
    with pytest.raises(ImportRejected) as raised:
        parse_notebook(source.read_text(encoding="utf-8"))
    assert raised.value.line == 3 and str(raised.value).startswith("note 3: ") and reason in raised.value.reason
    code, _, err = _cli("--data-dir", str(tmp_path / "data"), "import", str(source))
    assert code == 1 and "note 3: " in err
    with Store(tmp_path / "data", readonly=True) as store:
        assert _notes(store) == {}


def test_skip_bad_imports_the_other_notes_and_lists_the_bad_one(tmp_path: Path) -> None:
    source = tmp_path / "backup.json"
    source.write_text(_notebook_with([_note("a"), _note("b", kind="memo"), _note("c")]), encoding="utf-8")
    code, out, _ = _cli("--data-dir", str(tmp_path / "data"), "--json", "import", str(source), "--skip-bad")
    assert code == 0
    summary = json.loads(out)
    assert summary["added"] == {"notes": 2}
    assert [r["line"] for r in summary["rejected"]] == [2]
    with Store(tmp_path / "data", readonly=True) as store:
        assert sorted(t for _, t, *_ in _notes(store).values()) == ["a", "c"]


def test_a_notebook_that_is_not_valid_json_is_rejected_at_its_line() -> None:
    with pytest.raises(ImportRejected) as raised:
        parse_notebook('{\n  "format": "hivenote-notebook",\n  "notes": [,]\n}')
    assert raised.value.line == 3


# -- format detection ----------------------------------------------------------------------------------


def test_the_format_is_told_from_the_content(store: Store) -> None:
    _fill_notebook(store)
    assert detect_format(TRICKY) == "memory-jsonl"
    assert detect_format(f"\n\n{GOOD_RELATION}") == "memory-jsonl"
    assert detect_format("") == "memory-jsonl"
    assert detect_format(_notebook_text(store)) == "notebook"
    assert detect_format(json.dumps(json.loads(_notebook_text(store)))) == "notebook"


@pytest.mark.parametrize("garbage", ["hello world", "[1, 2, 3]", "42", "<html></html>"])
def test_garbage_is_refused_with_a_hint_to_pass_the_format(garbage: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        detect_format(garbage)
    assert "cannot tell the file's format" in str(raised.value) and "--format" in str(raised.value)


@pytest.mark.parametrize("first", [BAD_LINES["no type"][0], BAD_LINES["wrong type"][0]], ids=["no type", "wrong type"])
def test_a_memory_file_with_a_bad_first_line_is_still_read_as_memory_jsonl(tmp_path: Path, first: str) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text("\n".join([first, GOOD, GOOD_RELATION]), encoding="utf-8")
    code, _, err = _cli("--data-dir", str(tmp_path / "data"), "import", str(source))
    assert code == 1 and err.startswith("hivenote: line 1: ")
    code, _, _ = _cli("--data-dir", str(tmp_path / "data"), "import", str(source), "--skip-bad")
    assert code == 0
    assert _graph_at(tmp_path / "data") == (
        [Entity("Alice", "person", ("Likes TEA",))],
        [Relation("Alice", "Bob", "knows")],
    )


# -- the CLI ---------------------------------------------------------------------------------------------


def test_cli_import_then_export_gives_back_the_same_memory_file(tmp_path: Path) -> None:
    source, target, data = tmp_path / "memory.jsonl", tmp_path / "out.jsonl", str(tmp_path / "data")
    source.write_text(TRICKY, encoding="utf-8", newline="")
    code, out, err = _cli("--data-dir", data, "import", str(source))
    assert (code, err) == (0, "")
    assert out == "Imported memory.jsonl (memory-jsonl): added 5 entities, 10 observations, 4 relations\n"
    code, out, _ = _cli("--data-dir", data, "export", str(target))
    assert code == 0 and out == f"Exported 5 entities, 4 relations to {target} (memory-jsonl).\n"
    assert target.read_bytes() == TRICKY.encode("utf-8")
    code, out, _ = _cli("--data-dir", data, "export", "-", "--format", "memory-jsonl")
    assert (code, out) == (0, TRICKY)


def test_cli_import_twice_reports_everything_as_already_present(tmp_path: Path) -> None:
    source, data = tmp_path / "memory.jsonl", str(tmp_path / "data")
    source.write_text(TRICKY, encoding="utf-8")
    assert _cli("--data-dir", data, "import", str(source))[0] == 0
    code, out, _ = _cli("--data-dir", data, "import", str(source), "--json")
    assert code == 0
    assert _counts(json.loads(out)) == {
        "format": "memory-jsonl",
        "added": {},
        "skipped": {"entities": 5, "relations": 4},
        "rejected": [],
    }
    code, out, _ = _cli("--data-dir", data, "import", str(source))
    assert out == "Imported memory.jsonl (memory-jsonl): added nothing new; already present: 5 entities, 4 relations\n"


def test_cli_skip_bad_reports_each_skipped_line(tmp_path: Path) -> None:
    source, data = tmp_path / "memory.jsonl", str(tmp_path / "data")
    source.write_text("\n".join([GOOD, "not json", GOOD_RELATION]), encoding="utf-8")
    code, out, _ = _cli("--data-dir", data, "import", str(source), "--skip-bad")
    assert code == 0
    assert out.splitlines()[0] == "Imported memory.jsonl (memory-jsonl): added 1 entities, 1 observations, 1 relations"
    assert out.splitlines()[1].startswith("skipped line 2: not valid JSON")
    code, out, _ = _cli("--data-dir", data, "--json", "import", str(source), "--skip-bad")
    assert [r["line"] for r in json.loads(out)["rejected"]] == [2]


def test_cli_notebook_export_and_import_move_the_whole_notebook(tmp_path: Path) -> None:
    with Store(tmp_path / "a") as source:
        _fill_notebook(source)
        notes = _notes(source)
    backup = tmp_path / "backup.json"
    code, out, _ = _cli("--data-dir", str(tmp_path / "a"), "export", str(backup))
    assert code == 0 and "(notebook)" in out
    text = backup.read_text(encoding="utf-8")
    assert text.endswith("}\n") and json.loads(text)["format"] == "hivenote-notebook"
    code, out, _ = _cli("--data-dir", str(tmp_path / "b"), "--json", "import", str(backup))
    assert code == 0 and json.loads(out)["added"] == {"notes": 6, "entities": 5, "observations": 10, "relations": 4}
    with Store(tmp_path / "b", readonly=True) as target:
        assert _notes(target) == notes
        assert _export(target) == TRICKY
    # The format flag wins over the file name.
    code, _, _ = _cli(
        "--data-dir", str(tmp_path / "b"), "export", str(tmp_path / "graph.txt"), "--format", "memory-jsonl"
    )
    assert code == 0 and (tmp_path / "graph.txt").read_text(encoding="utf-8") == TRICKY


def test_cli_format_flag_overrides_detection(tmp_path: Path) -> None:
    source, data = tmp_path / "memory.jsonl", str(tmp_path / "data")
    source.write_text(TRICKY, encoding="utf-8")
    code, _, err = _cli("--data-dir", data, "import", str(source), "--format", "notebook")
    assert code == 1 and "not valid JSON" in err
    assert _graph_at(tmp_path / "data") == ([], [])


def test_cli_refuses_a_file_that_is_not_utf8_and_writes_nothing(tmp_path: Path) -> None:
    source, data = tmp_path / "memory.jsonl", tmp_path / "data"
    source.write_bytes(GOOD.replace("Alice", "Al\xefce").encode("latin-1"))
    code, out, err = _cli("--data-dir", str(data), "import", str(source))
    assert (code, out) == (1, "")
    assert err.startswith(f"hivenote: {source} is not UTF-8 text (")
    assert not data.exists()


def test_cli_refuses_garbage_and_a_missing_file_with_a_clear_message(tmp_path: Path) -> None:
    source, data = tmp_path / "notes.txt", tmp_path / "data"
    source.write_text("just some notes\n", encoding="utf-8")
    code, _, err = _cli("--data-dir", str(data), "import", str(source))
    assert code == 1 and "cannot tell the file's format" in err and "--format" in err
    code, _, err = _cli("--data-dir", str(data), "import", str(tmp_path / "absent.jsonl"))
    assert code == 1 and err.startswith(f"hivenote: cannot read {tmp_path / 'absent.jsonl'}")
    assert not data.exists()


# -- round trips as properties -------------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)


@st.composite
def memory_files(draw: st.DrawFn) -> str:
    """An official-format file: entity lines, then relation lines, names drawn from a small pool so that
    duplicate entities, observations and relations are common."""
    names = draw(st.lists(_text, min_size=1, max_size=4))
    words = draw(st.lists(_text, min_size=1, max_size=4))
    pick_name, pick_word = st.sampled_from(names), st.sampled_from(words)
    entities = draw(
        st.lists(st.tuples(pick_name, pick_word, st.lists(pick_word, max_size=4)), max_size=6),
    )
    relations = draw(st.lists(st.tuples(pick_name, pick_name, pick_word), max_size=6))
    lines = [compact({"type": "entity", "name": n, "entityType": t, "observations": o}) for n, t, o in entities] + [
        compact({"type": "relation", "from": f, "to": t, "relationType": r}) for f, t, r in relations
    ]
    return "\n".join(lines)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_files())
def test_any_official_file_imports_into_an_empty_store_and_exports_unchanged(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "data") as store:
        _import_jsonl(store, text)
        assert _export(store) == text
        again = _import_jsonl(store, text)
        assert +again.added == {}
        assert _export(store) == text


_graph_calls = st.lists(
    st.one_of(
        st.tuples(st.just("entities"), st.lists(st.tuples(_text, _text, st.lists(_text, max_size=3)), max_size=3)),
        st.tuples(st.just("relations"), st.lists(st.tuples(_text, _text, _text), max_size=3)),
        st.tuples(st.just("observations"), st.lists(st.tuples(_text, st.lists(_text, max_size=3)), max_size=2)),
        st.tuples(st.just("delete"), st.lists(_text, max_size=2)),
    ),
    max_size=8,
)


def _build(graph: Graph, calls: list[tuple[str, Any]]) -> None:
    for kind, items in calls:
        if kind == "entities":
            graph.create_entities([Entity(n, t, tuple(o)) for n, t, o in items])
        elif kind == "relations":
            graph.create_relations([Relation(*r) for r in items])
        elif kind == "observations":
            # Only existing entities: an unknown one would fail the whole call, which is tested elsewhere.
            with graph.store.reading() as state:
                known = [(n, c) for n, c in items if state.occurrences(n)]
            graph.add_observations(known)
        else:
            graph.delete_entities(items)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_graph_exported_and_imported_into_a_fresh_store_exports_the_same_text(data: st.DataObject) -> None:
    pool = data.draw(st.lists(_text, min_size=1, max_size=3), label="pool")
    # Mostly names from a small pool, so creating, duplicating and deleting the same names is common.
    calls = data.draw(_graph_calls.map(lambda cs: _from_pool(cs, pool)), label="calls")
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "a") as first:
            _build(Graph(first), calls)
            text = _export(first)
        with Store(Path(tmp) / "b") as second:
            _import_jsonl(second, text)
            assert _export(second) == text


def _from_pool(calls: list[tuple[str, Any]], pool: list[str]) -> list[tuple[str, Any]]:
    """Map every drawn name onto the pool (by length), keeping types and observation texts as drawn."""

    def name(n: str) -> str:
        return pool[len(n) % len(pool)]

    out: list[tuple[str, Any]] = []
    for kind, items in calls:
        if kind == "entities":
            out.append((kind, [(name(n), t, o) for n, t, o in items]))
        elif kind == "relations":
            out.append((kind, [(name(f), name(t), r) for f, t, r in items]))
        elif kind == "observations":
            out.append((kind, [(name(n), c) for n, c in items]))
        else:
            out.append((kind, [name(n) for n in items]))
    return out


# One-line fields refuse control characters and the direction controls (U+202A-U+202E, U+2066-U+2069: notebook.py).
_DIRECTION_CONTROLS = "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))
_note_text = st.text(
    st.characters(exclude_categories=["Cc", "Cs"], exclude_characters=_DIRECTION_CONTROLS), min_size=1, max_size=30
).filter(str.strip)
_note_specs = st.lists(
    st.tuples(
        st.sampled_from(["fact", "decision", "preference", "project"]),
        _note_text,
        st.text(st.characters(exclude_categories=["Cs"]), max_size=60).map(
            lambda t: "".join(c for c in t if c in "\n\t\r" or not (c < " " or "\x7f" <= c <= "\x9f"))
        ),
        st.lists(_note_text.map(lambda t: t[:20]).filter(str.strip), max_size=3),
        st.one_of(st.none(), st.sampled_from(["shop-api", "Zoë", "auth svc"])),
        st.booleans(),
    ),
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_note_specs)
def test_any_notebook_round_trips_through_export_and_import(specs: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "a") as source:
            notebook = Notebook(source)
            for kind, title, body, tags, project, trashed in specs:
                note = notebook.remember(kind=kind, title=title, body=body, tags=tags, project=project).note
                if trashed:
                    notebook.forget(note.id)
            exported = json.dumps(export_notebook(source.state, node=source.node, now_ms=0))
            expected = _notes(source)
        notes, _, _, bad = parse_notebook(exported)
        assert bad == []
        with Store(Path(tmp) / "b") as target:
            summary = ImportSummary("notebook")
            import_notes(Notebook(target), notes, summary, by=Author(agent="import"))
            assert _notes(target) == expected
            again = ImportSummary("notebook")
            import_notes(Notebook(target), notes, again, by=Author(agent="import"))
            assert not again.added and again.skipped["notes"] == len(specs)
