"""Hostile text at the notebook's and the graph's doors (issue 14, item 14): direction controls that make a title
read otherwise than it says (U+202E RIGHT-TO-LEFT OVERRIDE and its kin) are refused, saying which character and what
to do; observations, entity names and types have a stated size limit (one import wrote a 50 MB line), in the graph
tools and in imports alike, and the official server's behaviour for ordinary sizes is unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from hivenote.server.core.errors import ImportRejected, InvalidInput
from hivenote.server.core.model import Author, Entity, Relation
from hivenote.server.graph import MAX_NAME_BYTES, MAX_OBSERVATION_BYTES, Graph
from hivenote.server.notebook import Notebook
from hivenote.server.storage.store import Store
from hivenote.server.transfer import parse_memory_jsonl, parse_notebook
from tests.support.live import mcp_client, serve

ME = Author("cli", "hivenote-cli", "")
OVERRIDES = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "data") as opened:
        yield opened


@pytest.mark.parametrize("char", OVERRIDES)
def test_a_title_with_a_direction_control_is_refused_naming_it(store: Store, char: str) -> None:
    notebook = Notebook(store)
    with pytest.raises(InvalidInput, match=rf"title contains U\+{ord(char):04X} \(.*\).*remove it") as refused:
        notebook.remember(kind="fact", title=f"invoice{char}fdp.exe", body="", by=ME)
    assert "direction" in str(refused.value)
    note = notebook.remember(kind="fact", title="plain", body="", by=ME).note
    with pytest.raises(InvalidInput, match=rf"U\+{ord(char):04X}"):
        notebook.update(note.id, title=f"plain{char}", by=ME)
    assert [n.title for n in notebook.list()[0]] == ["plain"]


def test_tags_and_project_refuse_direction_controls_and_right_to_left_text_still_works(store: Store) -> None:
    notebook = Notebook(store)
    with pytest.raises(InvalidInput, match=r"tag contains U\+202E"):
        notebook.remember(kind="fact", title="t", body="", tags=["ok", "a\u202eb"], by=ME)
    with pytest.raises(InvalidInput, match=r"project contains U\+2067"):
        notebook.remember(kind="fact", title="t", body="", project="shop\u2067api", by=ME)
    # Hebrew and Arabic, with the marks such text uses (LRM, RLM, ALM), are ordinary titles.
    title = "\u05e9\u05dc\u05d5\u05dd \u200f(v2)\u200e \u0645\u0631\u062d\u0628\u0627\u061c"
    assert notebook.remember(kind="fact", title=title, body="\u202e in a body is kept", by=ME).note.title == title


def test_an_imported_note_with_a_direction_control_is_refused_with_its_number() -> None:
    doc = {"format": "hivenote-notebook", "notes": [{"id": "01J", "kind": "fact", "title": "x\u202ey"}]}
    with pytest.raises(ImportRejected, match=r"note 1: title contains U\+202E"):
        parse_notebook(json.dumps(doc))


def test_an_observation_past_the_limit_is_refused_saying_the_limit(store: Store) -> None:
    graph = Graph(store)
    big = "x" * (MAX_OBSERVATION_BYTES + 1)
    with pytest.raises(InvalidInput, match=rf"{MAX_OBSERVATION_BYTES + 1} bytes.*limit is {MAX_OBSERVATION_BYTES}"):
        graph.create_entities([Entity("a", "thing", ("fine", big))], by=ME)
    assert graph.create_entities([Entity("a", "thing", ("x" * MAX_OBSERVATION_BYTES,))], by=ME)
    with pytest.raises(InvalidInput, match="observation 2 of 'a'"):
        graph.add_observations([("a", ["fine", big])], by=ME)
    with pytest.raises(InvalidInput, match=rf"entity name is {MAX_NAME_BYTES + 1} bytes"):
        graph.create_entities([Entity("n" * (MAX_NAME_BYTES + 1), "thing", ())], by=ME)
    with pytest.raises(InvalidInput, match="entity type"):
        graph.create_entities([Entity("b", "t" * (MAX_NAME_BYTES + 1), ())], by=ME)
    with pytest.raises(InvalidInput, match="relation type"):
        graph.create_relations([Relation("a", "b", "r" * (MAX_NAME_BYTES + 1))], by=ME)
    entities, _ = graph.read_graph()
    assert [(e.name, len(e.observations[0])) for e in entities] == [("a", MAX_OBSERVATION_BYTES)]  # nothing else


def test_an_import_with_a_huge_observation_is_refused_with_its_line_and_the_limit() -> None:
    lines = [
        json.dumps({"type": "entity", "name": "ok", "entityType": "t", "observations": ["small"]}),
        json.dumps({"type": "entity", "name": "big", "entityType": "t", "observations": ["y" * (1 << 20)]}),
    ]
    with pytest.raises(ImportRejected, match=rf"line 2: .*{1 << 20} bytes.*limit is {MAX_OBSERVATION_BYTES}"):
        parse_memory_jsonl("\n".join(lines))
    entities, _, bad = parse_memory_jsonl("\n".join(lines), skip_bad=True)
    assert [e.name for e in entities] == ["ok"] and [n for n, _ in bad] == [2]


def test_the_graph_tool_says_the_limit_to_the_agent(tmp_path: Path) -> None:
    async def main() -> None:
        with serve(tmp_path / "data") as running:
            async with mcp_client(running, path="/mcp/graph") as client:
                entity = {"name": "a", "entityType": "t", "observations": ["z" * (MAX_OBSERVATION_BYTES + 1)]}
                result = await client.call_tool("create_entities", {"entities": [entity]})
                assert result.is_error
                text = result.content[0].text  # type: ignore[union-attr]
                assert f"limit is {MAX_OBSERVATION_BYTES}" in text and "nothing was saved" in text.lower(), text

    anyio.run(main)
