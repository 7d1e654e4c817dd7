"""since / until on every surface of a real server over notes written at known times: the MCP tools (with the real
client), REST and its OpenAPI document, the command line, and an unreadable phrase answered with what would work."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from hivenote.server.cli.main import main
from hivenote.server.core.hlc import wall_ms
from tests.support.live import Running, mcp_client, serve
from tests.support.notes import seed_times as seed
from tests.support.rest_api import DOC, Api


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[tuple[Running, dict[str, str]]]:
    ids = seed(tmp_path / "data", wall_ms())
    with serve(tmp_path / "data") as running:
        yield running, ids


def text(result: CallToolResult) -> str:
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


def test_brain_list_and_brain_search_take_a_window_and_say_which(seeded: tuple[Running, dict[str, str]]) -> None:
    running, ids = seeded

    async def scenario() -> None:
        with anyio.fail_after(60):
            async with mcp_client(running, "claude-code") as client:
                listed = await client.call_tool("brain_list", {"since": "3 days ago"})
                assert not listed.is_error, text(listed)
                assert text(listed).startswith("Created or changed since ")
                assert ids["recent"] in text(listed) and ids["fresh"] in text(listed) and ids["old"] not in text(listed)
                assert listed.structured_content is not None
                assert [n["id"] for n in listed.structured_content["results"]] == [ids["fresh"], ids["recent"]]
                assert listed.structured_content["window"]["until"] is None
                found = await client.call_tool("brain_search", {"query": "drizzle", "since": "7d", "agent": "codex"})
                assert found.structured_content is not None
                assert [n["id"] for n in found.structured_content["results"]] == [ids["recent"]]
                mine = await client.call_tool("brain_search", {"query": "drizzle", "person": "ann", "until": "2d"})
                assert mine.structured_content is not None
                assert [n["id"] for n in mine.structured_content["results"]] == [ids["old"]]
                none = await client.call_tool("brain_search", {"query": "drizzle", "since": "30m"})
                assert text(none).startswith("No matching memories created or changed since ")
                bad = await client.call_tool("brain_list", {"since": "the other day"})
                assert bad.is_error
                assert "cannot read since 'the other day'" in text(bad) and "'yesterday'" in text(bad)
                tools = {t.name: t for t in (await client.list_tools()).tools}
                for name in ("brain_search", "brain_list"):
                    assert "pass since='yesterday'" in (tools[name].description or "")
                    assert {"since", "until", "person", "agent"} <= set(tools[name].input_schema["properties"])
                instructions = client.session.initialize_result.instructions  # type: ignore[union-attr]
                assert instructions and "since='yesterday'" in instructions

    anyio.run(scenario)


def test_rest_lists_searches_and_histories_take_the_same_window(seeded: tuple[Running, dict[str, str]]) -> None:
    running, ids = seeded
    api = Api(running)  # checks every answer against the served OpenAPI document
    try:
        listed = api("GET", "/api/notes", params={"since": "3 days ago"}, expect=200).body
        assert [n["id"] for n in listed["results"]] == [ids["fresh"], ids["recent"]] and listed["total"] == 2
        assert listed["window"]["text"].startswith("since ")
        searched = api("GET", "/api/notes", params={"q": "drizzle", "until": "3 days ago"}, expect=200).body
        assert [n["id"] for n in searched["results"]] == [ids["old"]]
        assert searched["window"]["text"].startswith("before ")
        everything = api("GET", "/api/notes", params={"q": "drizzle"}, expect=200).body
        assert everything["total"] == 3 and everything["window"] is None
        path = "/api/notes/{id}/history"
        history = api("GET", path, params={"since": "yesterday"}, expect=200, id=ids["old"]).body
        assert history["versions"] == [] and history["window"]["since"] is not None
        whole = api("GET", path, expect=200, id=ids["old"]).body
        assert len(whole["versions"]) == 1 and whole["window"] is None
        bad = api("GET", "/api/notes", params={"since": "soonish"}, expect=400).body
        assert bad["error"]["code"] == "invalid" and "'3 days ago'" in bad["error"]["message"]
    finally:
        api.close()
    parameters = {p["name"] for p in DOC["paths"]["/api/notes"]["get"]["parameters"]}
    assert {"since", "until", "person", "agent"} <= parameters


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_command_line_lists_searches_and_shows_history_in_a_window(tmp_path: Path) -> None:
    ids = seed(tmp_path / "data", wall_ms())
    data = str(tmp_path / "data")
    code, out, err = _cli("--data-dir", data, "list", "--since", "3 days ago")
    assert code == 0, err
    assert out.startswith("Created or changed since ") and ids["recent"] in out and ids["old"] not in out
    code, out, _ = _cli("--data-dir", data, "--json", "search", "drizzle", "--until", "7d", "--person", "ann")
    doc: dict[str, Any] = json.loads(out)
    assert code == 0 and [n["id"] for n in doc["results"]] == [ids["old"]] and doc["window"]["since"] is None
    code, out, _ = _cli("--data-dir", data, "history", ids["fresh"], "--since", "today")
    assert code == 0 and out.startswith("Versions made since ")
    code, out, _ = _cli("--data-dir", data, "history", ids["old"], "--since", "2h")
    assert code == 0 and "None in that time." in out
    code, _, err = _cli("--data-dir", data, "list", "--since", "fortnight")
    assert code == 1 and "cannot read since 'fortnight'" in err and "'last week'" in err
