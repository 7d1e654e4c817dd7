"""Requests past a limit (issue 14 item 7): every refusal reaches the MCP client as a JSON-RPC error with its
request's id and a message that says the limit, through `hivenote stdio` and over HTTP; the tools say their limits;
and /mcp/graph takes what the official memory server takes (a 1.5 MB create_entities)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from hivenote.server.notebook import MAX_TAGS, MAX_TITLE
from tests.support.live import INITIALIZED, initialize, mcp_session, serve

HUGE = "x" * (1 << 20)  # the body alone is past the 1 MiB request limit


def _lines(*messages: dict[str, object]) -> str:
    return "".join(json.dumps(m) + "\n" for m in messages)


def test_a_request_over_the_limit_through_stdio_gets_a_json_rpc_error_with_its_id(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        port = running.url.rsplit(":", 1)[1]
        argv = [sys.executable, "-m", "hivenote.server.cli", "--data-dir", str(tmp_path / "data"), "stdio"]
        stdin = _lines(
            initialize("zed"),
            INITIALIZED,
            {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "brain_remember", "arguments": {"kind": "fact", "title": "big", "body": HUGE}},
            },
        )
        done = subprocess.run(
            [*argv, "--port", port], input=stdin, capture_output=True, encoding="utf-8", timeout=120, check=False
        )
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        assert all(a.get("jsonrpc") == "2.0" for a in answers), answers  # never a bare {"error": ...} line
        (refused,) = [a for a in answers if a.get("id") == 7]
        assert "1 MiB" in refused["error"]["message"] and "nothing was written" in refused["error"]["message"]
        assert list(running.store.state.iter_notes()) == []


def test_a_request_over_the_limit_over_http_says_the_limit_to_the_sdk_client(tmp_path: Path) -> None:
    async def scenario(url: str, token: str) -> str:
        async with mcp_session(url + "/mcp", token, "cursor") as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("brain_remember", {"kind": "fact", "title": "big", "body": HUGE})
            return str(refused.value)

    with serve(tmp_path / "data") as running:
        said = anyio.run(scenario, running.url, running.token)
    assert "1 MiB" in said and "64 KiB" in said, said


def test_the_notebook_tools_state_their_limits(tmp_path: Path) -> None:
    async def scenario(url: str, token: str) -> dict[str, str]:
        async with mcp_session(url + "/mcp", token, "cursor") as client:
            return {t.name: json.dumps(t.model_dump(mode="json")) for t in (await client.list_tools()).tools}

    with serve(tmp_path / "data") as running:
        tools = anyio.run(scenario, running.url, running.token)
    for name in ("brain_remember", "brain_update"):
        assert "64 KiB" in tools[name] and "1 MiB" in tools[name], name
    # The limits are said from the values the notebook enforces, not typed again beside them.
    said = json.loads(tools["brain_remember"])["input_schema"]["properties"]
    assert f"up to {MAX_TITLE} characters" in said["title"]["description"]
    assert f"Up to {MAX_TAGS} short labels" in said["tags"]["description"]


def test_the_graph_endpoint_takes_a_create_entities_as_big_as_the_official_server_does(tmp_path: Path) -> None:
    entities = [{"name": f"e{i}", "entityType": "thing", "observations": ["o" * 1500]} for i in range(1000)]
    assert len(json.dumps(entities)) > 1_500_000

    async def scenario(url: str, token: str) -> bool:
        async with mcp_session(url + "/mcp/graph", token, "claude-ai") as client:
            result = await client.call_tool("create_entities", {"entities": entities})
            return bool(result.is_error)

    with serve(tmp_path / "data") as running:
        assert anyio.run(scenario, running.url, running.token) is False
        assert len(running.store.state.graph()[0]) == 1000
