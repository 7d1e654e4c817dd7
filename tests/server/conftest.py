"""Fixtures for server tests: a real uvicorn on 127.0.0.1 over a real store (see live.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hivenote.server.agents import AgentTracker
from hivenote.server.app import create_app
from hivenote.server.auth import Tokens
from hivenote.server.serve import ServerThread, bind
from hivenote.server.settings import Settings
from hivenote.server.store import Store

if TYPE_CHECKING:  # mypy resolves tests/ from the project root; pytest puts this folder itself on sys.path
    from tests.server.live import Clock, Running, wait_until
else:
    from live import Clock, Running, wait_until


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    sock = bind("127.0.0.1", 0)
    settings = replace(Settings(data_dir=tmp_path / "data"), port=sock.getsockname()[1])
    clock = Clock()
    tracker = AgentTracker(now_ms=clock)
    tokens = Tokens(settings.data_dir / "tokens.json")
    with Store(settings.data_dir) as store:
        server = ServerThread(create_app(settings, store, tokens=tokens, tracker=tracker), settings, sock)
        server.start()
        wait_until(lambda: server.started or not server.thread.is_alive())
        assert server.started, server.error
        try:
            yield Running(f"http://127.0.0.1:{server.port}", tokens.default(), store, tracker, clock, tokens)
        finally:
            server.stop()
