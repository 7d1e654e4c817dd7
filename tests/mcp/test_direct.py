"""`tools/call` answered in its HTTP request's task (server/mcp/direct.py) against the SDK's own path: two whole
servers (create_app: the auth guard, the session limits, agent tracking) on two stores seeded alike, one answering
directly and one through the SDK's transport, sent the same random requests (valid and broken tool calls, other
methods, other headers, other tokens). Every answer must be the same bytes, and so must what they wrote (the ops and
their provenance) and whom they counted as online."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.types import Message

from hivenote.server.core.model import Author, Entity, Relation
from hivenote.server.graph import Graph
from hivenote.server.mcp import sdk as sdk_internals
from hivenote.server.mcp.graph import GraphMCP
from hivenote.server.mcp.wire import official_tools
from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.web.app import create_app
from tests.support.hostile_args import JSON, KEY, WRONG, broken, shaped
from tests.support.wait import wait_until

PATH = "/mcp/graph"
HOST = (b"host", b"127.0.0.1:7788")
SESSION = b"mcp-session-id"
TOOLS = {t["name"]: t["inputSchema"] for t in official_tools()}
KNOWN = ["Acme", "ana", "works_at", "Pays late", "bob"]
Answer = tuple[int, list[tuple[bytes, bytes]], bytes]


async def asgi(app: Starlette, method: str, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> Answer:
    """One HTTP request through the whole app, as uvicorn hands it over; the answer as it leaves the app."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": PATH,
        "raw_path": PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [HOST, *headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 7788),
    }
    messages: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    status, out_headers, out = 0, [], bytearray()

    async def receive() -> Message:
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status, out_headers
        if message["type"] == "http.response.start":
            status, out_headers = message["status"], list(message.get("headers", []))
        else:
            out.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, out_headers, bytes(out)


@dataclass
class Side:
    """One of the two servers, with its session open."""

    app: Starlette
    store: Store
    tokens: dict[str, str]  # "owner" / "ana" -> that person's token
    session: bytes
    protocol: bytes

    @property
    def graph_mcp(self) -> GraphMCP:
        mcp: GraphMCP = self.app.state.graph_mcp
        return mcp


@dataclass
class Pair:
    portal: BlockingPortal
    direct: Side
    sdk: Side


def _seed(store: Store) -> None:
    graph = Graph(store, author=Author("seed", "seed", ""))
    graph.create_entities([Entity("Acme", "org", ("Pays late",)), Entity("ana", "person", ("likes tea",))])
    graph.create_relations([Relation("ana", "Acme", "works_at")])


def _open(portal: BlockingPortal, app: Starlette, token: str) -> tuple[bytes, bytes]:
    """A session opened the way a client opens it; its id and the protocol version it agreed."""
    auth = (b"authorization", f"Bearer {token}".encode())
    accept = (b"accept", b"application/json, text/event-stream")
    kind = (b"content-type", b"application/json")
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tester", "version": "1"},
        },
    }
    status, headers, body = portal.call(asgi, app, "POST", [auth, accept, kind], json.dumps(init).encode())
    assert status == 200, body
    session = dict(headers)[SESSION]
    protocol = json.loads(body)["result"]["protocolVersion"].encode()
    more = [auth, accept, kind, (SESSION, session), (b"mcp-protocol-version", protocol)]
    done = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert portal.call(asgi, app, "POST", more, done)[0] == 202
    return session, protocol


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("direct")
    with start_blocking_portal("asyncio") as portal, contextlib.ExitStack() as stack:
        sides: list[Side] = []
        for name in ("direct", "sdk"):
            store = stack.enter_context(Store(root / name))
            _seed(store)
            app = create_app(Settings(data_dir=root / name), store)
            stack.enter_context(portal.wrap_async_context_manager(app.router.lifespan_context(app)))
            tokens = {"owner": app.state.services.tokens.default(), "ana": app.state.services.tokens.add("ana")}
            sides.append(Side(app, store, tokens, *_open(portal, app, tokens["owner"])))
        direct, sdk = sides
        assert sdk.graph_mcp.direct is not None
        sdk.graph_mcp.direct.on = False
        yield Pair(portal, direct, sdk)


# -- requests --------------------------------------------------------------------------------------------------------


@st.composite
def arguments(draw: st.DrawFn) -> tuple[str, Any]:
    """A tool name and its arguments: shaped by the tool's schema, or broken on purpose (the fuzz tests' strategies),
    or an unknown tool."""
    name = draw(st.sampled_from([*TOOLS, *TOOLS, "no_such_tool", ""]))
    schema = TOOLS.get(name, TOOLS["open_nodes"])
    args = draw(shaped(schema, KNOWN) if draw(st.booleans()) else broken(schema, KNOWN))
    return name, args


@st.composite
def params(draw: st.DrawFn) -> Any:
    name, args = draw(arguments())
    how = draw(st.sampled_from(["plain"] * 6 + ["no arguments", "no name", "odd name", "odd arguments", "meta", "odd"]))
    if how == "no arguments":
        return {"name": name}
    if how == "no name":
        return {"arguments": args}
    if how == "odd name":
        return {"name": draw(WRONG), "arguments": args}
    if how == "odd arguments":
        return {"name": name, "arguments": draw(WRONG)}
    if how == "meta":
        return {"name": name, "arguments": args, "_meta": draw(st.sampled_from([{"progressToken": 7}, {}, None]))}
    if how == "odd":
        return draw(WRONG)
    return {"name": name, "arguments": args}


IDS = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=8), st.sampled_from([None, 1.5, True, 2**64, [1]]))


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(["tools/call"] * 8 + ["tools/list", "ping", "resources/read", "no/such"]))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(IDS), "method": method, "params": draw(params())}
    how = draw(st.sampled_from(["plain"] * 8 + ["no id", "no params", "batch", "extra key", "not 2.0", "garbage"]))
    if how == "no id":
        del message["id"]
    elif how == "no params":
        del message["params"]
    elif how == "extra key":
        message[draw(KEY)] = draw(JSON)
    elif how == "not 2.0":
        message["jsonrpc"] = "1.0"
    elif how == "garbage":
        return draw(st.sampled_from([b"", b"{", b"null", b"[]", b'{"jsonrpc":"2.0","id":1,"method":"tools/call"']))
    out: Any = [message] if how == "batch" else message
    return json.dumps(out).encode()  # ASCII: a lone surrogate goes as its escape (the SDK's parser refuses it)


@dataclass(frozen=True)
class Headers:
    token: str  # "owner", "ana", "none", "wrong"
    accept: bytes | None
    kind: bytes | None
    session: str  # "own", "none", "unknown"
    protocol: str  # "agreed", "none", "unknown", "modern"
    agent: bytes | None


HEADERS = st.builds(
    Headers,
    token=st.sampled_from(["owner"] * 6 + ["ana"] * 3 + ["none", "wrong"]),
    accept=st.sampled_from([b"application/json, text/event-stream"] * 8 + [b"*/*", b"text/event-stream", None]),
    kind=st.sampled_from([b"application/json"] * 8 + [b"application/json; charset=utf-8", b"text/plain", None]),
    session=st.sampled_from(["own"] * 10 + ["none", "unknown"]),
    protocol=st.sampled_from(["agreed"] * 8 + ["none", "unknown", "modern"]),
    agent=st.sampled_from([None, b"claude-code/2.1", b"Cursor/1.0"]),
)


# Mostly a well-behaved client's headers (the owner's token, or a teammate's), so most calls reach the tools.
PLAIN = Headers("owner", b"application/json, text/event-stream", b"application/json", "own", "agreed", None)
ANY_HEADERS = st.one_of(st.just(PLAIN), st.just(replace(PLAIN, token="ana", agent=b"claude-code/2.1")), HEADERS)


def request_headers(side: Side, h: Headers) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    if h.token in side.tokens or h.token == "wrong":
        out.append((b"authorization", f"Bearer {side.tokens.get(h.token, 'x' * 43)}".encode()))
    if h.accept is not None:
        out.append((b"accept", h.accept))
    if h.kind is not None:
        out.append((b"content-type", h.kind))
    if h.session != "none":
        out.append((SESSION, side.session if h.session == "own" else b"0" * 32))
    versions = {"agreed": side.protocol, "unknown": b"1999-01-01", "modern": b"2026-07-28"}
    if h.protocol in versions:
        out.append((b"mcp-protocol-version", versions[h.protocol]))
    if h.agent is not None:
        out.append((b"user-agent", h.agent))
    return out


# -- what must be the same -------------------------------------------------------------------------------------------


def same_answer(side: Side, answer: Answer) -> Answer:
    """The answer with the session's id (each server has its own, and mints new ones) replaced by a placeholder."""
    status, headers, body = answer
    own = {side.session: b"<session>"}
    return status, [(k, own.get(v, b"<new>") if k == SESSION else v) for k, v in headers], body


def written(store: Store) -> list[dict[str, Any]]:
    """Every op this store wrote, with who wrote it (the node, sequence and clock differ between the two)."""
    assert store.shard_path is not None
    lines = store.shard_path.read_text(encoding="utf-8").splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in ("node", "seq", "hlc")} for line in lines]


def seen(side: Side) -> list[tuple[str, str, str, int, str]]:
    """The agents this server counts as online, and how many requests and which tool it saw last of each."""
    tracker = side.app.state.services.tracker
    return sorted((s.agent, s.person, s.client, s.requests, s.last_tool) for s in tracker.snapshot())


# -- the property ----------------------------------------------------------------------------------------------------


def test_every_request_is_answered_the_same_bytes_directly_and_through_the_sdk(pair: Pair) -> None:
    direct, sdk = pair.direct, pair.sdk
    assert direct.graph_mcp.direct is not None and sdk.graph_mcp.direct is not None
    before = direct.graph_mcp.direct.answered
    sent = 0

    @given(headers=ANY_HEADERS, body=bodies())
    @settings(
        max_examples=300,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # states move on with every call: a shrunk replay would differ
    )
    def both(headers: Headers, body: bytes) -> None:
        nonlocal sent
        answers = [
            same_answer(side, pair.portal.call(asgi, side.app, "POST", request_headers(side, headers), body))
            for side in (direct, sdk)
        ]
        sent += 1
        assert answers[0] == answers[1], body[:300]
        assert written(direct.store) == written(sdk.store), body[:300]
        # A notification is handled after its 202 (on the session's own task): both servers settle on the same.
        wait_until(lambda: seen(direct) == seen(sdk), what=lambda: f"the same agents seen: {seen(direct)} {seen(sdk)}")

    both()
    answered = direct.graph_mcp.direct.answered - before
    assert sdk.graph_mcp.direct.answered == 0
    assert answered >= sent // 4, (answered, sent)  # the direct path did answer, not only hand over
    assert written(direct.store) == written(sdk.store)


def test_a_plain_tool_call_is_answered_directly_and_a_refused_one_by_the_sdk(pair: Pair) -> None:
    side = pair.direct
    direct = side.graph_mcp.direct
    assert direct is not None
    owner = PLAIN
    arguments = {"names": ["ana"]}
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "open_nodes", "arguments": arguments}}
    before = direct.answered
    status, _, body = pair.portal.call(asgi, side.app, "POST", request_headers(side, owner), json.dumps(call).encode())
    assert status == 200 and json.loads(body)["result"]["structuredContent"]["entities"][0]["name"] == "ana"
    assert direct.answered == before + 1
    nobody = Headers("none", owner.accept, owner.kind, "own", "agreed", None)
    status, _, body = pair.portal.call(asgi, side.app, "POST", request_headers(side, nobody), json.dumps(call).encode())
    assert status == 401 and direct.answered == before + 1  # the guard answered: no token, no tool


async def _initialized_session(app: Starlette) -> list[tuple[bytes, bytes]]:
    """An initialized /mcp/graph session on `app` (inside its lifespan): the headers a request on it sends."""
    accept = (b"accept", b"application/json, text/event-stream")
    kind = (b"content-type", b"application/json")
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode()
    _, headers, _ = await asgi(app, "POST", [accept, kind], body)
    session = [accept, kind, (SESSION, dict(headers)[SESSION]), (b"mcp-protocol-version", b"2025-06-18")]
    done = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    assert (await asgi(app, "POST", session, done))[0] == 202
    return session


def test_a_session_used_only_by_direct_calls_stays_open_and_expires_once_idle(tmp_path: Path) -> None:
    """The SDK ends a session no request reached for its idle timeout. Calls answered directly never reach the
    session's transport, so they count the session busy the way the transport does: used every 0.1 s it outlives
    a 0.5 s timeout many times over, and left alone it still ends."""
    idle_s = 0.5
    with Store(tmp_path / "data") as store:
        _seed(store)
        mcp = GraphMCP(Graph(store), identify=lambda ctx: Author("test", "tester 1", ""))
        app = mcp.http_app(PATH, session_idle_timeout=idle_s)
        assert mcp.direct is not None
        direct = mcp.direct
        params = {"name": "open_nodes", "arguments": {"names": ["ana"]}}
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()

        async def scenario() -> tuple[list[int], int]:
            async with app.router.lifespan_context(app):
                session = await _initialized_session(app)
                statuses = []
                for _ in range(round(3 * idle_s / 0.1)):  # three timeouts' worth of calls, one every 0.1 s
                    statuses.append((await asgi(app, "POST", session, call))[0])
                    await anyio.sleep(0.1)
                answered = direct.answered
                with anyio.fail_after(20):  # left alone past its timeout, it ends (the SDK then answers 404)
                    while True:
                        await anyio.sleep(3 * idle_s)  # being idle is what is tested here
                        if (await asgi(app, "POST", session, call))[0] == 404:
                            break
                return statuses, answered

        statuses, answered = anyio.run(scenario)
        assert statuses == [200] * len(statuses)
        assert answered >= len(statuses)  # every one of them answered directly


def test_an_sdk_whose_internals_differ_is_refused_at_start_saying_what_to_install(tmp_path: Path) -> None:
    """What Hivenote reads of the SDK beyond its interface (mcp 2.3, all of it in server/mcp/sdk.py) may change in a
    later release: the server then refuses to start, naming what is missing and the release to install, instead of
    failing at an agent's first call. The installed SDK has all of it."""
    with Store(tmp_path / "data") as store:
        mcp = GraphMCP(Graph(store), identify=lambda ctx: Author("test", "tester 1", ""))
        mcp.http_app(PATH)
        manager = mcp.server.session_manager
        assert sdk_internals.missing(manager) == []
        del manager._session_owners  # as if a release had renamed it
        with pytest.raises(sdk_internals.SdkMismatch) as refused:
            sdk_internals.check(manager)  # what the app and the direct path run at start
        assert "StreamableHTTPSessionManager._session_owners" in str(refused.value)
        assert f"pip install 'mcp>={sdk_internals.TESTED},<" in str(refused.value)
