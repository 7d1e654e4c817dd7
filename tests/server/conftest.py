"""Fixtures for server tests: a real uvicorn on 127.0.0.1 over a real store (see live.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # mypy resolves tests/ from the project root; pytest puts this folder itself on sys.path
    from tests.server.live import Running, serve
else:
    from live import Running, serve


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data") as server:
        yield server
