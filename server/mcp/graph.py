"""The official memory server's nine tools (`@modelcontextprotocol/server-memory`) as an exact drop-in over the
knowledge graph: the tools (their wire format, checks and texts are wire.py's), the result shapes, the
`memory://knowledge-graph` resource and the `notifications/resources/updated` its subscribers get.

Built on the lowlevel MCP `Server` because only that serves a foreign tool list unchanged. The graph semantics live in
`graph.Graph`; this module only adapts (the official tool list is official_memory_tools.json; its answer texts
and argument checks are in wire.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Final

import anyio
import anyio.to_thread
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    EmptyResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    SubscribeRequestParams,
    TextResourceContents,
    Tool,
    UnsubscribeRequestParams,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.routing import Route

from .. import __version__
from ..core.errors import HivenoteError
from ..core.model import Author, Entity, Relation
from ..graph import Graph, graph_json
from . import sdk
from .direct import Connections, DirectCalls
from .encoded_graph import EncodedGraph
from .splice import Splices, Splicing, splices_of
from .wire import EXTRA_INPUTS, PAGED_TOOLS, graph_text, js_stringify, official_tools, schema_issues, with_paging

log = logging.getLogger(__name__)

SERVER_NAME: Final = "hivenote-graph"
GRAPH_URI: Final = "memory://knowledge-graph"
GRAPH_RESOURCE: Final = Resource(
    uri=GRAPH_URI,
    name="knowledge-graph",
    title="Knowledge Graph",
    description="The full knowledge graph with all entities and relations",
    mime_type="application/json",
)
MUTATIONS: Final = frozenset(
    (
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
    )
)
# Reads small enough to answer on the event loop (`GraphMCP._at_once`): a search scans at most this many entities,
# an open looks up at most this many names.
AT_ONCE_ENTITIES: Final = 5_000
AT_ONCE_NAMES: Final = 64
# A subscriber whose stream stopped draining must not hold a tool call hostage; past this, its notification is dropped.
SEND_TIMEOUT_S: Final = 2.0
_FORGET_ON_CLOSE: Final = "hivenote.graph.forget_on_close"  # per-connection flag in `Connection.state`

Identify = Callable[[ServerRequestContext[Any]], Author]


# -- the nine tools over Graph (synchronous: they run in a worker thread) --------------------------------------------

Answer = tuple[str, dict[str, Any]]  # (content[0].text, structuredContent)


def _relations(items: list[dict[str, str]]) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in items]


def _deleted(what: str) -> Answer:
    message = f"{what} deleted successfully"
    return message, {"success": True, "message": message}


def _graph_answer(entities: list[Entity], relations: list[Relation]) -> Answer:
    return graph_text(entities, relations), graph_json(entities, relations)


def _pages(tool: str, args: dict[str, Any], *, extras: bool) -> bool:
    # Without a paging argument the answer stays the official one (every relation, no `total`), extras or not.
    return extras and tool in PAGED_TOOLS and any(key in args for key in EXTRA_INPUTS)


def _run_tool(graph: Graph, tool: str, args: dict[str, Any], by: Author, *, page: bool) -> Answer:
    if page:
        part = graph.page(
            args["query"] if tool == "search_nodes" else None,
            limit=None if "limit" not in args else int(args["limit"]),
            offset=int(args.get("offset", 0)),
            names_only=bool(args.get("namesOnly", False)),
        ).to_json()
        return js_stringify(part), part
    if tool == "create_entities":
        new = [Entity(e["name"], e["entityType"], tuple(e["observations"])) for e in args["entities"]]
        added = [e.to_json() for e in graph.create_entities(new, by=by)]
        return js_stringify(added), {"entities": added}
    if tool == "create_relations":
        created = [r.to_json() for r in graph.create_relations(_relations(args["relations"]), by=by)]
        return js_stringify(created), {"relations": created}
    if tool == "add_observations":
        pairs = [(o["entityName"], o["contents"]) for o in args["observations"]]
        results = [{"entityName": n, "addedObservations": a} for n, a in graph.add_observations(pairs, by=by)]
        return js_stringify(results), {"results": results}
    if tool == "delete_entities":
        graph.delete_entities(args["entityNames"], by=by)
        return _deleted("Entities")
    if tool == "delete_observations":
        graph.delete_observations([(d["entityName"], d["observations"]) for d in args["deletions"]], by=by)
        return _deleted("Observations")
    if tool == "delete_relations":
        graph.delete_relations(_relations(args["relations"]), by=by)
        return _deleted("Relations")
    if tool == "read_graph":
        return _graph_answer(*graph.read_graph())
    if tool == "search_nodes":
        return _graph_answer(*graph.search_nodes(args["query"]))
    assert tool == "open_nodes", tool
    return _graph_answer(*graph.open_nodes(args["names"]))


def _result(text: str, structured: dict[str, Any] | None = None, *, error: bool = False) -> dict[str, Any]:
    """A `tools/call` result on the wire, shaped here rather than returned as a model: a `CallToolResult` always
    serializes `isError`, and the official server sends no `isError` key on success. The SDK validates it against its
    result model on the way out and drops `resultType` for the protocol versions that have none."""
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    if structured is not None:
        wire["structuredContent"] = structured
    if error:
        wire["isError"] = True
    return wire


def _splices(ctx: ServerRequestContext[Any]) -> Splices | None:
    """Where a big answer can go as bytes: a handshake-era HTTP request through `Splicing` (the SDK writes that answer
    as one JSON body, exactly as the spliced bytes are encoded; a 2026-era one is written another way)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    return splices_of(getattr(ctx.request, "scope", None))


def _key(connection: Connection) -> str:
    # stdio and in-memory connections have no session id; a subscribed one is kept alive by its entry, so its `id`
    # cannot be reused before its teardown removes that entry.
    return connection.session_id or f"connection-{id(connection)}"


class GraphMCP:
    """The official memory server's MCP surface over a `Graph`: tools, the graph resource, its subscriptions."""

    def __init__(self, graph: Graph, *, identify: Identify, extras: bool = False, version: str = __version__) -> None:
        self.graph = graph
        self.extras = extras
        self._identify = identify
        raw = [with_paging(t) if extras and t["name"] in PAGED_TOOLS else t for t in official_tools()]
        self._tools = [Tool.model_validate(t) for t in raw]
        self._schemas = {t["name"]: t["inputSchema"] for t in raw}
        self._subscribers: dict[str, ServerSession] = {}  # connection key -> the session it subscribed on
        self._published = graph.store.state.graph_version
        self.encoded = EncodedGraph()  # read_graph's answer as bytes, for the HTTP endpoint's splice
        # The 2026-07-28 era has no resources/subscribe: its clients open `subscriptions/listen` streams instead.
        self._bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=version,
            get_tool_input_schema=self._schemas.get,
            on_list_tools=self._list_tools,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        # Registered as a raw handler, not `on_call_tool`, so it can answer a plain dict (see `_result`).
        self.server.add_request_handler("tools/call", CallToolRequestParams, self._call_tool)
        # Which SDK connection each HTTP session is, for tool calls answered in their HTTP request's task (`direct`).
        self.connections = Connections()
        self.server.middleware.append(self.connections.middleware)
        self.direct: DirectCalls | None = None

    def http_app(self, path: str, **options: Any) -> Starlette:
        """The Streamable HTTP endpoint at `path` (`options` as the SDK's). The tools never talk back during a call
        (change notifications go out on the session's GET stream), so each answer is one JSON body: a per-call SSE
        stream cost its tasks and framing on both ends, the larger part of a small call. A plain `tools/call` on a
        live session is answered in its HTTP request's task (`direct`), the rest by the SDK's transport; the
        endpoint splices big answers into either's (`splice`)."""
        app = self.server.streamable_http_app(streamable_http_path=path, json_response=True, **options)
        routes = []
        for route in app.router.routes:
            if isinstance(route, Route) and route.path == path:
                self.direct = DirectCalls(self.server, self.server.session_manager, self.connections, route.endpoint)
                route = Route(path, endpoint=Splicing(self.direct))
            routes.append(route)
        app.router.routes = routes
        return app

    # -- tools --------------------------------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=self._tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> dict[str, Any]:
        name, args = params.name, params.arguments or {}
        author = self._identify(ctx)
        schema = self._schemas.get(name)
        # The official server's SDK answers these two as tool errors, with its JSON-RPC error's text as the content.
        if schema is None:
            return _result(f"MCP error {INVALID_PARAMS}: Tool {name} not found", error=True)
        if issues := schema_issues(args, schema):
            return _result(
                f"MCP error {INVALID_PARAMS}: Input validation error: Invalid arguments for tool {name}: "
                + "\n".join(issues),
                error=True,
            )
        page = _pages(name, args, extras=self.extras)
        if name == "read_graph" and not page and (splices := _splices(ctx)) is not None:
            return await self._read_graph_spliced(splices)
        run = partial(_run_tool, self.graph, name, args, author, page=page)
        try:
            answer = self._at_once(name, args, run)
            if answer is None:
                answer = await anyio.to_thread.run_sync(run)
        except HivenoteError as exc:  # EntityNotFound carries the official text; others say what to do next
            return _result(str(exc), error=True)
        if name in MUTATIONS:  # even a no-op one, like the official server, and before the answer
            await self._notify()
        return _result(*answer)

    async def _read_graph_spliced(self, splices: Splices) -> dict[str, Any]:
        """The whole graph, the largest answer by far, written once per graph version and spliced into the SDK's
        answer as bytes. Unchanged since the last read, it is answered at once on the event loop."""
        encoded = self.encoded.current(self.graph.store.state)
        if encoded is None:
            encoded = await anyio.to_thread.run_sync(self.encoded.read, self.graph.store)
        text, structured = encoded
        return _result(splices.string(text), splices.object(structured))

    def _at_once(self, name: str, args: dict[str, Any], run: Callable[[], Answer]) -> Answer | None:
        """A small read answered on the event loop, when the store is free: handing it to a worker thread and back
        cost more than the read itself (about a millisecond of a 5 ms call here). Writes fsync, so never here."""
        small = (name == "open_nodes" and len(args["names"]) <= AT_ONCE_NAMES) or (
            name == "search_nodes" and self.graph.entities_at_most() <= AT_ONCE_ENTITIES
        )
        if not small:
            return None
        with self.graph.if_free() as free:
            return run() if free else None

    # -- the graph resource -------------------------------------------------------------------------------------------

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[GRAPH_RESOURCE])

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[])

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        if params.uri != GRAPH_URI:
            raise MCPError(INVALID_PARAMS, f"Resource {params.uri} not found")
        entities, relations = await anyio.to_thread.run_sync(self.graph.read_graph)
        text = graph_text(entities, relations)
        return ReadResourceResult(
            contents=[TextResourceContents(uri=GRAPH_URI, mime_type="application/json", text=text)]
        )

    # -- change notifications -----------------------------------------------------------------------------------------

    async def _subscribe(self, ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        connection = sdk.connection_of(ctx.session)
        # Other URIs are accepted and never fire, as the official server does.
        if params.uri == GRAPH_URI and connection is not None:
            key = _key(connection)
            self._subscribers[key] = ctx.session
            if not connection.state.get(_FORGET_ON_CLOSE):
                # A session that ends (DELETE, idle timeout, a closed stdio pipe) is forgotten when it ends:
                # sending to it would not fail, it would only drop the notification.
                connection.state[_FORGET_ON_CLOSE] = True
                connection.exit_stack.callback(self._subscribers.pop, key, None)
        return EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
        connection = sdk.connection_of(ctx.session)
        if params.uri == GRAPH_URI and connection is not None:
            self._subscribers.pop(_key(connection), None)
        return EmptyResult()

    async def publish_if_changed(self) -> None:
        """Notify subscribers when the graph moved since the last notification, whatever moved it: another MCP
        session, REST, the CLI, or another machine's shard folded in. The app calls this from a background task."""
        if self.graph.store.state.graph_version != self._published:
            await self._notify()

    async def _notify(self) -> None:
        # Everything folded so far is covered by this notification (it carries no payload: clients re-read), so a
        # concurrent `publish_if_changed` must not send it again. Reading one int needs no store lock.
        self._published = self.graph.store.state.graph_version
        async with anyio.create_task_group() as tg:
            for key, session in list(self._subscribers.items()):
                tg.start_soon(self._send, key, session)
        await self._bus.publish(ResourceUpdated(uri=GRAPH_URI))

    async def _send(self, key: str, session: ServerSession) -> None:
        """One subscriber's notification, on the stream its client opened for them (the SDK drops it if that stream
        is gone). Never raises: a tool call's answer must not depend on another client's connection."""
        try:
            with anyio.move_on_after(SEND_TIMEOUT_S) as scope:
                await session.send_resource_updated(GRAPH_URI)
            if scope.cancelled_caught:
                log.info("a graph subscriber did not take its notification within %ss; dropped it", SEND_TIMEOUT_S)
        except Exception:  # fan-out boundary: one broken subscriber must not fail the tool call or the others
            log.exception("could not notify a graph subscriber; forgetting it")
            self._subscribers.pop(key, None)
