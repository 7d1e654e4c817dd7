"""read_graph's answer kept as bytes (`encoded_graph`): always what the SDK would write for the graph as it is now,
however the kept pieces were reused, on a real store."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hivenote.server.core.fold import State
from hivenote.server.core.model import Entity, Relation
from hivenote.server.graph import Graph, graph_json
from hivenote.server.mcp import encoded_graph
from hivenote.server.mcp.encoded_graph import EncodedGraph
from hivenote.server.mcp.wire import graph_text
from hivenote.server.storage.store import Store

NAMES = ("Ada", "Bob", 'Q"uote', "back\\slash", "Zoë")
TEXTS = ("tea", "line\nbreak", "tab\there", "\x01", "✓ 🐝", "</script>")


def sdk_bytes(graph: Graph) -> tuple[bytes, bytes]:
    """What the SDK writes for read_graph now: its text inside a JSON string, its structured content."""
    entities, relations = graph.read_graph()
    return pydantic_core.to_json(graph_text(entities, relations))[1:-1], pydantic_core.to_json(
        graph_json(entities, relations)
    )


_entity = st.builds(
    lambda n, t, o: Entity(n, t, tuple(o)),
    st.sampled_from(NAMES),
    st.sampled_from(TEXTS),
    st.lists(st.sampled_from(TEXTS), max_size=3),
)
_relation = st.builds(Relation, st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(("knows", "uses")))
_names = st.lists(st.sampled_from(NAMES), max_size=2)
_operation = st.one_of(
    st.tuples(st.just("create_entities"), st.lists(_entity, max_size=3)),  # a name twice in a batch: both kept
    st.tuples(st.just("create_relations"), st.lists(_relation, max_size=3)),
    st.tuples(
        st.just("add_observations"),
        st.lists(st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(TEXTS), max_size=2)), max_size=2),
    ),
    st.tuples(st.just("delete_entities"), _names),
    st.tuples(
        st.just("delete_observations"),
        st.lists(st.tuples(st.sampled_from(NAMES), st.lists(st.sampled_from(TEXTS), max_size=2)), max_size=2),
    ),
    st.tuples(st.just("delete_relations"), st.lists(_relation, max_size=2)),
)


def _apply(graph: Graph, name: str, argument: list[Any]) -> None:
    if name == "add_observations":
        present = [(n, texts) for n, texts in argument if graph.open_nodes([n])[0]]
        graph.add_observations(present)
    else:
        getattr(graph, name)(argument)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_operation, st.booleans()), max_size=16))
def test_the_encoded_answer_is_always_what_the_sdk_would_write_for_the_graph_now(
    steps: list[tuple[tuple[str, list[Any]], bool]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "data") as store:
        graph, encoded = Graph(store), EncodedGraph()
        assert encoded.read(store) == sdk_bytes(graph)
        for (name, argument), read in steps:
            _apply(graph, name, argument)
            if read:  # reads in between keep pieces that later reads reuse
                assert encoded.read(store) == sdk_bytes(graph), name
        assert encoded.read(store) == sdk_bytes(graph)


def test_an_unchanged_graph_is_answered_from_what_was_kept(store: Store) -> None:
    graph, encoded = Graph(store), EncodedGraph()
    graph.create_entities([Entity("Ada", "person", ("tea",))])
    assert encoded.current(store.state) is None
    first = encoded.read(store)
    assert encoded.current(store.state) == first
    assert encoded.read(store)[0] is first[0]  # not encoded again
    graph.add_observations([("Ada", ["chess"])])
    assert encoded.current(store.state) is None
    assert encoded.read(store) == sdk_bytes(graph) != first


def test_what_was_kept_is_for_one_state_not_for_a_version_number(store: Store) -> None:
    """The store folds a new state after a failed write; its version count starts again."""
    encoded = EncodedGraph()
    encoded.read(store)
    assert store.state.graph_version == State().graph_version
    assert encoded.current(State()) is None


def test_a_graph_past_the_keep_limit_is_encoded_for_each_read_and_nothing_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, encoded = Graph(store), EncodedGraph()
    graph.create_entities([Entity("Ada", "person", ("tea",))])
    graph.create_relations([Relation("Ada", "Ada", "knows")])
    monkeypatch.setattr(encoded_graph, "KEEP_MAX_BYTES", 10)
    assert encoded.read(store) == sdk_bytes(graph)
    assert encoded.current(store.state) is None
    monkeypatch.undo()
    graph.create_entities([Entity("Bob", "person", ())])
    assert encoded.read(store) == sdk_bytes(graph)
    assert encoded.current(store.state) is not None
