"""The official memory server's nine tools (`@modelcontextprotocol/server-memory`) as an exact drop-in over the
knowledge graph: its tool list (vendored, package data), its argument checks and error texts, its result shapes, the
`memory://knowledge-graph` resource and the `notifications/resources/updated` its subscribers get.

Built on the lowlevel MCP `Server` because only that serves a foreign tool list unchanged. The graph semantics live in
`graph.Graph`; this module only adapts (mcp.md section 2 and Appendix A).
"""

from __future__ import annotations

import copy
import importlib.resources
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from json.encoder import encode_basestring as _quote  # C; the escapes of json.dumps(ensure_ascii=False)
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
from starlette.applications import Starlette

from . import __version__
from .errors import HivenoteError
from .graph import Graph, graph_json
from .model import Author, Entity, Relation

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
_TOOLS_FILE: Final = "official_memory_tools.json"
_FORGET_ON_CLOSE: Final = "hivenote.graph.forget_on_close"  # per-connection flag in `Connection.state`
_EXTRA_INPUTS: Final[dict[str, dict[str, Any]]] = {
    "limit": {
        "type": "integer",
        "minimum": 1,
        "description": "Return at most this many entities (with the relations touching them) and the total count",
    },
    "offset": {"type": "integer", "minimum": 0, "description": "Skip this many entities first, to page through"},
    "namesOnly": {"type": "boolean", "description": "Return entity names instead of whole entities"},
}
_PAGED_TOOLS: Final = ("read_graph", "search_nodes")

Identify = Callable[[ServerRequestContext[Any], str], Author]


def official_tools() -> list[dict[str, Any]]:
    """The official `tools/list` result's tools, as recorded from the real server (shipped as package data)."""
    assert __package__, "imported as hivenote.server.mcp_graph"
    text = importlib.resources.files(__package__).joinpath(_TOOLS_FILE).read_text(encoding="utf-8")
    tools: list[dict[str, Any]] = json.loads(text)["tools"]
    return tools


def _with_paging(tool: dict[str, Any]) -> dict[str, Any]:
    """`read_graph` / `search_nodes` taking `limit`, `offset`, `namesOnly`, and answering with a `total`."""
    tool = copy.deepcopy(tool)
    tool["inputSchema"]["properties"].update(copy.deepcopy(_EXTRA_INPUTS))
    output = tool["outputSchema"]
    output["properties"]["names"] = {"type": "array", "items": {"type": "string"}}
    output["properties"]["total"] = {"type": "integer"}
    output["required"] = ["relations"]  # a names-only page has `names` instead of `entities`
    return tool


# -- arguments: the official server's zod checks, message for message -------------------------------------------------

_MISSING: Final = object()


def _received(value: object) -> str:
    """zod's name for the type of a JSON value."""
    if value is _MISSING:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _at(path: tuple[str | int, ...]) -> str:
    """The TypeScript SDK's issue path: ` at entities[0].entityType` (nothing for the arguments object itself)."""
    if not path:
        return ""
    out = str(path[0])
    for part in path[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return f" at {out}"


def schema_issues(value: object, schema: Mapping[str, Any], path: tuple[str | int, ...] = ()) -> list[str]:
    """What zod reports for `value` against the JSON Schema it generated (objects, arrays, strings, plus the
    integers and booleans of the paging extras), in schema order, one line per issue."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"Invalid input: expected object, received {_received(value)}{_at(path)}"]
        required = set(schema.get("required", ()))
        issues: list[str] = []
        for key, sub in schema.get("properties", {}).items():
            item = value.get(key, _MISSING)
            if item is not _MISSING or key in required:
                issues += schema_issues(item, sub, (*path, key))
        return issues  # unknown keys are dropped, not reported, as zod does
    if kind == "array":
        if not isinstance(value, list):
            return [f"Invalid input: expected array, received {_received(value)}{_at(path)}"]
        return [issue for i, item in enumerate(value) for issue in schema_issues(item, schema["items"], (*path, i))]
    if kind == "integer":
        if _received(value) != "number":
            return [f"Invalid input: expected number, received {_received(value)}{_at(path)}"]
        assert isinstance(value, int | float)
        if isinstance(value, float) and not value.is_integer():  # not float(value): a huge int overflows it
            return [f"Invalid input: expected int, received number{_at(path)}"]
        if "minimum" in schema and value < schema["minimum"]:
            return [f"Too small: expected number to be >={schema['minimum']}{_at(path)}"]
        return []
    if kind in ("string", "boolean") and _received(value) != kind:
        return [f"Invalid input: expected {kind}, received {_received(value)}{_at(path)}"]
    return []


# -- the nine tools over Graph (synchronous: they run in a worker thread) --------------------------------------------

Answer = tuple[str, dict[str, Any]]  # (content[0].text, structuredContent)


def js_stringify(value: Any) -> str:
    """JavaScript's `JSON.stringify(value, null, 2)`, which the official server puts in `content[0].text`: the text of
    `json.dumps(value, indent=2, ensure_ascii=False)`, made without its pure-Python indenting encoder (most of a big
    read_graph's time went there)."""
    out: list[str] = []
    _indented(value, "\n", out)
    return "".join(out)


def _indented(value: Any, newline: str, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        if all(type(item) is str for item in value.values()):  # a relation: one join
            out.append("{" + inner + ("," + inner).join(_quote(k) + ": " + _quote(v) for k, v in value.items()))
        else:
            sep = "{" + inner
            for key, item in value.items():
                out.append(sep + _quote(key) + ": ")
                _indented(item, inner, out)
                sep = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        if all(type(item) is str for item in value):  # observations: one join
            out.append("[" + inner + ("," + inner).join(map(_quote, value)))
        else:
            sep = "[" + inner
            for item in value:
                out.append(sep)
                _indented(item, inner, out)
                sep = "," + inner
        out.append(newline + "]")
    else:  # numbers, booleans, null
        out.append(json.dumps(value))


def _relations(items: list[dict[str, str]]) -> list[Relation]:
    return [Relation(r["from"], r["to"], r["relationType"]) for r in items]


def _deleted(what: str) -> Answer:
    message = f"{what} deleted successfully"
    return message, {"success": True, "message": message}


def graph_text(entities: Iterable[Entity], relations: Iterable[Relation]) -> str:
    """`js_stringify(graph_json(entities, relations))` written straight from the objects: a graph is the biggest
    answer there is (read_graph), and this is four times quicker than walking its JSON value."""
    ents = ",\n    ".join(
        f'{{\n      "name": {_quote(e.name)},\n      "entityType": {_quote(e.entityType)},\n      "observations": '
        + ("[\n        " + ",\n        ".join(map(_quote, e.observations)) + "\n      ]" if e.observations else "[]")
        + "\n    }"
        for e in entities
    )
    rels = ",\n    ".join(
        f'{{\n      "from": {_quote(r.from_)},\n      "to": {_quote(r.to)},\n      '
        f'"relationType": {_quote(r.relationType)}\n    }}'
        for r in relations
    )
    ents = "[\n    " + ents + "\n  ]" if ents else "[]"
    rels = "[\n    " + rels + "\n  ]" if rels else "[]"
    return '{\n  "entities": ' + ents + ',\n  "relations": ' + rels + "\n}"


def _graph_answer(entities: list[Entity], relations: list[Relation]) -> Answer:
    return graph_text(entities, relations), graph_json(entities, relations)


def _run_tool(graph: Graph, tool: str, args: dict[str, Any], by: Author, *, paged: bool) -> Answer:
    # Without a paging argument the answer stays the official one (every relation, no `total`), extras or not.
    if paged and (tool in _PAGED_TOOLS) and any(key in args for key in _EXTRA_INPUTS):
        page = graph.page(
            args["query"] if tool == "search_nodes" else None,
            limit=None if "limit" not in args else int(args["limit"]),
            offset=int(args.get("offset", 0)),
            names_only=bool(args.get("namesOnly", False)),
        ).to_json()
        return js_stringify(page), page
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


def _connection(ctx: ServerRequestContext[Any]) -> Connection | None:
    """The client connection a request came on. SDK 2.3 gives lowlevel handlers no public path to it (its
    `Context.connection` exists, but the runner hands handlers a `ServerRequestContext`); the per-request
    `ServerSession` holds it, and only it knows when the connection ends."""
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


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
        raw = [_with_paging(t) if extras and t["name"] in _PAGED_TOOLS else t for t in official_tools()]
        self._tools = [Tool.model_validate(t) for t in raw]
        self._schemas = {t["name"]: t["inputSchema"] for t in raw}
        self._subscribers: dict[str, ServerSession] = {}  # connection key -> the session it subscribed on
        self._published = graph.store.state.graph_version
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

    def http_app(self, path: str, **options: Any) -> Starlette:
        """The Streamable HTTP endpoint at `path` (`options` as the SDK's). The tools never talk back during a call
        (change notifications go out on the session's GET stream), so each answer is one JSON body: a per-call SSE
        stream cost its tasks and framing on both ends, the larger part of a small call."""
        return self.server.streamable_http_app(streamable_http_path=path, json_response=True, **options)

    # -- tools --------------------------------------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=self._tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> dict[str, Any]:
        name, args = params.name, params.arguments or {}
        author = self._identify(ctx, name)
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
        run = partial(_run_tool, self.graph, name, args, author, paged=self.extras)
        try:
            answer = self._at_once(name, args, run)
            if answer is None:
                answer = await anyio.to_thread.run_sync(run)
        except HivenoteError as exc:  # EntityNotFound carries the official text; others say what to do next
            return _result(str(exc), error=True)
        if name in MUTATIONS:  # even a no-op one, like the official server, and before the answer
            await self._notify()
        return _result(*answer)

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
        connection = _connection(ctx)
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
        connection = _connection(ctx)
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

    @property
    def subscribers(self) -> int:
        """How many connections are subscribed to the graph resource (status and tests)."""
        return len(self._subscribers)
