"""The knowledge graph against the official memory server: the recorded transcript replayed through the Graph API
byte for byte, the official semantics the transcript does not show, and a model of the official server."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.core import graphsearch
from hivenote.server.core.errors import EntityNotFound, InvalidInput
from hivenote.server.core.model import Entity, Relation
from hivenote.server.graph import Graph, graph_json
from hivenote.server.storage.store import Store
from tests.support.official import (
    Exchange,
    Transcript,
    answer,
    call_tool,
    compact,
    load_transcript,
    transcript_path,
)

GraphJson = dict[str, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return load_transcript()


def _graph_of_file(content: str | None) -> GraphJson:
    """What the official server's file holds, in the read_graph shape (the `type` key dropped, as it does)."""
    graph: GraphJson = {"entities": [], "relations": []}
    for line in (content or "").split("\n"):
        if line.strip():
            item = json.loads(line)
            kind = item.pop("type")
            graph["entities" if kind == "entity" else "relations"].append(item)
    return graph


def _shard_bytes(store: Store) -> bytes:
    assert store.shard_path is not None
    return store.shard_path.read_bytes() if store.shard_path.exists() else b""


def _check_exchange(graph: Graph, exchange: Exchange) -> None:
    where = f"id {exchange.id} ({exchange.section})"
    if exchange.is_error:
        before, shard = graph.read_graph(), _shard_bytes(graph.store)
        with pytest.raises(EntityNotFound) as raised:
            call_tool(graph, exchange.tool, exchange.arguments)
        assert str(raised.value) == exchange.text, where
        assert graph.read_graph() == before, where
        assert _shard_bytes(graph.store) == shard, where
        return
    ours = answer(graph, exchange)
    if exchange.method == "tools/call":
        assert ours["content"][0]["text"] == exchange.text, where
        assert compact(ours["structuredContent"]) == compact(exchange.result["structuredContent"]), where
    else:
        assert ours["contents"][0]["text"] == exchange.text, where
    assert ours == exchange.result, where


def replay_main_run(graph: Graph, transcript: Transcript) -> None:
    for step in transcript.steps:
        if isinstance(step, Exchange):
            _check_exchange(graph, step)
        else:
            assert graph_json(*graph.read_graph()) == _graph_of_file(step.content), step.label


# -- the transcript -----------------------------------------------------------------------------------


def test_the_transcript_parser_replays_every_graph_exchange_and_names_the_rest(transcript: Transcript) -> None:
    raw = transcript_path().read_text(encoding="utf-8").split("## APPENDIX")[0]
    requested = [int(m) for m in re.findall(r'^>>> .*"id": (\d+)\}$', raw, flags=re.MULTILINE)]
    replayed = [e.id for e in transcript.exchanges]
    skipped = {s.id: s.what for s in transcript.skipped}
    assert sorted(replayed + list(skipped)) == sorted(requested)
    assert replayed == list(range(6, 22))
    # Only the handshake, listings, subscriptions and the MCP SDK's own argument / tool-name errors are left out.
    assert skipped == {
        1: "initialize",
        2: "tools/list",
        3: "resources/list",
        4: "resources/templates/list",
        5: "resources/subscribe",
        22: "create_entities",
        23: "create_entities",
        24: "no_such_tool",
        25: "resources/unsubscribe",
    }
    assert [f.label for f in transcript.files] == [
        "before any write",
        "after create_entities",
        "after relations+observations",
        "final",
    ]
    assert [case.title.split(" -> ")[0] for case in transcript.appendix] == [
        "create_entities with the same name twice in ONE request",
        "a malformed line in the JSONL file",
    ]


def test_every_official_exchange_is_reproduced_byte_for_byte(store: Store, transcript: Transcript) -> None:
    replay_main_run(Graph(store), transcript)


def test_adding_observations_to_a_missing_entity_raises_the_official_error_and_writes_nothing(
    store: Store, transcript: Transcript
) -> None:
    (error,) = [e for e in transcript.exchanges if e.is_error]
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ("Likes TEA",))])
    before, shard = graph.read_graph(), _shard_bytes(store)
    # The missing entity comes second: the first item's additions must not be written either.
    wanted = [("Alice", ["new fact"]), *((o["entityName"], o["contents"]) for o in error.arguments["observations"])]
    with pytest.raises(EntityNotFound) as raised:
        graph.add_observations(wanted)
    assert str(raised.value) == error.text == "Entity with name Zed not found"
    assert graph.read_graph() == before
    assert _shard_bytes(store) == shard


def test_the_same_name_twice_in_one_request_adds_both_as_in_the_appendix(
    tmp_path: Path, transcript: Transcript
) -> None:
    case = transcript.appendix[0]
    assert "same name twice in ONE request" in case.title and "read_graph id=3 raced ahead" in case.title
    created = case.responses[2]["result"]
    # The appendix's requests were not recorded. Its title says both entities were added, so the request held
    # exactly the entities of the answer; and read_graph (id 3) ran before create_entities (id 2).
    calls: dict[int, tuple[str, dict[str, Any]]] = {
        3: ("read_graph", {}),
        2: ("create_entities", {"entities": created["structuredContent"]["entities"]}),
    }
    assert list(case.responses) == [3, 2]
    with Store(tmp_path / "appendix") as store:
        graph = Graph(store)
        for rid, response in case.responses.items():
            tool, arguments = calls[rid]
            ours = call_tool(graph, tool, arguments)
            assert ours["content"][0]["text"] == response["result"]["content"][0]["text"]
            assert ours == response["result"]
        entities, relations = graph.read_graph()
    assert entities == [Entity("Dup", "a", ()), Entity("Dup", "b", ())]
    assert relations == []


def test_the_graph_folded_again_from_disk_reads_the_same_after_the_transcript(
    tmp_path: Path, transcript: Transcript
) -> None:
    with Store(tmp_path / "data") as store:
        graph = Graph(store)
        replay_main_run(graph, transcript)
        graph.create_entities([Entity("Dup", "a", ("x",)), Entity("Dup", "b", ("y",))])
        graph.create_relations([Relation("Dup", "Alice", "twin"), Relation("Dup", "Alice", "twin")])
        expected = graph_json(*graph.read_graph())
        searched = graph_json(*graph.search_nodes("DUP"))
    with Store(tmp_path / "data", readonly=True) as reader:
        assert graph_json(*Graph(reader).read_graph()) == expected
    with Store(tmp_path / "data") as store:
        graph = Graph(store)
        assert graph_json(*graph.read_graph()) == expected
        assert graph_json(*graph.search_nodes("DUP")) == searched
    assert [e["name"] for e in expected["entities"]] == ["Alice", "Carol", "Dup", "Dup"]
    assert len(expected["relations"]) == 2


def test_a_reader_sees_the_writers_graph_while_the_writer_holds_the_store(tmp_path: Path) -> None:
    with Store(tmp_path / "data") as store:
        graph = Graph(store)
        graph.create_entities([Entity("Alice", "person", ("Likes TEA",))])
        with Store(tmp_path / "data", readonly=True) as reader:
            assert Graph(reader).read_graph() == graph.read_graph()


# -- official semantics the transcript does not show --------------------------------------------------


def test_relations_to_missing_entities_are_accepted_and_read_back(store: Store) -> None:
    graph = Graph(store)
    ghost = [Relation("Nobody", "Nowhere", "haunts"), Relation("Alice", "Nowhere", "visits")]
    assert graph.create_relations(ghost) == ghost
    assert graph.read_graph() == ([], ghost)
    assert graph.open_nodes(["Nobody", "Nowhere"]) == ([], [])  # no entity matched, so no relation either


def test_deleting_a_name_that_is_only_a_relation_endpoint_removes_its_relations(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ())])
    graph.create_relations(
        [Relation("Alice", "Ghost", "sees"), Relation("Ghost", "Alice", "haunts"), Relation("Alice", "Bob", "knows")]
    )
    graph.delete_entities(["Ghost"])
    assert graph.read_graph() == ([Entity("Alice", "person", ())], [Relation("Alice", "Bob", "knows")])
    # A relation created again afterwards is a new one, not shadowed by the old delete.
    assert graph.create_relations([Relation("Alice", "Ghost", "sees")]) == [Relation("Alice", "Ghost", "sees")]
    assert graph.read_graph()[1] == [Relation("Alice", "Bob", "knows"), Relation("Alice", "Ghost", "sees")]


def test_search_nodes_returns_relations_where_either_end_matched(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities(
        [Entity("Alice", "person", ("likes tea",)), Entity("Bob", "person", ()), Entity("Acme", "org", ())]
    )
    relations = [
        Relation("Alice", "Bob", "knows"),
        Relation("Bob", "Acme", "works_at"),
        Relation("Acme", "Alice", "employs"),
        Relation("Bob", "Nobody", "ghost_of"),
    ]
    graph.create_relations(relations)
    assert graph.search_nodes("TEA") == (
        [Entity("Alice", "person", ("likes tea",))],
        [Relation("Alice", "Bob", "knows"), Relation("Acme", "Alice", "employs")],
    )
    # The query is one substring, spaces included: "es t" spans two words of one observation.
    assert graph.search_nodes("es t")[0] == [Entity("Alice", "person", ("likes tea",))]
    assert graph.search_nodes("tea likes") == ([], [])
    assert graph.search_nodes("nobody") == ([], [])  # a relation endpoint is not an entity


def test_open_nodes_skips_missing_names_and_keeps_graph_order(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ()), Entity("Bob", "person", ()), Entity("Carol", "org", ())])
    graph.create_relations([Relation("Bob", "Carol", "works_at"), Relation("Carol", "Dan", "employs")])
    assert graph.open_nodes(["Carol", "Missing", "Alice", "Carol"]) == (
        [Entity("Alice", "person", ()), Entity("Carol", "org", ())],
        [Relation("Bob", "Carol", "works_at"), Relation("Carol", "Dan", "employs")],
    )
    assert graph.open_nodes(["alice"]) == ([], [])  # exact, case-sensitive names
    assert graph.open_nodes([]) == ([], [])


def test_an_entity_deleted_and_added_again_is_fresh(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ("old fact",)), Entity("Bob", "person", ())])
    graph.create_relations([Relation("Alice", "Bob", "knows"), Relation("Bob", "Alice", "knows")])
    graph.add_observations([("Alice", ["older fact"])])
    graph.delete_entities(["Alice"])
    assert graph.create_entities([Entity("Alice", "robot", ("new fact",))]) == [Entity("Alice", "robot", ("new fact",))]
    assert graph.read_graph() == ([Entity("Bob", "person", ()), Entity("Alice", "robot", ("new fact",))], [])
    # The old observation text is not "already there" for the new entity.
    assert graph.add_observations([("Alice", ["old fact"])]) == [("Alice", ["old fact"])]
    assert graph.open_nodes(["Alice"])[0] == [Entity("Alice", "robot", ("new fact", "old fact"))]


def test_observations_of_a_duplicated_name_go_to_its_first_entity(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Dup", "a", ("shared",)), Entity("Dup", "b", ("shared",))])
    assert graph.add_observations([("Dup", ["shared", "more"]), ("Dup", ["more", "last"])]) == [
        ("Dup", ["more"]),
        ("Dup", ["last"]),
    ]
    graph.delete_observations([("Dup", ["shared"])])
    assert graph.read_graph()[0] == [Entity("Dup", "a", ("more", "last")), Entity("Dup", "b", ("shared",))]
    graph.delete_entities(["Dup"])
    assert graph.read_graph() == ([], [])


def test_an_empty_search_leaves_out_relations_between_missing_entities(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ())])
    graph.create_relations([Relation("Alice", "Bob", "knows"), Relation("Ghost", "Nobody", "haunts")])
    assert graph.search_nodes("") == ([Entity("Alice", "person", ())], [Relation("Alice", "Bob", "knows")])


def test_changing_a_returned_graph_does_not_change_the_next_read(store: Store) -> None:
    graph = Graph(store)
    graph.create_entities([Entity("Alice", "person", ())])
    entities, _ = graph.read_graph()
    entities.clear()
    assert graph.read_graph()[0] == [Entity("Alice", "person", ())]


# -- paged reads --------------------------------------------------------------------------------------


def _ten(graph: Graph) -> None:
    graph.create_entities([Entity(f"E{i}", "odd" if i % 2 else "even", ()) for i in range(10)])
    graph.create_relations([Relation(f"E{i}", f"E{i + 1}", "next") for i in range(9)])


def test_a_page_holds_limit_entities_from_offset_and_the_relations_touching_them(store: Store) -> None:
    graph = Graph(store)
    _ten(graph)
    page = graph.page(limit=3, offset=2)
    assert [e.name for e in page.entities] == ["E2", "E3", "E4"]
    assert page.relations == [Relation(f"E{i}", f"E{i + 1}", "next") for i in range(1, 5)]
    assert page.total_entities == 10
    assert page.to_json() == {
        "entities": [e.to_json() for e in page.entities],
        "relations": [r.to_json() for r in page.relations],
        "total": 10,
    }
    assert [e.name for e in graph.page(limit=5, offset=8).entities] == ["E8", "E9"]
    past = graph.page(limit=5, offset=10)
    assert (past.entities, past.relations, past.total_entities) == ([], [], 10)
    whole = graph.page()
    assert (whole.entities, whole.relations) == graph.read_graph()


def test_a_page_of_a_search_counts_only_the_matches(store: Store) -> None:
    graph = Graph(store)
    _ten(graph)
    page = graph.page("ODD", limit=2, offset=1)
    assert [e.name for e in page.entities] == ["E3", "E5"]
    assert page.total_entities == 5
    assert page.relations == [Relation(f"E{i}", f"E{i + 1}", "next") for i in (2, 3, 4, 5)]


def test_a_names_only_page_lists_names_relations_and_total(store: Store) -> None:
    graph = Graph(store)
    _ten(graph)
    assert graph.page(limit=2, names_only=True).to_json() == {
        "names": ["E0", "E1"],
        "relations": [
            {"from": "E0", "to": "E1", "relationType": "next"},
            {"from": "E1", "to": "E2", "relationType": "next"},
        ],
        "total": 10,
    }


@pytest.mark.parametrize(("limit", "offset"), [(0, 0), (-1, 0), (None, -1)])
def test_a_page_refuses_a_limit_below_one_or_a_negative_offset(store: Store, limit: int | None, offset: int) -> None:
    with pytest.raises(InvalidInput):
        Graph(store).page(limit=limit, offset=offset)


# -- a model of the official server -------------------------------------------------------------------


@dataclass
class OfficialModel:
    """The official server's KnowledgeGraphManager (server-memory 2026.8.31) in Python:
    one list of entities, one list of relations, every tool a filter or a push."""

    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, str]] = field(default_factory=list)

    def _find(self, name: str) -> dict[str, Any] | None:
        return next((e for e in self.entities if e["name"] == name), None)

    def create_entities(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        new = [dict(e, observations=list(e["observations"])) for e in items if not self._find(e["name"])]
        self.entities += new
        return [dict(e, observations=list(e["observations"])) for e in new]

    def create_relations(self, items: list[dict[str, str]]) -> list[dict[str, str]]:
        new = [dict(r) for r in items if r not in self.relations]
        self.relations += new
        return new

    def add_observations(self, items: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
        entities = [dict(e, observations=list(e["observations"])) for e in self.entities]
        results = []
        for name, contents in items:
            entity = next((e for e in entities if e["name"] == name), None)
            if entity is None:
                raise EntityNotFound(name)
            fresh = [c for c in contents if c not in entity["observations"]]
            entity["observations"] += fresh
            results.append((name, fresh))
        self.entities = entities
        return results

    def delete_entities(self, names: list[str]) -> None:
        self.entities = [e for e in self.entities if e["name"] not in names]
        self.relations = [r for r in self.relations if r["from"] not in names and r["to"] not in names]

    def delete_observations(self, items: list[tuple[str, list[str]]]) -> None:
        for name, texts in items:
            entity = self._find(name)
            if entity is not None:
                entity["observations"] = [o for o in entity["observations"] if o not in texts]

    def delete_relations(self, items: list[dict[str, str]]) -> None:
        self.relations = [r for r in self.relations if r not in items]

    def _with_relations(self, entities: list[dict[str, Any]]) -> GraphJson:
        names = {e["name"] for e in entities}
        return {
            "entities": entities,
            "relations": [r for r in self.relations if r["from"] in names or r["to"] in names],
        }

    def read_graph(self) -> GraphJson:
        return {"entities": self.entities, "relations": self.relations}

    def search_nodes(self, query: str) -> GraphJson:
        q = query.lower()
        return self._with_relations(
            [
                e
                for e in self.entities
                if q in e["name"].lower()
                or q in e["entityType"].lower()
                or any(q in o.lower() for o in e["observations"])
            ]
        )

    def open_nodes(self, names: list[str]) -> GraphJson:
        return self._with_relations([e for e in self.entities if e["name"] in names])


_names = st.sampled_from(["Alice", "alice", "Bob", "Zoë", "ZOË", "Dup", "", "a b"])
_WORDS = ["tea", "TEA", "Likes tea", "é", "É", "x", "", " ", "a b", "İ", "ß"]
_words = st.sampled_from(_WORDS)
_texts = st.lists(_words, max_size=3)
_entity = st.builds(lambda n, t, o: {"name": n, "entityType": t, "observations": o}, _names, _words, _texts)
_relation = st.builds(
    lambda f, t, r: {"from": f, "to": t, "relationType": r}, _names, _names, st.sampled_from(["r", "R"])
)
_pairs = st.lists(st.tuples(_names, _texts), max_size=3)
_operation = st.one_of(
    st.tuples(st.just("create_entities"), st.lists(_entity, max_size=3)),
    st.tuples(st.just("create_relations"), st.lists(_relation, max_size=3)),
    st.tuples(st.just("add_observations"), _pairs),
    st.tuples(st.just("delete_entities"), st.lists(_names, max_size=2)),
    st.tuples(st.just("delete_observations"), _pairs),
    st.tuples(st.just("delete_relations"), st.lists(_relation, max_size=2)),
    st.tuples(st.just("search_nodes"), _words),
    st.tuples(st.just("open_nodes"), st.lists(_names, max_size=3)),
)


def _relations(items: list[dict[str, str]]) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in items]


def _step(graph: Graph, model: OfficialModel, name: str, argument: Any) -> tuple[Any, Any]:
    """(Hivenote's answer, the model's answer) to one tool call, both in the official JSON shape."""
    if name == "create_entities":
        entities = [Entity(e["name"], e["entityType"], tuple(e["observations"])) for e in argument]
        return [e.to_json() for e in graph.create_entities(entities)], model.create_entities(argument)
    if name == "create_relations":
        return [r.to_json() for r in graph.create_relations(_relations(argument))], model.create_relations(argument)
    if name == "add_observations":
        return graph.add_observations(argument), model.add_observations(argument)
    if name == "search_nodes":
        return graph_json(*graph.search_nodes(argument)), model.search_nodes(argument)
    if name == "open_nodes":
        return graph_json(*graph.open_nodes(argument)), model.open_nodes(argument)
    if name == "delete_entities":
        graph.delete_entities(argument)
        model.delete_entities(argument)
    elif name == "delete_observations":
        graph.delete_observations(argument)
        model.delete_observations(argument)
    else:
        graph.delete_relations(_relations(argument))
        model.delete_relations(argument)
    return None, None


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_entity, min_size=1, max_size=4),
    st.lists(_relation, min_size=1, max_size=4),
    st.lists(_operation, max_size=12),
    st.sampled_from([0, 1, graphsearch.REBUILD_SLACK]),
)
def test_any_sequence_of_tool_calls_answers_like_the_official_server(
    entities: list[dict[str, Any]], relations: list[dict[str, str]], calls: list[tuple[str, Any]], slack: int
) -> None:
    # Start from a populated graph so that reads and deletes usually have something to find. The search's string of
    # entity texts is made again after `slack` touched entities (0: at every search; else they are tested directly).
    operations = [("create_entities", entities), ("create_relations", relations), *calls]
    model = OfficialModel()
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(graphsearch, "REBUILD_SLACK", slack)
        with Store(Path(tmp) / "data") as store:
            graph = Graph(store)
            for name, argument in operations:
                missing = name == "add_observations" and any(model._find(n) is None for n, _ in argument)
                if missing:
                    with pytest.raises(EntityNotFound):
                        graph.add_observations(argument)
                else:
                    ours, official = _step(graph, model, name, argument)
                    assert ours == official, name
                assert graph_json(*graph.read_graph()) == model.read_graph(), name
                for word in _WORDS:  # every search after every call: the texts it searches follow each change
                    assert graph_json(*graph.search_nodes(word)) == model.search_nodes(word), (name, word)
        with Store(Path(tmp) / "data") as store:
            assert graph_json(*Graph(store).read_graph()) == model.read_graph()
