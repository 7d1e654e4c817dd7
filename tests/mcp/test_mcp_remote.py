"""A real third-party client: `mcp-remote` (npm) bridging stdio to /mcp with a bearer header, as Claude Desktop
and others are configured to use it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from tests.support.live import Running
from tests.support.system import needs

MCP_REMOTE = Path(__file__).resolve().parents[1] / "tools" / "node_modules" / ".bin" / "mcp-remote"


@needs("Node.js and mcp-remote (npm ci --prefix tests/tools)")
def mcp_remote() -> Path:
    assert MCP_REMOTE.exists(), (
        "mcp-remote is missing: run `npm ci --prefix tests/tools` (the README's test command does)"
    )
    return MCP_REMOTE


def test_mcp_remote_reaches_hivenote_with_a_bearer_header_and_is_named_in_provenance(
    running: Running, tmp_path: Path
) -> None:
    params = StdioServerParameters(
        command=str(mcp_remote()),
        args=[f"{running.url}/mcp", "--header", "Authorization:${AUTH_HEADER}", "--transport", "http-only"],
        env={
            **os.environ,
            "AUTH_HEADER": f"Bearer {running.token}",
            "MCP_REMOTE_CONFIG_DIR": str(tmp_path / "mcp-auth"),
        },
    )

    async def scenario() -> None:
        with anyio.fail_after(90):
            client = Client(params, client_info=Implementation(name="claude-ai", version="0.1.0"), mode="legacy")
            async with client:
                stored = await client.call_tool("brain_remember", {"kind": "fact", "title": "Through mcp-remote"})
                assert not stored.is_error
                found = await client.call_tool("brain_search", {"query": "mcp-remote"})
                assert found.structured_content is not None and found.structured_content["total"] == 1

    anyio.run(scenario)
    (note,) = running.store.state.iter_notes()
    assert note.created_by.agent == "claude-desktop"
    assert note.created_by.client.startswith("claude-ai (via mcp-remote 0.15.1)")
