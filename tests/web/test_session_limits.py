"""The MCP session table under one token's flood (issue 14 item 5): each person holds a bounded number of
sessions, their least recently used ones make room for their new ones, another person's agent always gets in, and
sessions left idle are forgotten."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from starlette.applications import Starlette

from hivenote.server.settings import Settings
from hivenote.server.storage.store import Store
from hivenote.server.tokens import Tokens
from hivenote.server.web.app import create_app
from hivenote.server.web.serve import ServerThread, bind
from tests.support.internals import open_sessions
from tests.support.live import initialize, mcp_session
from tests.support.wait import wait_until

FLOOD = 260  # more than one person may hold
INITIALIZE = initialize("flood")


@contextlib.contextmanager
def serving(data_dir: Path) -> Iterator[tuple[str, Tokens, Starlette]]:
    sock = bind("127.0.0.1", 0)
    settings = Settings(data_dir=data_dir, port=sock.getsockname()[1])
    tokens = Tokens(data_dir / "tokens.json")
    with Store(data_dir) as store:
        app = create_app(settings, store, tokens=tokens)
        server = ServerThread(app, settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        try:
            yield f"http://127.0.0.1:{server.port}", tokens, app
        finally:
            server.stop()


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
    return headers


def _open(http: httpx2.Client, url: str, token: str) -> str:
    answer = http.post(url, json=INITIALIZE, headers=_headers(token))
    assert answer.status_code == 200, answer.text
    return str(answer.headers["mcp-session-id"])


def _ping(http: httpx2.Client, url: str, token: str, session: str) -> int:
    answer = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=_headers(token, session))
    return answer.status_code


async def _tools(url: str, token: str) -> int:
    async with mcp_session(url, token, "cursor") as client:
        return len((await client.list_tools()).tools)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/graph"])
def test_one_token_flooding_sessions_keeps_its_own_bound_and_never_locks_out_another(tmp_path: Path, path: str) -> None:
    with serving(tmp_path / "data") as (base, tokens, _), httpx2.Client(timeout=30) as http:
        url = base + path
        flooder, other = tokens.add("flooder"), tokens.add("bo")
        opened = [_open(http, url, flooder) for _ in range(FLOOD)]
        alive = [session for session in opened if _ping(http, url, flooder, session) == 200]
        assert len(alive) < FLOOD, "every session of the flood is still held: nothing bounds one token"
        assert alive == opened[-len(alive) :], "the oldest sessions were not the ones dropped"
        # Another person's agent gets in and keeps its session while the flood goes on; so does the owner's.
        mine = _open(http, url, other)
        for _ in range(FLOOD):
            _open(http, url, flooder)
        assert _ping(http, url, other, mine) == 200
        assert anyio.run(_tools, url, tokens.default()) > 0
        assert anyio.run(_tools, url, other) > 0


def test_sessions_left_idle_are_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hivenote.server.mcp import common as mcp_common

    monkeypatch.setattr(mcp_common, "SESSION_IDLE_S", 1.0)
    with serving(tmp_path / "data") as (base, tokens, app), httpx2.Client(timeout=30) as http:
        for _ in range(5):
            _open(http, base + "/mcp", tokens.default())
        limits = app.state.session_limits["/mcp"]
        assert open_sessions(limits) == 5
        wait_until(lambda: open_sessions(limits) == 0, timeout=20)  # no request touches them meanwhile
