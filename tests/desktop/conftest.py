"""The desktop tests' one fixture: a private X display and D-Bus session with a StatusNotifierItem watcher."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import Desktop, start_desktop


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    with start_desktop(tmp_path) as started:
        yield started
