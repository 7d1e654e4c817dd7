"""The connected-agents list (issue 14 item 9): bounded however many client names call, and only real agents in it:
not refused requests, not the dashboard, plain curl or mcp-remote's `mcp-remote-fallback-test` probe."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import anyio

from hivenote.server.agents import AgentTracker
from hivenote.server.core.model import Author
from tests.support.live import exchange, mcp_session, serve


def test_the_tracker_holds_a_bounded_number_of_clients_newest_kept() -> None:
    clock = [1_000]
    tracker = AgentTracker(now_ms=lambda: clock[0])
    for i in range(12_433):  # the count of client names
        clock[0] += 1
        tracker.record(Author(agent="other", client=f"client-{i}"))
    seen = tracker.snapshot()
    assert len(seen) <= 500
    assert seen[0].client == "client-12432"  # the newest are the ones kept


def test_refused_calls_probes_the_dashboard_and_curl_are_not_agents(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        ana = running.tokens.add("ana")

        def get(path: str, headers: dict[str, str]) -> int:
            return exchange(urllib.request.Request(running.url + path, headers=headers))[0]

        # A refused request (a teammate asking for the owner's tokens), the dashboard, plain curl.
        assert get("/api/tokens", {"Authorization": f"Bearer {ana}", "User-Agent": "refused-agent/1.0"}) == 403
        owner = {"Authorization": f"Bearer {running.token}"}
        assert get("/api/status", {**owner, "X-Hivenote-Client": "hivenote-dashboard/0.1.0"}) == 200
        assert get("/api/status", {**owner, "User-Agent": "curl/8.5.0"}) == 200

        async def probe() -> None:  # what mcp-remote sends to find out which transport works
            async with mcp_session(running.url + "/mcp", running.token, "mcp-remote-fallback-test") as client:
                await client.list_tools()

        anyio.run(probe)
        status, _, body = exchange(urllib.request.Request(running.url + "/api/agents", headers=owner))
        assert status == 200
        assert json.loads(body)["agents"] == []
