"""`hivenote stdio` driven over real stdio by the SDK's client: forwarding to a running server, starting one."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, TextContent

from hivenote.server.node import lock_holder
from hivenote.server.serve import bind
from hivenote.server.store import Store

if TYPE_CHECKING:  # mypy resolves tests/ from the project root; pytest puts this folder itself on sys.path
    from tests.server.live import Running, wait_until
else:
    from live import Running, wait_until


def bridge(data_dir: Path, port: int | None, *extra: str, name: str = "claude-ai") -> Client:
    where = ["--port", str(port)] if port is not None else []
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hivenote.server.cli", "--data-dir", str(data_dir), "stdio", *where, *extra],
        env={**os.environ},
    )
    return Client(params, client_info=Implementation(name=name, version="0.1.0"), mode="legacy")


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
    assert "Hivenote refused the request (401)" in " ".join(leaf_messages(raised.value))


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
    from hivenote.server.graph import Graph
    from hivenote.server.model import Entity

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
