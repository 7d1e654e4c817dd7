"""The server for real: uvicorn on 127.0.0.1, the MCP SDK's client over Streamable HTTP, plain HTTP for the guard."""

from __future__ import annotations

import contextlib
import http.client
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from hivenote.server.agents import agent_id
from hivenote.server.core.model import Author, Entity, Op
from hivenote.server.core.search import note_index
from hivenote.server.graph import Graph
from hivenote.server.mcp.wire import official_tools
from hivenote.server.tokens import Tokens
from hivenote.server.web.serve import PortInUse, bind
from tests.support.internals import added_op
from tests.support.live import Inbox, Running, fetch, mcp_client, serve, subscribe
from tests.support.notes import write_log
from tests.support.wait import wait_until


def text(result: CallToolResult) -> str:
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


def test_agents_share_notes_with_provenance_from_their_client_names(running: Running) -> None:
    async def scenario() -> None:
        with anyio.fail_after(30):
            async with mcp_client(running, "cursor-vscode") as cursor:
                stored = await cursor.call_tool(
                    "brain_remember",
                    {
                        "kind": "decision",
                        "title": "Use Drizzle, not Prisma",
                        "body": "Cold starts.",
                        "project": "shop-api",
                    },
                )
                assert not stored.is_error, text(stored)
                assert text(stored).startswith("Stored: [decision] Use Drizzle, not Prisma (shop-api)")
                assert stored.structured_content is not None
                note_id = stored.structured_content["note"]["id"]
            async with mcp_client(running, "claude-code") as claude:
                found = await claude.call_tool("brain_search", {"query": "drizzle"})
                assert note_id in text(found) and "Cursor" in text(found)
                updated = await claude.call_tool("brain_update", {"id": note_id, "body": "Cold starts; see #12."})
                assert not updated.is_error
                full = await claude.call_tool("brain_get", {"id": note_id})
                assert "Cold starts; see #12." in text(full)
                assert full.structured_content is not None
                assert full.structured_content["created_by"]["agent"] == "cursor"
                assert full.structured_content["updated_by"]["agent"] == "claude-code"
                assert full.structured_content["updated_by"]["client"] == "claude-code 1.7.0"

    anyio.run(scenario)


def test_tools_and_instructions_say_what_models_need_to_know(running: Running) -> None:
    async def scenario() -> None:
        async with mcp_client(running) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "brain_search",
                "brain_get",
                "brain_remember",
                "brain_update",
                "brain_list",
                "brain_forget",
            }
            assert tools["brain_search"].annotations and tools["brain_search"].annotations.read_only_hint
            assert tools["brain_forget"].annotations and tools["brain_forget"].annotations.destructive_hint
            assert "never a file path" in json.dumps(tools["brain_remember"].input_schema)
            assert "restored" in (tools["brain_forget"].description or "")
            instructions = client.session.initialize_result.instructions  # type: ignore[union-attr]
            assert instructions and "does not copy chat history" in instructions and "shop-api" in instructions

    anyio.run(scenario)


def test_mistakes_come_back_as_tool_errors_that_say_what_to_do(running: Running) -> None:
    async def scenario() -> None:
        async with mcp_client(running) as client:
            bad = await client.call_tool("brain_remember", {"kind": "fact", "title": "x", "project": "/home/me/api"})
            assert bad.is_error and "use 'api' instead of '/home/me/api'" in text(bad)
            missing = await client.call_tool("brain_get", {"id": "01NOPE0000"})
            assert missing.is_error and "No note with id" in text(missing)
            empty = await client.call_tool("brain_search", {"query": "nothing like this"})
            assert not empty.is_error
            assert text(empty).startswith("No matching memories. If this is a new decision or fact, store it")
            temporary = await client.call_tool("brain_remember", {"kind": "fact", "title": "tmp"})
            assert temporary.structured_content is not None
            gone = await client.call_tool("brain_forget", {"id": temporary.structured_content["note"]["id"]})
            assert "restored from the dashboard" in text(gone)

    anyio.run(scenario)
    assert next(iter(running.store.state.iter_notes())).trashed


def test_connected_agents_are_online_for_two_minutes_after_their_last_request(running: Running) -> None:
    async def scenario() -> None:
        async with mcp_client(running, "gemini-cli-mcp-client") as client:
            await client.list_tools()
            await client.call_tool("brain_list", {})

    anyio.run(scenario)
    (seen,) = running.tracker.online()
    assert (seen.agent, seen.last_tool) == ("gemini-cli", "brain_list") and seen.requests >= 3
    running.clock.now += 119_000
    assert running.tracker.online()
    running.clock.now += 2_000
    assert running.tracker.online() == []
    assert running.tracker.snapshot()[0].agent == "gemini-cli"


def test_requests_without_a_valid_token_are_refused_with_a_bearer_challenge(running: Running) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {running.token}"}):
        status, response_headers, body = fetch(f"{running.url}/mcp", headers)
        assert status == 401
        assert response_headers["www-authenticate"] == 'Bearer realm="hivenote"'
        assert "hivenote token show" in body["error"]["message"]
    assert fetch(f"{running.url}/api/health")[0] == 200


def test_a_person_token_added_while_running_works_at_once_and_names_the_author(running: Running) -> None:
    ana = Tokens(running.tokens.path).add("ana")  # as `hivenote token add ana` from another process would

    async def scenario() -> None:
        async with mcp_client(running, "cursor-vscode", token=ana) as client:
            stored = await client.call_tool("brain_remember", {"kind": "fact", "title": "Ana's fact"})
            assert stored.structured_content is not None
            assert stored.structured_content["note"]["created_by"]["person"] == "ana"

    anyio.run(scenario)
    Tokens(running.tokens.path).revoke("ana")
    assert fetch(f"{running.url}/mcp", {"Authorization": f"Bearer {ana}"})[0] == 401


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Host": "evil.example"}, 421, "bad_host"),
        ({"Origin": "http://evil.example"}, 403, "bad_origin"),
        ({"Origin": "null"}, 403, "bad_origin"),
        ({"Origin": "http://127.0.0.1:1"}, 403, "bad_origin"),
    ],
)
def test_foreign_hosts_and_origins_are_refused_on_every_route(
    running: Running, headers: dict[str, str], status: int, code: str
) -> None:
    for path in ("/api/health", "/mcp", "/", "/.well-known/oauth-protected-resource"):
        got, _, body = fetch(f"{running.url}{path}", headers)
        assert (got, body["error"]["code"]) == (status, code), path


def test_well_known_probes_get_a_json_404(running: Running) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"):
        status, headers, body = fetch(f"{running.url}{path}")
        assert status == 404 and headers["content-type"] == "application/json" and body["error"]["code"] == "not_found"


def raw_request(running: Running, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
    """http.client, so a refusal sent before the body was read is seen whatever the socket does next."""
    host, port = running.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.putrequest("POST", path)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        with contextlib.suppress(OSError):  # the server may close once it has answered
            connection.send(body)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def shard_size(running: Running) -> int:
    path = running.store.shard_path
    assert path is not None
    return path.stat().st_size if path.exists() else 0


@pytest.mark.parametrize("declared", [True, False])
def test_oversized_bodies_are_refused_and_write_nothing(running: Running, declared: bool) -> None:
    size = shard_size(running)
    body = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "id": 1, "params": {"x": "y" * (2 << 20)}}).encode()
    headers = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/json"}
    if declared:
        headers["Content-Length"] = str(len(body))
        status, answer = raw_request(running, "/mcp", headers, body)
    else:
        headers["Transfer-Encoding"] = "chunked"
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:65536], body[65536:])) + b"0\r\n\r\n"
        status, answer = raw_request(running, "/mcp", headers, chunks)
    # On /mcp a JSON-RPC error (issue 14: an MCP client shows its message, which says the limit).
    assert status == 413 and answer["error"]["code"] == -32600 and "1 MiB" in answer["error"]["message"]
    assert shard_size(running) == size


def test_a_port_in_use_is_a_clear_error(running: Running) -> None:
    port = int(running.url.rsplit(":", 1)[1])
    with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is already in use"):
        bind("127.0.0.1", port)


@pytest.mark.parametrize(
    ("name", "agent"),
    [
        ("cursor-vscode", "cursor"),
        ("claude-ai", "claude-desktop"),
        ("claude-code", "claude-code"),
        ("codex-mcp-client", "codex"),
        ("Codex", "codex"),
        ("gemini-cli-mcp-client", "gemini-cli"),
        ("Visual Studio Code", "vscode"),
        ("Visual-Studio-Code", "vscode"),
        ("windsurf-client", "windsurf"),
        ("Zed", "zed"),
        ("Cline", "cline"),
        ("Roo-Code", "roo-code"),
        ("opencode", "opencode"),
        ("continue-cli-client", "continue"),
        ("claude-ai (via mcp-remote 0.15.1)", "claude-desktop"),
        ("something-new", "other"),
    ],
)
def test_client_names_map_to_agent_products(name: str, agent: str) -> None:
    assert agent_id(name) == agent


def test_the_user_agent_names_the_product_when_client_info_does_not() -> None:
    assert agent_id(None, "claude-code/2.1.143 (external, cli)") == "claude-code"
    assert agent_id("", "undici") == "other"


def test_the_graph_endpoint_is_the_official_drop_in_and_tells_subscribers_of_changes_from_anywhere(
    running: Running,
) -> None:
    async def scenario() -> None:
        inbox = Inbox()
        with anyio.fail_after(30):
            async with mcp_client(running, "claude-ai", path="/mcp/graph", message_handler=inbox.handle) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                assert tools == [t["name"] for t in official_tools()]
                await subscribe(client)
                made = await client.call_tool(
                    "create_entities", {"entities": [{"name": "Ann", "entityType": "person", "observations": []}]}
                )
                assert not made.is_error
                await inbox.until(1)
                # A change that does not come through MCP at all (REST, the dashboard, another machine's shard).
                await anyio.to_thread.run_sync(
                    lambda: Graph(running.store).create_entities([Entity("Bob", "person", ())])
                )
                await inbox.until(2)
                read = await client.call_tool("read_graph", {})
                assert read.structured_content is not None
                assert [e["name"] for e in read.structured_content["entities"]] == ["Ann", "Bob"]

    anyio.run(scenario)
    ann = added_op(running.store.state, ("Ann", 0))
    assert ann is not None
    assert ann.by.agent == "claude-desktop"


def test_the_search_index_warms_batch_after_batch_without_waiting_a_tick_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big notebook's index is built in batches after start (the lock is free between them); until it is warm
    every search scans the whole notebook, so the batches follow each other instead of one per follow tick."""
    import hivenote.server.web.app as app

    data = tmp_path / "data"
    (data / "log").mkdir(parents=True)
    with open(data / "log" / "n-0001.jsonl", "wb") as fh:
        for seq in range(1, 301):
            fields = {"kind": "fact", "title": f"note {seq}", "body": "warm"}
            fh.write(Op("n-0001", seq, seq, 0, "note.set", {"id": f"N{seq:04}", "fields": fields}, Author()).encode())
    monkeypatch.setattr(app, "WARM_BATCH", 5)  # 60 batches: one per tick would take 30 s
    with serve(data) as server:
        wait_until(lambda: not note_index(server.store.state).pending, timeout=5)
        assert len(note_index(server.store.state).texts) == 300


def test_brain_remember_replaces_and_search_shows_the_newer_first(running: Running) -> None:
    async def scenario() -> None:
        with anyio.fail_after(60):
            async with mcp_client(running, "cursor-vscode") as cursor:
                old = await cursor.call_tool(
                    "brain_remember", {"kind": "decision", "title": "Jobs run on Celery", "project": "shop-api"}
                )
                assert old.structured_content is not None
                old_id = old.structured_content["note"]["id"]
                twin = await cursor.call_tool(
                    "brain_remember", {"kind": "decision", "title": "Jobs run on Celery workers", "project": "shop-api"}
                )
                assert f"replaces={old_id}" in text(twin)  # the duplicate hint offers the link
                assert twin.structured_content is not None
                twin_id = twin.structured_content["note"]["id"]
                linked = await cursor.call_tool("brain_update", {"id": twin_id, "replaces": old_id})
                assert not linked.is_error and linked.structured_content is not None
                assert linked.structured_content["replaces"] == old_id
                found = await cursor.call_tool("brain_search", {"query": "celery"})
                lines = text(found).splitlines()
                assert twin_id in lines[0] and f"replaces {old_id}" in lines[0]
                assert old_id in lines[1] and f"replaced by {twin_id}" in lines[1]

    anyio.run(scenario)


def test_a_server_saves_its_warm_index_and_the_next_start_takes_it(tmp_path: Path) -> None:
    """Once its index is warm a server saves it for the next start (cache/search.bin); the next start takes it, warm
    before its first request (and so does not write it again while nothing changed); a write makes the stop save it
    anew."""
    data = tmp_path / "data"
    write_log(data, 300)
    saved = data / "cache" / "search.bin"
    with serve(data) as server:
        wait_until(lambda: not note_index(server.store.state).pending and saved.exists(), timeout=10)
    first = saved.stat()
    with serve(data) as server:
        assert not note_index(server.store.state).pending  # taken before the server answered
    assert saved.stat().st_ino == first.st_ino  # the index it took was these ops' own: nothing written
    with serve(data) as server:
        server.notebook.remember(kind="fact", title="deploy on fridays", body="never")
    assert saved.stat().st_ino != first.st_ino  # saved again at the stop, with the new note
