"""The official memory server's MCP surface (`/mcp/graph`) against the recorded official server: the real MCP client
over real Streamable HTTP on a real uvicorn, plus in-memory connections where the order of messages on one stream
is what is being tested."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from mcp.client import Client
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    EmptyResult,
    Implementation,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

from hivenote.server.core.model import Author, Entity, Relation
from hivenote.server.graph import Graph, graph_json
from hivenote.server.mcp import graph as mcp_graph
from hivenote.server.mcp.graph import GRAPH_URI, GraphMCP
from hivenote.server.mcp.wire import graph_text, js_stringify, official_tools, schema_issues
from hivenote.server.storage.store import Store
from tests.support.internals import added_op
from tests.support.live import Inbox, subscribe
from tests.support.official import REFERENCE, SCHEMA_ERROR_PREFIX, compact, transcript_path
from tests.support.system import SERVER, needs

REFERENCE_TOOLS = REFERENCE / "official-memory-tools.json"
WAIT_S = 10  # generous deadline for anything that should take milliseconds (as in live.py)
NO_NAMES = "Invalid input: expected array, received undefined at names"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- fixtures: a GraphMCP, served for real ----------------------------------------------------------------------------


@dataclass
class Calls:
    """What `identify` was asked: the client name from the session, per tool call."""

    seen: list[str] = field(default_factory=list)

    def identify(self, ctx: ServerRequestContext[Any]) -> Author:
        params = ctx.session.client_params
        name = params.client_info.name if params is not None else ""
        agent = "http" if isinstance(ctx.request, Request) else "in-memory"
        self.seen.append(name)
        return Author(agent=agent, client=name, person="tester")


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def graph_mcp(store: Store, calls: Calls) -> GraphMCP:
    return GraphMCP(Graph(store), identify=calls.identify)


@needs(SERVER)
@contextlib.asynccontextmanager
async def serving(gm: GraphMCP, *, spliced: bool = True) -> AsyncIterator[str]:
    """`gm` mounted at /mcp/graph in a Starlette app on a real uvicorn (127.0.0.1, a free port). Yields the URL.
    Not `spliced`: the SDK's own endpoint, writing every answer itself."""
    if spliced:
        endpoint = gm.http_app("/")
    else:
        endpoint = gm.server.streamable_http_app(streamable_http_path="/", json_response=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with gm.server.session_manager.run():  # a mounted app's own lifespan never runs
            yield

    app = Starlette(routes=[Mount("/mcp/graph", app=endpoint)], lifespan=lifespan)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
    with sock:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(WAIT_S):
                while not server.started:
                    await anyio.sleep(0.01)
            try:
                yield f"http://127.0.0.1:{port}/mcp/graph/"
            finally:
                server.should_exit = True


@contextlib.asynccontextmanager
async def http_client(url: str, name: str, inbox: Inbox | None = None) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300), headers={"User-Agent": f"{name}/1.0"}) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            client_info=Implementation(name=name, version="1.0"),
            message_handler=inbox.handle if inbox else None,
        ) as client,
    ):
        yield client


def memory_client(gm: GraphMCP, name: str, inbox: Inbox | None = None) -> Client:
    """In-process, handshake era: one stream carries notifications and answers in order, as stdio does."""
    return Client(
        gm.server,
        mode="legacy",
        client_info=Implementation(name=name, version="1.0"),
        message_handler=inbox.handle if inbox else None,
    )


async def unsubscribe(client: Client, uri: str = GRAPH_URI) -> None:
    await client.session.send_request(UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)), EmptyResult)


async def until_stream_open(client: Client, inbox: Inbox, other: Client) -> None:
    """Wait until `client`'s standalone GET stream is connected (the client opens it in the background after the
    handshake; a notification sent before is lost, as the protocol allows): poke with no-op mutations until one
    arrives."""
    with anyio.fail_after(WAIT_S):
        while not inbox.updates:
            await other.call_tool("delete_relations", {"relations": []})
            with anyio.move_on_after(0.1):
                await inbox.until(1)
    inbox.updates.clear()


def wire(result: CallToolResult) -> dict[str, Any]:
    """A client-side result as the official server's JSON (no `isError` key unless true)."""
    out = result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type", "meta"})
    if not result.is_error:
        del out["isError"]
    return out


# -- the transcript, step by step -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request of the official main run, its result, and how many notifications came before that result."""

    request: dict[str, Any]
    result: dict[str, Any]
    notifications: int

    @property
    def method(self) -> str:
        method: str = self.request["method"]
        return method

    @property
    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = self.request.get("params", {})
        return params


def main_run() -> list[Step]:
    steps: list[Step] = []
    pending: dict[int, dict[str, Any]] = {}
    notes = 0
    for line in transcript_path().read_text(encoding="utf-8").split("\n"):
        if line.startswith("## APPENDIX"):
            break
        if line.startswith(">>> "):
            request = json.loads(line[4:])
            if "id" in request:
                pending[request["id"]] = request
        elif line.startswith("<<< "):
            message = json.loads(line[4:])
            if "id" not in message:
                notes += 1
                continue
            steps.append(Step(pending.pop(message["id"]), message["result"], notes))
            notes = 0
    return steps


async def replay(client: Client, step: Step) -> dict[str, Any]:
    """Send one transcript request through the real client; the answer as the official server's JSON."""
    method, params = step.method, step.params
    if method == "tools/call":
        return wire(await client.call_tool(params["name"], params["arguments"]))
    if method == "tools/list":
        return {
            "tools": [
                t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in (await client.list_tools()).tools
            ]
        }
    if method == "resources/list":
        listed = await client.list_resources()
        return {"resources": [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in listed.resources]}
    if method == "resources/templates/list":
        return {"resourceTemplates": (await client.list_resource_templates()).resource_templates}
    if method == "resources/read":
        read = await client.read_resource(params["uri"])
        return {"contents": [c.model_dump(by_alias=True, mode="json", exclude_none=True) for c in read.contents]}
    if method == "resources/subscribe":
        await subscribe(client, params["uri"])
        return {}
    assert method == "resources/unsubscribe", method
    await unsubscribe(client, params["uri"])
    return {}


def check(step: Step, ours: dict[str, Any]) -> None:
    where = f"id {step.request['id']} {step.method} {step.params.get('name', '')}"
    if step.method == "tools/call":
        assert ours["content"][0]["text"] == step.result["content"][0]["text"], where  # byte for byte
        assert ours.keys() == step.result.keys(), where  # no isError on success; no structuredContent on errors
        if "structuredContent" in ours:
            assert compact(ours["structuredContent"]) == compact(step.result["structuredContent"]), where
    assert ours == step.result, where


@pytest.mark.anyio
async def test_every_transcript_exchange_is_answered_the_official_way_over_http(graph_mcp: GraphMCP) -> None:
    steps = [s for s in main_run() if s.method != "initialize"]
    assert {s.method for s in steps} >= {"tools/call", "resources/read", "resources/subscribe", "tools/list"}
    refused = [
        s for s in steps if s.result.get("isError") and s.result["content"][0]["text"].startswith(SCHEMA_ERROR_PREFIX)
    ]
    assert len(refused) == 3  # both schema violations and the unknown tool, which the graph tests leave to this one
    async with serving(graph_mcp) as url, http_client(url, "transcript-driver") as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("hivenote-graph", "0.1.0")
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe is True
        for step in steps:
            check(step, await replay(client, step))


@pytest.mark.anyio
async def test_mutations_notify_a_subscriber_before_their_answer_as_in_the_transcript(graph_mcp: GraphMCP) -> None:
    inbox = Inbox()
    async with memory_client(graph_mcp, "transcript-driver", inbox) as client:
        for step in main_run():
            if step.method == "initialize":
                continue
            before = len(inbox.updates)
            check(step, await replay(client, step))
            assert len(inbox.updates) - before == step.notifications, f"id {step.request['id']}"
    assert inbox.updates and set(inbox.updates) == {GRAPH_URI}


# -- tool list --------------------------------------------------------------------------------------------------------


def reference_tools() -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))["tools"]
    return tools


def test_the_packaged_tool_list_is_the_vendored_official_one() -> None:
    assert official_tools() == reference_tools()
    assert [t["name"] for t in reference_tools()] == [
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
        "read_graph",
        "search_nodes",
        "open_nodes",
    ]


@pytest.mark.anyio
async def test_tools_list_over_http_is_the_official_list_field_by_field(graph_mcp: GraphMCP) -> None:
    async with serving(graph_mcp) as url, http_client(url, "lister") as client:
        listed = (await client.list_tools()).tools
    reference = reference_tools()
    assert len(listed) == len(reference)
    for tool, official in zip(listed, reference, strict=True):
        ours = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        assert ours.keys() == official.keys(), official["name"]
        for key in official:
            assert ours[key] == official[key], (official["name"], key)


@pytest.mark.anyio
async def test_raw_wire_has_the_official_tools_and_no_is_error_key_on_success(graph_mcp: GraphMCP) -> None:
    """Below the client library: what a JavaScript or any other client actually receives."""
    async with serving(graph_mcp) as url, httpx2.AsyncClient(timeout=WAIT_S) as http:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

        async def post(message: dict[str, Any]) -> dict[str, Any] | None:
            response = await http.post(url, json={"jsonrpc": "2.0", **message}, headers=headers)
            assert response.status_code in (200, 202), response.text
            headers.setdefault("Mcp-Session-Id", response.headers.get("mcp-session-id", ""))
            if response.status_code == 202:  # a notification
                return None
            # One JSON body per request, not an SSE stream: nothing is ever sent during a call.
            assert response.headers["content-type"] == "application/json"
            answer: dict[str, Any] = response.json()
            assert answer["id"] == message["id"]
            return answer

        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        init = await post({"id": 1, "method": "initialize", "params": hello})
        assert init is not None
        assert init["result"]["serverInfo"] == {"name": "hivenote-graph", "version": "0.1.0"}
        assert init["result"]["capabilities"]["resources"]["subscribe"] is True
        headers["MCP-Protocol-Version"] = "2025-06-18"
        assert await post({"method": "notifications/initialized"}) is None
        listed = await post({"id": 2, "method": "tools/list", "params": {}})
        assert listed is not None
        assert listed["result"]["tools"] == reference_tools()
        ada = {"name": "Ada", "entityType": "person", "observations": ["é"]}
        call = {"name": "create_entities", "arguments": {"entities": [ada]}}
        created = await post({"id": 3, "method": "tools/call", "params": call})
        assert created is not None
        text = (
            '[\n  {\n    "name": "Ada",\n    "entityType": "person",\n    "observations": [\n      "é"\n    ]\n  }\n]'
        )
        assert created["result"] == {
            "content": [{"type": "text", "text": text}],
            "structuredContent": {"entities": [ada]},
        }
        failed = await post({"id": 4, "method": "tools/call", "params": {"name": "open_nodes", "arguments": {}}})
        assert failed is not None
        text = "Input validation error: Invalid arguments for tool open_nodes: " + NO_NAMES
        assert failed["result"] == {"content": [{"type": "text", "text": SCHEMA_ERROR_PREFIX + text}], "isError": True}


@contextlib.asynccontextmanager
async def raw_session(url: str) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[httpx2.Response]]]:
    """A handshake-era session below the client library: posts one JSON-RPC message a call, returns the response."""
    async with httpx2.AsyncClient(timeout=WAIT_S) as http:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

        async def post(message: dict[str, Any]) -> httpx2.Response:
            response = await http.post(url, json={"jsonrpc": "2.0", **message}, headers=headers)
            assert response.status_code in (200, 202), response.text
            return response

        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        init = await post({"id": 0, "method": "initialize", "params": hello})
        headers |= {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        await post({"method": "notifications/initialized"})
        yield post


READ_GRAPH = {"id": 5, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}}
# Everything JSON escapes, text that looks like a splice placeholder, a name twice in one batch.
AWKWARD = [
    Entity('Q"uote\\', "line\nbreak", ("tab\t", "\x01", "✓ 🐝", "</script>", "\u2028")),
    Entity("hivenote-splice-" + "0" * 32, "t", ('{"hivenote-splice-0":true}',)),
    Entity("Dup", "t", ()),
    Entity("Dup", "t", ("second",)),
]


@pytest.mark.anyio
async def test_read_graph_over_http_is_byte_for_byte_what_the_sdk_writes_itself(store: Store, calls: Calls) -> None:
    graph = Graph(store)
    spliced, plain = GraphMCP(graph, identify=calls.identify), GraphMCP(graph, identify=calls.identify)
    async with (
        serving(spliced) as ours_url,
        serving(plain, spliced=False) as sdk_url,
        raw_session(ours_url) as ours,
        raw_session(sdk_url) as sdk,
    ):
        for step in ("empty", "awkward", "one changed", "unchanged"):
            if step == "awkward":
                graph.create_entities(AWKWARD)
                graph.create_relations([Relation("Dup", "Dup", "r"), Relation("Dup", "Dup", "r")])
            elif step == "one changed":
                graph.add_observations([("Dup", ["third"])])
            answer, expected = await ours(READ_GRAPH), await sdk(READ_GRAPH)
            assert answer.content == expected.content, step
            assert answer.headers["content-length"] == str(len(answer.content))
            assert spliced.encoded.current(store.state) is not None  # answered through the splice,
            assert plain.encoded.current(store.state) is None  # the other one by the SDK alone
    assert json.loads(answer.content)["result"]["structuredContent"] == graph_json(*graph.read_graph())


@pytest.mark.anyio
async def test_a_modern_era_client_over_http_reads_the_graph_without_the_splice(graph_mcp: GraphMCP) -> None:
    graph_mcp.graph.create_entities(AWKWARD)
    async with (
        serving(graph_mcp) as url,
        httpx2.AsyncClient(timeout=WAIT_S) as http,
        Client(streamable_http_client(url, http_client=http)) as modern,
    ):
        assert modern.protocol_version == "2026-07-28"
        answer = await modern.call_tool("read_graph")
    assert answer.structured_content == graph_json(*graph_mcp.graph.read_graph())
    assert wire(answer)["content"][0]["text"] == graph_text(*graph_mcp.graph.read_graph())
    assert graph_mcp.encoded.current(graph_mcp.graph.store.state) is None


@pytest.mark.anyio
async def test_a_page_of_the_graph_over_http_is_not_the_spliced_whole(store: Store, calls: Calls) -> None:
    gm = GraphMCP(Graph(store), identify=calls.identify, extras=True)
    gm.graph.create_entities([Entity(f"n{i}", "kind", ()) for i in range(3)])
    page = {"id": 6, "method": "tools/call", "params": {"name": "read_graph", "arguments": {"limit": 1}}}
    async with serving(gm) as url, raw_session(url) as post:
        paged = (await post(page)).json()["result"]["structuredContent"]
        assert gm.encoded.current(store.state) is None
        whole = (await post(READ_GRAPH)).json()["result"]["structuredContent"]
    assert paged == {
        "entities": [{"name": "n0", "entityType": "kind", "observations": []}],
        "relations": [],
        "total": 3,
    }
    assert whole == graph_json(*gm.graph.read_graph())


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_answer_text_is_indented_exactly_as_json_dumps_indents_it(value: Any) -> None:
    """The official text is JSON.stringify(value, null, 2); json.dumps(indent=2) writes the same, only slower."""
    assert js_stringify(value) == json.dumps(value, indent=2, ensure_ascii=False)


ENTITIES = st.lists(st.builds(Entity, st.text(), st.text(), st.lists(st.text(), max_size=3).map(tuple)), max_size=4)
RELATIONS = st.lists(st.builds(Relation, st.text(), st.text(), st.text()), max_size=4)


@given(ENTITIES, RELATIONS)
def test_a_graph_answer_text_written_from_the_objects_equals_its_json_indented(
    entities: list[Entity], relations: list[Relation]
) -> None:
    assert graph_text(entities, relations) == js_stringify(graph_json(entities, relations))


# -- argument errors --------------------------------------------------------------------------------------------------


def _schema(tool: str) -> dict[str, Any]:
    return next(t["inputSchema"] for t in reference_tools() if t["name"] == tool)


@pytest.mark.parametrize(
    ("tool", "arguments", "issues"),
    [
        ("create_entities", {"entities": [{"name": "NoType"}]}, [
            "Invalid input: expected string, received undefined at entities[0].entityType",
            "Invalid input: expected array, received undefined at entities[0].observations"]),
        ("create_entities", {}, ["Invalid input: expected array, received undefined at entities"]),
        ("create_entities", {"entities": {"name": "x"}}, [
            "Invalid input: expected array, received object at entities"]),
        ("create_entities", {"entities": ["Ada", None]}, [
            "Invalid input: expected object, received string at entities[0]",
            "Invalid input: expected object, received null at entities[1]"]),
        ("create_entities", {"entities": [{"name": 1, "entityType": True, "observations": ["ok", 2.5, []]}]}, [
            "Invalid input: expected string, received number at entities[0].name",
            "Invalid input: expected string, received boolean at entities[0].entityType",
            "Invalid input: expected string, received number at entities[0].observations[1]",
            "Invalid input: expected string, received array at entities[0].observations[2]"]),
        ("add_observations", {"observations": [{"contents": "x", "entityName": "A"}]}, [
            "Invalid input: expected array, received string at observations[0].contents"]),
        ("delete_relations", {"relations": [{"from": "A", "to": "B"}, {}]}, [
            "Invalid input: expected string, received undefined at relations[0].relationType",
            "Invalid input: expected string, received undefined at relations[1].from",
            "Invalid input: expected string, received undefined at relations[1].to",
            "Invalid input: expected string, received undefined at relations[1].relationType"]),
        ("search_nodes", {"query": None}, ["Invalid input: expected string, received null at query"]),
        ("read_graph", {"anything": "is dropped, as zod does"}, []),
        ("open_nodes", {"names": [], "extra": 1}, []),
    ],
)  # fmt: skip
def test_schema_issues_read_like_the_official_servers_zod_messages(
    tool: str, arguments: dict[str, Any], issues: list[str]
) -> None:
    assert schema_issues(arguments, _schema(tool)) == issues


def test_schema_issues_for_the_paging_extras_and_a_value_that_is_not_an_object() -> None:
    schema = {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}}
    assert schema_issues({"limit": "2"}, schema) == ["Invalid input: expected number, received string at limit"]
    assert schema_issues({"limit": 2.0}, schema) == []
    assert schema_issues([], schema) == ["Invalid input: expected object, received array"]


@pytest.mark.anyio
async def test_bad_arguments_unknown_tools_and_missing_entities_are_tool_errors_that_change_nothing(
    graph_mcp: GraphMCP, store: Store
) -> None:
    async with memory_client(graph_mcp, "t") as client:
        await client.call_tool("create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": []}]})
        shard = store.shard_path.read_bytes() if store.shard_path else b""
        bad = await client.call_tool("create_relations", {"relations": [{"from": "A", "to": 3}]})
        no_args = await client.call_tool("delete_entities")
        unknown = await client.call_tool("brain_remember", {"title": "x"})
        additions = [{"entityName": "A", "contents": ["kept?"]}, {"entityName": "Zed", "contents": ["nope"]}]
        missing = await client.call_tool("add_observations", {"observations": additions})
        graph = await client.call_tool("read_graph")
    prefix = f"MCP error {INVALID_PARAMS}: "
    text = (
        "Input validation error: Invalid arguments for tool create_relations: "
        "Invalid input: expected string, received number at relations[0].to\n"
        "Invalid input: expected string, received undefined at relations[0].relationType"
    )
    assert wire(bad) == {"isError": True, "content": [{"type": "text", "text": prefix + text}]}
    assert no_args.content[0].model_dump()["text"] == prefix + (
        "Input validation error: Invalid arguments for tool delete_entities: "
        "Invalid input: expected array, received undefined at entityNames"
    )
    assert wire(unknown) == {
        "isError": True,
        "content": [{"type": "text", "text": prefix + "Tool brain_remember not found"}],
    }
    assert wire(missing) == {"isError": True, "content": [{"type": "text", "text": "Entity with name Zed not found"}]}
    assert graph.structured_content == {
        "entities": [{"name": "A", "entityType": "t", "observations": []}],
        "relations": [],
    }
    assert (store.shard_path.read_bytes() if store.shard_path else b"") == shard


@pytest.mark.anyio
async def test_a_notebook_error_is_a_tool_error_saying_what_to_do(graph_mcp: GraphMCP) -> None:
    async with memory_client(graph_mcp, "t") as client:
        entity = {"name": "bad \ud800", "entityType": "t", "observations": []}
        result = await client.call_tool("create_entities", {"entities": [entity]})
    assert result.is_error
    assert "unpaired surrogate" in wire(result)["content"][0]["text"]


class ThreadNoting(Graph):
    """A real Graph that notes which thread each read ran on."""

    threads: list[str]

    def open_nodes(self, names: Sequence[str]) -> tuple[list[Entity], list[Relation]]:
        self.threads.append(threading.current_thread().name)
        return super().open_nodes(names)

    def search_nodes(self, query: str) -> tuple[list[Entity], list[Relation]]:
        self.threads.append(threading.current_thread().name)
        return super().search_nodes(query)


@pytest.mark.anyio
async def test_small_reads_are_answered_on_the_event_loop_and_big_ones_in_a_worker(
    store: Store, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = ThreadNoting(store)
    graph.threads = []
    graph.create_entities([Entity("Ada", "person", ("é",))])
    loop = threading.current_thread().name
    async with memory_client(GraphMCP(graph, identify=calls.identify), "t") as client:
        assert not (await client.call_tool("open_nodes", {"names": ["Ada"]})).is_error
        assert not (await client.call_tool("search_nodes", {"query": "ada"})).is_error
        monkeypatch.setattr(mcp_graph, "AT_ONCE_ENTITIES", 0)
        monkeypatch.setattr(mcp_graph, "AT_ONCE_NAMES", 0)
        assert not (await client.call_tool("open_nodes", {"names": ["Ada"]})).is_error
        assert not (await client.call_tool("search_nodes", {"query": "ada"})).is_error
    assert graph.threads[:2] == [loop, loop]
    assert loop not in graph.threads[2:]


@pytest.mark.anyio
async def test_a_read_waits_for_a_busy_store_in_a_worker_never_on_the_event_loop(graph_mcp: GraphMCP) -> None:
    graph_mcp.graph.create_entities([Entity("Ada", "person", ())])
    held, release = threading.Event(), threading.Event()

    def writer() -> None:  # a writer mid-write: holds the store until told to let go
        with graph_mcp.graph.store.reading():
            held.set()
            release.wait(WAIT_S)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        held.wait(WAIT_S)
        async with memory_client(graph_mcp, "t") as client, anyio.create_task_group() as tg:
            answers: list[CallToolResult] = []

            async def read() -> None:
                answers.append(await client.call_tool("open_nodes", {"names": ["Ada"]}))

            tg.start_soon(read)
            with anyio.fail_after(WAIT_S):
                for _ in range(20):  # the loop keeps running while the read waits for the store
                    await anyio.sleep(0.001)
            assert answers == []
            release.set()
    finally:
        release.set()
        thread.join(WAIT_S)
    assert '"name": "Ada"' in wire(answers[0])["content"][0]["text"]


# -- the graph resource -----------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resources_list_read_and_templates_match_the_official_server(graph_mcp: GraphMCP) -> None:
    official = {s.method: s.result for s in main_run()}
    async with serving(graph_mcp) as url, http_client(url, "reader") as client:
        listed = await client.list_resources()
        templates = await client.list_resource_templates()
        empty = await client.read_resource(GRAPH_URI)
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memory://elsewhere")
    resources = [r.model_dump(by_alias=True, exclude_none=True) for r in listed.resources]
    assert resources == official["resources/list"]["resources"]
    assert templates.resource_templates == []
    text = '{\n  "entities": [],\n  "relations": []\n}'
    contents = empty.contents[0].model_dump(by_alias=True, exclude_none=True)
    assert contents == {"uri": GRAPH_URI, "mimeType": "application/json", "text": text}
    assert (raised.value.code, raised.value.message) == (INVALID_PARAMS, "Resource memory://elsewhere not found")


# -- notifications ----------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_mutation_from_another_http_session_notifies_a_subscriber(graph_mcp: GraphMCP) -> None:
    inbox = Inbox()
    async with (
        serving(graph_mcp) as url,
        http_client(url, "watcher", inbox) as watcher,
        http_client(url, "writer") as writer,
    ):
        await subscribe(watcher)
        assert len(graph_mcp._subscribers) == 1
        await until_stream_open(watcher, inbox, writer)
        await writer.call_tool("create_entities", {"entities": [{"name": "B", "entityType": "t", "observations": []}]})
        await inbox.until(1)
        await writer.call_tool("open_nodes", {"names": ["B"]})  # reads notify nobody ...
        await writer.call_tool("delete_entities", {"entityNames": ["nobody"]})  # ... every mutation does, even a no-op
        await inbox.until(2)
        assert inbox.updates == [GRAPH_URI, GRAPH_URI]


@pytest.mark.anyio
async def test_publish_if_changed_notifies_after_a_write_outside_mcp(graph_mcp: GraphMCP) -> None:
    inbox = Inbox()
    async with (
        serving(graph_mcp) as url,
        http_client(url, "watcher", inbox) as watcher,
        http_client(url, "writer") as writer,
    ):
        await subscribe(watcher)
        await until_stream_open(watcher, inbox, writer)
        await anyio.to_thread.run_sync(lambda: graph_mcp.graph.create_entities([Entity("REST", "t", ())]))
        await graph_mcp.publish_if_changed()
        await inbox.until(1)
        graph = await watcher.read_resource(GRAPH_URI)
    assert '"REST"' in graph.contents[0].model_dump()["text"]


@pytest.mark.anyio
async def test_publish_if_changed_sends_nothing_when_the_graph_did_not_move(graph_mcp: GraphMCP, store: Store) -> None:
    inbox = Inbox()
    async with memory_client(graph_mcp, "watcher", inbox) as watcher, memory_client(graph_mcp, "writer") as writer:
        await subscribe(watcher)
        await graph_mcp.publish_if_changed()
        await writer.call_tool("create_entities", {"entities": [{"name": "W", "entityType": "t", "observations": []}]})
        await graph_mcp.publish_if_changed()  # the tool call's own notification already covered this change
        await watcher.call_tool("read_graph")  # answered on the same stream, after anything sent before
        assert inbox.updates == [GRAPH_URI]
        store.write(lambda state: [("entity.add", {"name": "X", "type": "t"})], Author(agent="sync"))
        await graph_mcp.publish_if_changed()
        await graph_mcp.publish_if_changed()
        await watcher.call_tool("read_graph")
        assert inbox.updates == [GRAPH_URI, GRAPH_URI]


@pytest.mark.anyio
async def test_unsubscribe_stops_the_notifications(graph_mcp: GraphMCP) -> None:
    inbox = Inbox()
    async with memory_client(graph_mcp, "watcher", inbox) as watcher, memory_client(graph_mcp, "writer") as writer:
        await subscribe(watcher)
        await subscribe(watcher, "memory://something-else")  # accepted, never fires
        await writer.call_tool("delete_entities", {"entityNames": []})
        await unsubscribe(watcher, "memory://something-else")
        assert len(graph_mcp._subscribers) == 1
        await unsubscribe(watcher)
        assert len(graph_mcp._subscribers) == 0
        await writer.call_tool("delete_entities", {"entityNames": []})
        await anyio.to_thread.run_sync(lambda: graph_mcp.graph.create_entities([Entity("Q", "t", ())]))
        await graph_mcp.publish_if_changed()
        await watcher.call_tool("read_graph")
        assert inbox.updates == [GRAPH_URI]


@pytest.mark.anyio
async def test_a_closed_session_is_forgotten_and_never_fails_a_tool_call(graph_mcp: GraphMCP) -> None:
    inbox = Inbox()
    async with serving(graph_mcp) as url, http_client(url, "stays", inbox) as stays, http_client(url, "w") as writer:
        await subscribe(stays)
        await until_stream_open(stays, inbox, writer)
        async with http_client(url, "leaves") as leaves:
            await subscribe(leaves)
            assert len(graph_mcp._subscribers) == 2
        # `leaves` ended its session (DELETE); the server tears the connection down right after answering.
        with anyio.fail_after(WAIT_S):
            while len(graph_mcp._subscribers) != 1:
                await anyio.sleep(0.01)
        ok = await writer.call_tool(
            "create_entities", {"entities": [{"name": "Z", "entityType": "t", "observations": []}]}
        )
        assert not ok.is_error
        await inbox.until(1)


@pytest.mark.anyio
async def test_an_ended_in_memory_connection_is_forgotten(graph_mcp: GraphMCP) -> None:
    async with memory_client(graph_mcp, "writer") as writer:
        async with memory_client(graph_mcp, "watcher") as watcher:
            await subscribe(watcher)
            await subscribe(watcher)  # twice on one connection: still one subscriber
            assert len(graph_mcp._subscribers) == 1
        with anyio.fail_after(WAIT_S):
            while len(graph_mcp._subscribers):
                await anyio.sleep(0.01)
        assert not (await writer.call_tool("delete_entities", {"entityNames": []})).is_error


@contextlib.asynccontextmanager
async def stallable(gm: GraphMCP, stall: anyio.Event) -> AsyncIterator[TransportStreams]:
    """An in-memory connection whose client stops reading what the server sends once `stall` is set: a subscriber
    whose stream no longer drains."""
    async with create_client_server_memory_streams() as ((from_server, to_server), (server_in, server_out)):
        relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            async with relay_in:
                async for message in from_server:
                    if stall.is_set():
                        await anyio.sleep_forever()
                    await relay_in.send(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(gm.server.run, server_in, server_out, gm.server.create_initialization_options())
            tg.start_soon(relay)
            yield relay_out, to_server
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_subscriber_that_stopped_reading_never_holds_up_a_tool_call(
    graph_mcp: GraphMCP, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(mcp_graph, "SEND_TIMEOUT_S", 0.05)
    caplog.set_level(logging.INFO, logger=mcp_graph.__name__)
    stall = anyio.Event()
    async with Client(stallable(graph_mcp, stall), mode="legacy") as stuck, memory_client(graph_mcp, "w") as writer:
        await subscribe(stuck)
        stall.set()
        with anyio.fail_after(WAIT_S):
            for _ in range(3):  # one is taken by the stuck reader, one waits in the stream's buffer, one cannot go
                assert not (await writer.call_tool("delete_entities", {"entityNames": []})).is_error
    assert "did not take its notification" in caplog.text
    assert len(graph_mcp._subscribers) == 0  # that connection has ended since


@pytest.mark.anyio
async def test_modern_era_clients_get_updates_on_a_listen_stream(graph_mcp: GraphMCP) -> None:
    async with Client(graph_mcp.server) as modern, memory_client(graph_mcp, "writer") as writer:
        assert modern.protocol_version == "2026-07-28"  # discovered, no handshake
        assert modern.server_capabilities.resources is not None
        assert modern.server_capabilities.resources.subscribe is True
        async with modern.listen(resource_subscriptions=[GRAPH_URI]) as updates:
            await writer.call_tool(
                "create_entities", {"entities": [{"name": "M", "entityType": "t", "observations": []}]}
            )
            with anyio.fail_after(WAIT_S):
                event = await updates.__anext__()
        assert event == ResourceUpdated(uri=GRAPH_URI)
        graph = await modern.call_tool("read_graph")
    assert graph.structured_content == {
        "entities": [{"name": "M", "entityType": "t", "observations": []}],
        "relations": [],
    }


# -- provenance -------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_author_identify_returns_is_recorded_on_the_ops(
    graph_mcp: GraphMCP, store: Store, calls: Calls
) -> None:
    async with serving(graph_mcp) as url, http_client(url, "cursor-vscode") as client:
        await client.call_tool("create_entities", {"entities": [{"name": "P", "entityType": "t", "observations": []}]})
        await client.call_tool("read_graph")
        await client.call_tool("nope")
    added = added_op(store.state, ("P", 0))
    assert added is not None
    assert added.by == Author(agent="http", client="cursor-vscode", person="tester")
    assert calls.seen == ["cursor-vscode"] * 3  # every call, even one the server refuses


# -- extras -----------------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_extras_are_off_by_default(graph_mcp: GraphMCP) -> None:
    assert not graph_mcp.extras
    async with memory_client(graph_mcp, "t") as client:
        listed = (await client.list_tools()).tools
        ignored = await client.call_tool("read_graph", {"limit": 1})  # not a known argument: dropped, as zod does
    assert [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed] == reference_tools()
    assert ignored.structured_content == {"entities": [], "relations": []}


@pytest.mark.anyio
async def test_extras_add_paging_to_read_graph_and_search_nodes_only(store: Store, calls: Calls) -> None:
    gm = GraphMCP(Graph(store), identify=calls.identify, extras=True)
    gm.graph.create_entities([Entity(f"n{i}", "kind", (f"obs {i}",)) for i in range(5)])
    async with memory_client(gm, "pager") as client:
        listed = {
            t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True)
            for t in (await client.list_tools()).tools
        }
        page = await client.call_tool("read_graph", {"limit": 2, "offset": 1})
        names = await client.call_tool("search_nodes", {"query": "OBS", "namesOnly": True, "offset": 3})
        plain = await client.call_tool("read_graph", {})
        bad = await client.call_tool("read_graph", {"limit": 0, "offset": 1.5, "namesOnly": "yes"})
    for official in reference_tools():
        ours = listed[official["name"]]
        if official["name"] in ("read_graph", "search_nodes"):
            added = set(ours["inputSchema"]["properties"]) - set(official["inputSchema"]["properties"])
            assert added == {"limit", "offset", "namesOnly"}
            assert ours["inputSchema"].get("required") == official["inputSchema"].get("required")  # all optional
        else:
            assert ours == official
    assert page.structured_content == gm.graph.page(limit=2, offset=1).to_json()
    assert page.structured_content["total"] == 5 and len(page.structured_content["entities"]) == 2
    assert names.structured_content == {"names": ["n3", "n4"], "relations": [], "total": 5}
    assert wire(names)["content"][0]["text"] == json.dumps(names.structured_content, indent=2)
    assert plain.structured_content is not None and "total" not in plain.structured_content  # the official answer
    assert wire(bad)["content"][0]["text"].endswith(
        "Too small: expected number to be >=1 at limit\n"
        "Invalid input: expected int, received number at offset\n"
        "Invalid input: expected boolean, received string at namesOnly"
    )


def test_a_huge_integer_argument_is_checked_without_overflowing() -> None:
    """Found by tests/fuzz: `limit: 10**400` made the check itself fail (int too large to convert to float)."""
    paging = {"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}}
    assert schema_issues({"limit": 10**400}, paging) == []
    assert schema_issues({"limit": -(10**400)}, paging) == ["Too small: expected number to be >=1 at limit"]
    assert schema_issues({"limit": 1.5}, paging) == ["Invalid input: expected int, received number at limit"]
