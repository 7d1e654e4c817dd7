"""`hivenote stdio --bridge` driven over real stdio by the SDK's client: forwarding to a running server, starting one
(without `--bridge` the session is handed to the server where it can be: test_handoff.py)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import select
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, TextContent

from hivenote.server import __version__
from hivenote.server.mcp.stdio import Bridge, Connection, Pool, ProtocolError, event_data, read_body
from hivenote.server.settings import Settings
from hivenote.server.storage.identity import lock_holder
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.live import GRAPH_URI, Inbox, Running, call, free_port, subscribe
from tests.support.wait import wait_until

pytestmark = pytest.mark.system  # the stdio bridge and the servers it starts, as processes

NAME = Implementation(name="claude-ai", version="0.1.0")


def bridge_params(data_dir: Path, port: int | None, *extra: str) -> StdioServerParameters:
    where = ["--port", str(port)] if port is not None else []
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "hivenote.server.cli", "--data-dir", str(data_dir), "stdio", "--bridge", *where, *extra],
        env={**os.environ},
    )


def bridge(data_dir: Path, port: int | None, *extra: str, name: str = "claude-ai") -> Client:
    params = bridge_params(data_dir, port, *extra)
    return Client(params, client_info=Implementation(name=name, version="0.1.0"), mode="legacy")


@contextlib.contextmanager
def serve_on(data_dir: Path, port: int) -> Iterator[None]:
    """A real server for `data_dir` on a fixed port, so a second one can take the first one's place."""
    sock = bind("127.0.0.1", port)
    settings = replace(Settings(data_dir=data_dir), port=port)
    with Store(data_dir) as store:
        server = ServerThread(create_app(settings, store), settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        assert server.started, server.error
        try:
            yield
        finally:
            server.stop()


def test_a_stdio_client_reaches_the_running_server_and_is_named_in_provenance(running: Running) -> None:
    port = int(running.url.rsplit(":", 1)[1])

    async def scenario() -> str:
        with anyio.fail_after(60):
            async with bridge(running.store.data_dir, port) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "brain_remember" in names
                stored = await client.call_tool("brain_remember", {"kind": "fact", "title": "Via the bridge"})
                assert not stored.is_error
                found = await client.call_tool("brain_search", {"query": "bridge"})
                assert isinstance(found.content[0], TextContent)
                return found.content[0].text

    text = anyio.run(scenario)
    assert "Via the bridge" in text
    (note,) = running.store.state.iter_notes()
    assert (note.created_by.agent, note.created_by.client) == ("claude-desktop", "claude-ai 0.1.0")
    assert any(seen.agent == "claude-desktop" for seen in running.tracker.online())


def test_a_stdio_client_starts_a_headless_server_when_none_runs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with bind("127.0.0.1", 0) as probe:
        port = probe.getsockname()[1]

    async def scenario() -> None:
        with anyio.fail_after(60):
            async with bridge(data_dir, port, name="Zed") as client:
                result = await client.call_tool("brain_remember", {"kind": "fact", "title": "Started for me"})
                assert not result.is_error

    try:
        anyio.run(scenario)
        pid = lock_holder(data_dir)
        assert pid, "the bridge should have started `hivenote serve` for this data dir"
    finally:
        pid = lock_holder(data_dir)
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: lock_holder(data_dir) is None, timeout=20)
    with Store(data_dir, readonly=True) as store:
        (note,) = store.state.iter_notes()
        assert note.title == "Started for me" and note.created_by.agent == "zed"


def test_a_refused_token_becomes_a_json_rpc_error_not_a_hang(running: Running, tmp_path: Path) -> None:
    port = int(running.url.rsplit(":", 1)[1])
    other = tmp_path / "elsewhere"  # a data dir whose token this server does not know

    async def scenario() -> None:
        with anyio.fail_after(60):
            async with bridge(other, port) as client:
                await client.list_tools()

    with pytest.raises(BaseException) as raised:  # the SDK client wraps the JSON-RPC error in task groups
        anyio.run(scenario)
    # Not "needs a token" (401): the bridge tells the cause, another data dir's Hivenote on the port (issue 14).
    said = " ".join(leaf_messages(raised.value))
    assert f"is not the Hivenote of {other}" in said and "a Hivenote of another data dir answers there" in said


def leaf_messages(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [m for inner in exc.exceptions for m in leaf_messages(inner)]
    return [str(exc)]


def test_without_a_port_the_bridge_finds_the_running_server_where_it_announced_itself(running: Running) -> None:
    async def scenario() -> None:
        with anyio.fail_after(60):
            async with bridge(running.store.data_dir, None, "--graph", name="Zed") as client:
                made = await client.call_tool(
                    "create_entities", {"entities": [{"name": "Found", "entityType": "t", "observations": []}]}
                )
                assert not made.is_error

    anyio.run(scenario)
    assert running.store.state.entity_alive(("Found", 0))


def test_read_graph_of_more_than_a_megabyte_crosses_the_bridge(running: Running) -> None:
    """One answer past httpx2's 1 MiB per-event default: the whole graph of a big notebook."""
    from hivenote.server.core.model import Entity
    from hivenote.server.graph import Graph

    port = int(running.url.rsplit(":", 1)[1])
    entities = [Entity(f"entity {i}", "thing", (f"observation {i} " + "x" * 300,)) for i in range(4000)]
    Graph(running.store).create_entities(entities)

    async def scenario() -> str:
        with anyio.fail_after(120):
            async with bridge(running.store.data_dir, port, "--graph") as client:
                answer = await client.call_tool("read_graph", {})
                assert not answer.is_error, answer
                assert isinstance(answer.content[0], TextContent)
                return answer.content[0].text

    text = anyio.run(scenario)
    assert len(text) > 1 << 20 and text.count('"name": "entity ') == 4000


def test_a_subscribed_stdio_client_hears_of_changes_made_over_rest(running: Running) -> None:
    """The notification comes on the standalone stream the bridge holds open for the session."""
    port = int(running.url.rsplit(":", 1)[1])
    inbox = Inbox()

    async def scenario() -> None:
        with anyio.fail_after(60):
            params = bridge_params(running.store.data_dir, port, "--graph")
            async with Client(params, client_info=NAME, mode="legacy", message_handler=inbox.handle) as client:
                await subscribe(client)
                body = {"entities": [{"name": "Elsewhere", "entityType": "t", "observations": []}]}
                await anyio.to_thread.run_sync(call, port, running.token, "POST", "/api/graph/entities", body)
                await inbox.until(1)

    anyio.run(scenario)
    assert inbox.updates == [GRAPH_URI]


def test_a_kept_alive_connection_the_server_closed_is_replaced_by_a_new_one(tmp_path: Path) -> None:
    """The bridge keeps connections open between calls; one the server dropped meanwhile (a restart, its keep-alive
    timeout) must not fail the next call."""
    data_dir = tmp_path / "data"
    port = free_port()
    pool = Pool(f"http://127.0.0.1:{port}/api/health")

    async def health() -> int:
        async with pool.exchange("GET", [("Accept", "application/json")]) as (response, connection):
            assert json.loads(await read_body(connection)) == {"ok": True, "version": __version__}
            return int(response.status_code)

    async def scenario() -> list[int]:
        with anyio.fail_after(60):
            with serve_on(data_dir, port):
                first = await health()
                kept = list(pool._idle)
            with serve_on(data_dir, port):
                second = await health()
            assert kept and kept[0] not in pool._idle  # the first server's connection was not used again
            await pool.aclose()
            return [first, second]

    assert anyio.run(scenario) == [200, 200]


ANSWERS = {
    "length": b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{"a":1}',
    "chunked": b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"a\r\n4;x=y\r\n":1}\r\n0\r\nT: 1\r\n\r\n',
    "continue first": b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}',
    "until closed": b'HTTP/1.1 200 OK\r\n\r\n{"a":1}',
    "close after": b'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 7\r\n\r\n{"a":1}',
}


@pytest.mark.parametrize("how", list(ANSWERS))
def test_each_way_an_answer_is_framed_reads_the_same_body_and_says_if_the_connection_goes_on(how: str) -> None:
    """The bridge frames HTTP/1.1 itself (a general client's layers cost more than a small tool call): answers
    with a length, chunked (with extensions and trailers), after a 100 Continue, or ended by the connection."""

    async def scenario() -> tuple[int, bytes, bool, bytes]:
        requests: list[bytes] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            requests.append(head + await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r")[0])))
            writer.write(ANSWERS[how])
            await writer.drain()
            if how not in ("until closed", "close after"):
                await reader.read()  # the client keeps the connection; it ends it
            writer.close()
            await writer.wait_closed()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        with anyio.fail_after(10):
            pool = Pool(f"http://127.0.0.1:{port}/mcp/graph")
            async with pool.exchange("POST", [("Content-Type", "application/json")], b"{}") as (response, conn):
                body = await read_body(conn)
            kept = bool(pool._idle)
            await pool.aclose()
            server.close()
            await server.wait_closed()
        return response.status_code, body, kept, requests[0]

    status, body, kept, request = anyio.run(scenario)
    assert (status, body) == (200, b'{"a":1}')
    assert kept == (how in ("length", "chunked", "continue first"))
    assert request.startswith(b"POST /mcp/graph HTTP/1.1\r\nHost: 127.0.0.1:") and request.endswith(b"\r\n\r\n{}")


def test_a_header_value_with_a_line_end_is_never_sent() -> None:
    """A session id comes from the server's answer: one holding a line end would smuggle headers into the next
    request; it is refused before anything is written."""
    bridge = Bridge("http://127.0.0.1:1/mcp/graph", None, io.BytesIO())
    bridge.session_id = "abc\r\nAuthorization: Bearer stolen"

    async def post() -> None:
        connection = Connection(*await asyncio.open_connection("127.0.0.1", listening.getsockname()[1]))
        try:
            with anyio.fail_after(5):  # sent, it would wait for an answer that never comes
                await connection.request("POST", "/mcp/graph", bridge._post_headers(), b"{}")
        finally:
            await connection.aclose()

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        with pytest.raises(ProtocolError, match="line end"):
            anyio.run(post)


def test_an_answer_s_head_and_body_reach_the_bridge_together(running: Running) -> None:
    """uvicorn writes an answer's head and its body separately; the server has the kernel send them as one, so the
    bridge wakes once per answer, not once for the head and again for the body (472 of 500 arrived split before,
    on a loaded box). Where the system cannot (no TCP_CORK), the answers only have to arrive."""
    port = int(running.url.rsplit(":", 1)[1])
    request = f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    whole = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(50):
            conn.sendall(request)
            select.select([conn], [], [], 10)
            first = conn.recv(1 << 16)  # what the first wake-up finds
            head, _, body = first.partition(b"\r\n\r\n")
            length = int(
                next(v for k, _, v in (h.partition(b": ") for h in head.split(b"\r\n")) if k == b"content-length")
            )
            whole += len(body) == length
            while len(body) < length:
                body += conn.recv(1 << 16)
            assert json.loads(body)["ok"] is True
    assert whole == 50 or not hasattr(socket, "TCP_CORK")


class Chunks:
    """An answer body arriving in the given pieces."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)

    async def chunk(self) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


@pytest.mark.parametrize(
    "pieces",
    [
        (b'event: message\r\ndata: {"a":1}\r\n\r\ndata: {"b":\r\ndata: 2}\r\n\r\n',),
        (b"event: message\r", b'\ndata: {"a', b'":1}\r\n\r', b"\n", b'data: {"b":\ndata: 2}\n', b"\n"),
        (b': comment\n\nid: 7\nretry: 5\ndata:{"a":1}\n\n', b'data: {"b":\n', b"data: 2}\n\n", b'data: {"c"'),
    ],
)
def test_server_sent_events_are_read_whatever_the_pieces_they_arrive_in(pieces: tuple[bytes, ...]) -> None:
    async def events() -> list[bytes]:
        return [data async for data in event_data(Chunks(*pieces))]

    # Multi-line data is joined with LF; an event the stream ends inside is never complete, so never relayed.
    assert anyio.run(events) == [b'{"a":1}', b'{"b":\n2}']


class BrokenOff(Chunks):
    """An answer body whose connection drops after the given pieces."""

    async def chunk(self) -> bytes:
        if not self.pieces:
            raise anyio.EndOfStream
        return await super().chunk()


def past_initialize(out: io.BytesIO) -> Bridge:
    """A bridge writing to `out`, past the initialize answer (the one answer it looks into)."""
    bridge = Bridge("http://127.0.0.1:1/mcp/graph", None, out)
    bridge.protocol = "2025-06-18"
    return bridge


def test_a_json_answer_is_written_to_the_client_as_it_arrives_on_one_line() -> None:
    """Line ends are JSON whitespace: as spaces the message keeps its value and fits stdio's one-line framing."""
    pieces = (b'{"jsonrpc":"2.0",\n"id":2,', b'\r\n"result":{"text":"a\\nb ', b"\xc3", b'\xa9"}}')
    out = io.BytesIO()
    anyio.run(past_initialize(out)._pass_on, Chunks(*pieces))
    anyio.run(past_initialize(out)._pass_on, Chunks())  # a 202 for a notification has no body: nothing written
    written = out.getvalue()
    assert written.endswith(b"\n") and written.count(b"\n") == 1
    value = {"jsonrpc": "2.0", "id": 2, "result": {"text": "a\nb é"}}
    assert json.loads(written) == json.loads(b"".join(pieces)) == value


class Writes(io.BytesIO):
    """A client's stdin pipe that remembers each write: each is a wake-up of the client."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> int:  # type: ignore[override]  # the bridge writes bytes
        if data:
            self.writes.append(bytes(data))
        return super().write(data)


def test_an_answer_reaches_the_client_with_its_line_end_in_the_same_write() -> None:
    """A client reading lines wakes for each write: an answer and then its line end on their own cost it two."""
    out = Writes()
    anyio.run(past_initialize(out)._pass_on, Chunks(b'{"jsonrpc":"2.0","id":2,"result":{}}'))
    assert out.writes == [b'{"jsonrpc":"2.0","id":2,"result":{}}\n']
    out = Writes()
    anyio.run(past_initialize(out)._pass_on, Chunks(b'{"jsonrpc":"2.0",', b'"id":3,"result":{}}'))
    assert out.writes == [b'{"jsonrpc":"2.0",', b'"id":3,"result":{}}\n']


def test_an_answer_that_breaks_off_still_ends_its_line_so_the_error_after_it_can_be_read() -> None:
    out = io.BytesIO()
    bridge = past_initialize(out)
    with pytest.raises(anyio.EndOfStream):
        anyio.run(bridge._pass_on, BrokenOff(b'{"jsonrpc":"2.0","id":2,"res'))
    anyio.run(bridge._fail, {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}, "Hivenote is not reachable")
    partial, error, end = out.getvalue().split(b"\n")
    assert partial == b'{"jsonrpc":"2.0","id":2,"res' and end == b""
    assert json.loads(error)["error"]["message"] == "Hivenote is not reachable"


def test_a_server_restart_under_a_connected_stdio_client_goes_unnoticed(tmp_path: Path) -> None:
    """The tray's Stop/Start (or a crash and a new start) forgets every session; the bridge opens a new one with the
    client's own initialize and subscriptions, so the client's next call is answered and its updates keep coming."""
    data_dir, port = tmp_path / "data", free_port()
    inbox = Inbox()
    entity = {"entities": [{"name": "Before", "entityType": "t", "observations": []}]}

    async def scenario() -> str:
        with anyio.fail_after(60):
            first = contextlib.ExitStack()
            first.enter_context(serve_on(data_dir, port))
            params = bridge_params(data_dir, port, "--graph")
            async with Client(params, client_info=NAME, mode="legacy", message_handler=inbox.handle) as client:
                await subscribe(client)
                await client.call_tool("create_entities", entity)
                first.close()  # the server stops: its sessions are gone
                with serve_on(data_dir, port):
                    opened = await client.call_tool("open_nodes", {"names": ["Before"]})
                    heard = len(inbox.updates)
                    token = Tokens(data_dir / "tokens.json").default()
                    body = {"entities": [{"name": "After", "entityType": "t", "observations": []}]}
                    await anyio.to_thread.run_sync(call, port, token, "POST", "/api/graph/entities", body)
                    await inbox.until(heard + 1)
                    assert isinstance(opened.content[0], TextContent)
                    return opened.content[0].text

    assert json.loads(anyio.run(scenario))["entities"][0]["name"] == "Before"
